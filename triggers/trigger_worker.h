// TriggerWorker: runs handlers for every cell version written to a column.
//
//   cellar::TriggerWorker w(config);
//   w.on("trips", "BASE", "billing", [&](const cellar::CellEvent& e, cellar::TriggerContext& ctx) {
//     ... // read or write cells through ctx.store(); return an error Status to retry
//     return cellar::Status::Ok();
//   });
//   return w.run();  // until SIGTERM/SIGINT: finishes calls in flight, commits offsets, exits 0
//
// Handler contract
// - Delivery is at least once. A handler may see an event again (after a crash,
//   a rebalance, a replay or a DLQ retry), so it must be idempotent: write
//   derived cells at deterministic addresses (e.g. ref_key = the event's
//   ref_key) so a repeat is an identical put.
// - Order: events of one row are handled one at a time, in change-log order
//   (ref_key/added_id order). Different rows run concurrently on
//   TriggerOptions::concurrency threads; the handler must be thread-safe.
// - Return OK when done. Any other Status is a failed attempt: the event is
//   retried with exponential backoff and full jitter until
//   RetryPolicy::max_attempts, then set aside in the dead-letter topic
//   (dead_letter.h) and the trigger goes on. Return FailedPrecondition to set
//   the event aside at once (no retry makes sense). A thrown exception counts
//   as a failed attempt with its what() as the error.
// - An outage of the cluster's own store sets nothing aside: a call that
//   fails with Unavailable while a MariaDB host of the store does not answer
//   (CellStore::CheckReady) does not count as an attempt. The event is called
//   again with the growing backoff (up to max_backoff_ms) until the store
//   answers, then its attempts go on where they were (a host restart takes
//   longer than the default attempts' ~1.5 s; setting the events of a whole
//   outage aside would also pause the trigger via pause_after). The
//   retries count in cellar_trigger_retried_total and a warning is logged.
// - Erases reach the handler: an erase's tombstone is an event with
//   cell.tombstone true and a null body, in the row's order after its earlier
//   versions (like DynamoDB Streams' REMOVE and Debezium's delete). The filter
//   does not apply to tombstones (they have no body to test).
//   TriggerOptions::include_tombstones = false (YAML `include_tombstones:
//   false`) leaves them out. Handlers that read body fields must check
//   event.cell.tombstone first.
// - The event carries the cell's body (null only for tombstones). A body
//   larger than kafka.max_event_body_bytes, which the change log leaves out, is
//   read from the store before the handler runs; while that read fails
//   transiently the event waits (and its row with it); if the cell was purged
//   since, the event is passed by; any other read error sets it aside. The
//   filter applies to the read body.
// - Offsets are committed only for events that were handled or set aside.
// - Later events of a row whose event was set aside: handled as usual by
//   default (LaterEventsPolicy::kContinue); kSetAside sets them aside too.
// - Pause and resume (trigger_control.h): `cellar trigger pause NAME` (or
//   PauseTrigger()) pauses the trigger in every process running it within
//   about TriggerWorkerOptions::control_poll_ms plus its handler calls in
//   flight: no events are handled, offsets stay where they are and the lag
//   grows; cellar_trigger_paused{trigger} is 1. `cellar trigger resume NAME`
//   continues from the committed offsets, nothing lost (events in flight at
//   the pause may come again). A trigger paused there starts paused.
// - More than DeadLetterPolicy::pause_after set-aside events within its window
//   pause the trigger the same way (stored in trigger_control with the
//   reason, so every process pauses and `cellar trigger resume` continues)
//   and log an error: a person must look (Schemaless's "stop for a person").
// - Stopping is bounded. Stop() (SIGTERM in run()) ends every retry backoff
//   at once: an event waiting to be retried makes no new attempt, its offset
//   stays uncommitted and it is delivered again after a restart. Events not
//   started yet are not started (delivered again too), except those before
//   one of their partition that started, until drain_timeout_ms has passed:
//   an event handled before a clean stop is never delivered again. Stop()
//   then waits for the handler calls in flight (each attempt is waited for,
//   never cut: a webhook's is bounded by its timeout_ms), commits and leaves
//   the group. Bound: drain_timeout_ms + the longest handler call in flight
//   + about 1 s (the last commit and leaving the group), + a trigger_control
//   read in progress (bounded by the MySQL connect/io timeouts).
// - Each named trigger is its own Kafka consumer group
//   (<prefix>.trigger.<name>): triggers progress independently, and several
//   processes running the same trigger share its partitions.
// Threading: configure (on/on_webhook) before Start()/run(); Stop() and the
// status calls are thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "cells/cell_store.h"
#include "changelog/cell_event.h"
#include "config/cluster_config.h"
#include "triggers/trigger_config.h"

namespace cellar {

class TriggerContext {
 public:
  TriggerContext(CellStore* store, const std::string* trigger, int attempt)
      : store_(store), trigger_(trigger), attempt_(attempt) {}
  // The cell store of the worker's cluster (thread-safe).
  CellStore& store() { return *store_; }
  const std::string& trigger() const { return *trigger_; }
  // 1 for the first call of this event in this process; calls that failed
  // during a store outage do not count (see the handler contract above).
  int attempt() const { return attempt_; }

  // Batch handlers only: event `index` of this call failed although the call
  // returns OK (Lambda's ReportBatchItemFailures). The other events are done,
  // except the later events of a failed event's row in this call: the next
  // attempt holds the failed events and those, in order (see
  // TriggerBatchHandler). `why` is what a set-aside records. Ignored when the
  // call returns an error (the whole call failed) and for an index out of range.
  void ReportFailure(size_t index, Status why) { failures_.emplace_back(index, std::move(why)); }
  const std::vector<std::pair<size_t, Status>>& failures() const { return failures_; }

 private:
  CellStore* store_;
  const std::string* trigger_;
  int attempt_;
  std::vector<std::pair<size_t, Status>> failures_;
};

using TriggerHandler = std::function<Status(const CellEvent&, TriggerContext&)>;

// A batch handler (TriggerWorker::on_batch) gets several events in one call,
// as Lambda's event source mappings hand a function a batch of stream records:
// one round trip (a webhook POST, a bulk write) for many events. The events
// are in change-log order per row; one row's events are in one call at a
// time, and a later call has only its later events. The call's Status counts
// for every event in it: OK handles them all; an error retries the whole call
// (same events, same order) under the retry policy, then sets every event of
// it aside in the dead-letter topic (a stop while a batch is being set aside
// may set some of its events aside again after the restart: at least once).
// Partial failure: an OK call that reported events failed
// (TriggerContext::ReportFailure) finishes the rest, and retries the failed
// events with their rows' later events of the call, which keeps each row's
// order; what is left after the last attempt is set aside.
// The vector and the events are the runner's, valid for the call only.
// ctx.attempt() is the call's attempt.
using TriggerBatchHandler =
    std::function<Status(const std::vector<const CellEvent*>&, TriggerContext&)>;

struct TriggerOptions {
  RetryPolicy retry;
  DeadLetterPolicy dead_letter;
  std::vector<FieldCondition> filter;  // events whose body fails it are skipped
  int concurrency = 8;                 // handler threads
  int max_pending = 10000;             // queued events before polling pauses
  bool from_beginning = true;          // where a new consumer group starts
  bool include_tombstones = true;      // erases (tombstone events, body null) reach the handler
  // Batch handlers only (on_batch): events per call at most, and how long a
  // call of fewer waits for its oldest event to be that old (milliseconds)
  // so that more join it. Events are batched per lane (a hash of the row
  // key mod `concurrency`), so a lane's call holds events of several rows.
  int max_batch = 100;
  int batch_linger_ms = 0;
  // How long one handler call may take (milliseconds; 0: no bound). A call
  // past it is a failed attempt (DeadlineExceeded), retried and set aside
  // like any other, so a hung handler does not hold its row and its
  // partition's commits. C++ cannot cut the call short: it runs on, on a
  // thread of its own, and its outcome is ignored; a retry of the event may
  // run while it does (handlers are idempotent already). A per-event
  // handler's call runs on the pool thread under a watchdog, which at the
  // deadline gives the event's retries and its row to a new pool thread (no
  // cost per call but two mutex round trips); a batch handler's call is
  // handed to a thread of its own (two thread switches per batch).
  // Webhooks leave it 0: their own timeout_ms bounds each request.
  int handler_timeout_ms = 30000;
  // For a handler that forwards each event as published (webhooks): events
  // reach it with the change-log record's JSON text in
  // CellEvent::published_json, and with `filter` empty their body is never
  // parsed (cell.body null). Events that have no such text, because their
  // body was left out of the log and read from the store or they are
  // replayed from the store, come with cell.body and published_json empty.
  bool forward_published_json = false;
};

// Where a replay starts: a time (cells created at or after it), or per-shard
// added_ids (start after them; shards not listed start at the beginning).
struct ReplayFrom {
  std::optional<MicrosSinceEpoch> time;
  std::map<uint32_t, uint64_t> after_added_id;
};

// Parses "beginning" (or "0"), an RFC 3339 time, or "shard:added_id[,shard:added_id...]".
Result<ReplayFrom> ParseReplayFrom(const std::string& text);

struct TriggerPartitionStatus {
  std::string topic;
  int32_t partition = 0;
  int64_t committed = -1;  // next offset to read after a restart
  int64_t lag = 0;         // records behind the partition end
  uint64_t handled = 0, retried = 0, set_aside = 0;
  double latency_p50_ms = 0, latency_p99_ms = 0;
};

struct TriggerStatus {
  std::string name;
  bool paused = false;
  std::string pause_reason;  // while paused: the operator's or the dead-letter policy's
  std::vector<TriggerPartitionStatus> partitions;
};

struct TriggerWorkerOptions {
  // Where the worker registers its metrics (TriggerProbe, trigger_probe.h, the
  // consumer's and its store's group commit, cells/cell_store.h); not owned, must outlive the
  // worker. Null: a registry of the worker's own. The worker serves nothing: a program exports the
  // registry itself (server/metrics_endpoint.h).
  MetricsRegistry* metrics = nullptr;
  std::string client_id = "cellar-trigger";
  // How long Stop() waits for handler calls in flight before it stops waiting
  // for further ones (calls still running are waited for: none is cut).
  int drain_timeout_ms = 30000;
  // How often trigger_control (trigger_control.h) is read, milliseconds; 0:
  // never (no pause/resume without a restart, no start paused).
  int control_poll_ms = 1000;
};

class TriggerWorker {
 public:
  explicit TriggerWorker(const ClusterConfig& config, TriggerWorkerOptions options = {});
  ~TriggerWorker();

  // Registers a handler. InvalidArgument naming what is wrong for an unknown
  // datastore or column, an invalid or duplicate name, retry.max_attempts < 1
  // (nothing is registered); FailedPrecondition after Start()/run().
  [[nodiscard]] Status on(const std::string& datastore, const std::string& column,
                          const std::string& name, TriggerHandler handler,
                          TriggerOptions options = {});
  // Registers a batch handler (TriggerBatchHandler above): the same contract
  // as on(), except that a call holds up to options.max_batch events. Errors
  // as on(), and InvalidArgument for max_batch outside 1..10000 or
  // batch_linger_ms outside 0..60000. A replay (Replay) calls it with one
  // event at a time.
  [[nodiscard]] Status on_batch(const std::string& datastore, const std::string& column,
                                const std::string& name, TriggerBatchHandler handler,
                                TriggerOptions options = {});
  // Registers a YAML-defined webhook trigger (webhook.h). Errors as on(), and
  // InvalidArgument for a webhook the handler cannot be built from.
  [[nodiscard]] Status on_webhook(const WebhookTriggerConfig& config);

  // Starts consuming (triggers paused in trigger_control start paused) and
  // the trigger_control poller. Unavailable when Kafka cannot be reached; an
  // unreadable trigger_control is logged and read again every poll.
  Status Start();
  // Stops polling and retrying (see "Stopping is bounded"), waits for handler
  // calls in flight, commits the finished offsets, leaves the groups.
  // Idempotent; thread-safe.
  void Stop();
  // CheckKafkaAtStart (changelog/kafka/kafka_start_check.h: 1 when Kafka
  // cannot be used), Start(), wait for SIGTERM/SIGINT, Stop(). Returns the
  // process exit code.
  // REQUIRES: called from main before other threads exist (blocks the signals).
  int run();

  // Runs trigger `name` over the cell tables (shard_log), not Kafka, with or
  // without Start(): for
  // backfills and for history Kafka no longer has. Uses the same retry and
  // dead-letter policy; returns once every matching cell was handled or set
  // aside. May run while the trigger also consumes Kafka (duplicates are
  // allowed by the contract). NotFound for an unknown trigger.
  Status Replay(const std::string& name, const ReplayFrom& from);

  std::vector<TriggerStatus> status() const;
  // The registry in use (options.metrics or the worker's own).
  MetricsRegistry& metrics();
  CellStore& store();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
