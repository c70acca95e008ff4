// KeyedConsumer: the at-least-once consumer of the change log, in order per
// row, that the index worker and the triggers are built on. It owns one
// consumer-group member and everything between Kafka and a handler:
//
//  - subscription to the change logs of `datastores` plus `extra_topics` in
//    group `group_id`; partitions come and go with the group's rebalances;
//  - one polling thread, with back-pressure: while `max_pending` events are
//    queued or running it stops polling, so nothing more is fetched; when that
//    lasts over a second it pauses the assigned partitions instead and polls
//    on (rebalances are served, the member stays in the group) until half of
//    them finished;
//  - a keyed pool of `concurrency` threads (keyed_executor.h): records of one
//    Kafka key (the row key, on the change log and on a trigger's retry
//    topic) run one at a time in log order, different rows concurrently;
//  - bodies left out of the log (CellEvent::body_omitted): read from the
//    store before the handler runs (see "Omitted bodies");
//  - offsets (partition_offsets.h): per partition, the end of the longest
//    prefix of finished events is committed every `commit_interval_ms`, when
//    the group revokes the partition and on Stop(). A crash, a rebalance or a
//    stop re-delivers every unfinished event and skips none;
//  - Stop() with a bounded drain.
//
// Records. `decode` (default: DecodeCellEvent of the value) turns a record
// into the event to handle, or nullopt to pass it by; an error passes it by
// too, logged. Passed-by records are finished at once. With `handle` it runs
// on the pool, in the record's key order, just before the handler (so
// decoding uses every core); in batch mode on the polling thread (the lane
// needs the event).
//
// Handler. `handle` runs on a pool thread with the event, its body present
// unless it is a tombstone. It returns kDone when the event is finished
// (handled, set aside, or deliberately ignored): its offset may be committed.
// It returns kAbandoned only when it gave up because stopping() or paused():
// the event is never committed past and is delivered again after a restart or
// a rebalance. It must not throw (a throw is logged and counts as kAbandoned).
// Events not yet started when Stop() ends its drain, after Pause(), or whose
// partition was revoked meanwhile are abandoned without a handler call; at a
// stop or pause an event still starts (alone, or in a handle_batch call)
// when a later offset of its partition started, so the commit covers that one.
//
// Omitted bodies. The cell is read with CellStore::Get(datastore, row,
// column, ref_key); on success the event reaches the handler with the body
// and body_omitted false. On failure:
//   Unavailable, Aborted, DeadlineExceeded, ResourceExhausted: the event
//     waits (50 ms doubling to 2 s) and the read is tried again, until it
//     succeeds or the consumer stops or pauses (then it is abandoned). The
//     handler never sees the event without its body.
//   NotFound (the cell is no longer stored: its column's TTL passed or a
//   purge deleted it) and any other error: `unreadable(event, error)` decides
//   (the event still has body_omitted set and a null body): it finishes or
//   abandons the event, or returns nullopt to have the read waited for and
//   tried again like a transient one. Without `unreadable`, NotFound passes
//   the event by (logged) and other errors are tried again.
// Batch mode. With `handle_batch` set instead of `handle`, events are queued
// per lane (`lane(event)`; every event of one row must map to one lane) and
// a pool thread hands a lane's queued events, up to `max_batch`, in log order
// to one handle_batch call; while it runs, the lane's next events queue up for
// the next call (one call per lane at a time, lanes concurrently); with
// `batch_linger_ms` a call below max_batch waits for its oldest event to be
// that old, so that more events join it. kDone
// finishes every event of the call; kAbandoned (as for `handle`, only when
// stopping() or paused()) none of them. Events of one lane in one call may
// come from several partitions. An event whose
// body must be re-read is a call boundary: the events before it are handled
// first, so an `unreadable` decision never overtakes an earlier event. For
// handlers that write many events in one transaction (the index worker).
//
// Metrics (when `metrics` is set; consumer_probe.h): cellar_consumer_body_rereads_total{group,
// outcome=ok|retry|not_found|error}, one per read attempt;
// cellar_consumer_fetch_paused{group}, 1 while the assignment is paused;
// cellar_consumer_skipped_records_total{group}, records the topic's retention
// deleted before the group read them (each gap also logs an error naming the
// partition and offsets): the one way events are lost, said loudly;
// cellar_consumer_records_decoded_total{group}, one per record decoded.
//
// Threading: Start, Stop, Pause, Submit, Progress and the accessors may be
// called from any thread; Start and Stop by one thread at a time. Callbacks
// run on the polling thread (on_progress, lane, decode in batch mode) or the
// pool (handle, handle_batch, unreadable, decode with `handle`) and must be
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "cells/cell_store.h"
#include "changelog/cell_event.h"
#include "changelog/kafka/change_log_consumer.h"

namespace cellar {

// One event handed to a handler, with where it was read.
struct KeyedEvent {
  CellEvent event;
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t broker_timestamp_ms = 0;
  bool body_reread = false;  // the body was left out of the log and read from the store
};

enum class Disposition { kDone, kAbandoned };

// One-event mode: how a `handle` call that cannot return in time (a handler
// past its deadline, still running) lets its row go on without it
// (KeyedConsumer::CurrentHandOff).
class EventHandOff {
 public:
  virtual ~EventHandOff() = default;
  // Any thread, while the handle call runs: `rest` takes the call's place on
  // a pool thread, before the row's later events, and its Disposition
  // finishes the event as the call's would have. A new pool thread replaces
  // the call's, which runs on; what the call returns is then ignored. `rest`
  // runs as a handle call (CurrentHandOff works in it). False, and nothing
  // happens, once the call returned or gave the event away already.
  [[nodiscard]] virtual bool Give(std::function<Disposition()> rest) = 0;
};

// Where one partition of this member stands.
struct PartitionProgress {
  TopicPartitionId partition;
  int64_t committed = -1;  // next offset a restart reads (last commit); -1: none yet
  int64_t end = -1;        // partition end as last fetched; -1: unknown
  int64_t lag = 0;         // records between the finished prefix (or commit) and the end
  size_t open = 0;         // events received and not finished
  // Record timestamp (ms since the epoch; the relay stamps a cell's
  // created_at) of the oldest event received and not finished; when none is
  // open but lag > 0, of the record at the next offset to read, looked up in
  // Kafka once that position stayed put for two commit rounds (a paused
  // consumer); 0 when caught up or not known (yet).
  int64_t oldest_timestamp_ms = 0;
};

// Seconds from `p`'s oldest unprocessed event (oldest_timestamp_ms) to
// `now_ms` (DynamoDB's IteratorAge); 0 when caught up or not known.
double OldestUnprocessedAgeSeconds(const PartitionProgress& p, int64_t now_ms);

struct KeyedConsumerOptions {
  std::string group_id;                   // required
  std::string client_id = "cellar";       // Kafka client.id
  std::vector<std::string> datastores;    // their change logs are read
  std::vector<std::string> extra_topics;  // read too; `decode` must understand them
  bool from_beginning = true;             // where a group without commits starts
  int concurrency = 8;                    // pool threads
  int max_pending = 10000;                // queued or running events before fetching pauses
  int commit_interval_ms = 200;
  int max_batch = 500;  // batch mode: events per handle_batch call at most
  // Batch mode: a call of fewer than max_batch events waits until its oldest
  // event was queued this many milliseconds ago, so that at low rates a lane
  // makes fewer, larger calls (each event waits up to this much longer).
  // A lingering lane holds its pool thread, so keep concurrency at or above
  // the number of busy lanes. 0: a lane's events are handed on at once.
  int batch_linger_ms = 0;
  // Batch mode with `lane_group`: a call of fewer than this many events also
  // takes the queued events of its group's idle lanes (LaneQueues), so that
  // at low rates a group's lanes make one call, while at high rates each
  // lane keeps its own. 0: lanes never share a call.
  int lane_share_below = 0;
  std::string log_component = "consumer";  // component of the consumer's log lines
  MetricsRegistry* metrics = nullptr;      // not owned; may be null
};

struct KeyedConsumerCallbacks {
  // Pool (with `handle`) or polling thread (batch mode). Null:
  // DecodeCellEvent(record.value).
  std::function<Result<std::optional<CellEvent>>(const ConsumedRecord&)> decode;
  // Pool thread, one row at a time. Required unless handle_batch is set.
  std::function<Disposition(KeyedEvent&)> handle;
  // Batch mode (see above): pool thread, one call per lane at a time, events
  // in log order. Set it with `lane`, instead of `handle`.
  std::function<Disposition(std::vector<KeyedEvent*>&)> handle_batch;
  // Batch mode: the lane of an event (polling thread).
  std::function<std::string(const CellEvent&)> lane;
  // Batch mode, optional: the group of a lane (polling thread), a function
  // of the lane's name so that all its events are in one group. With
  // options.lane_share_below, a call may then carry the queued events of
  // its group's idle lanes too, each lane's in log order after the call's
  // own (LaneQueues), so handle_batch must accept events of several lanes
  // of one group. Null or "": calls of one lane.
  std::function<std::string(const std::string& lane)> lane_group;
  // Pool thread: an omitted body could not be read and the error is not
  // transient (see "Omitted bodies"). nullopt: wait and read it again.
  std::function<std::optional<Disposition>(KeyedEvent&, const Status&)> unreadable;
  // Polling thread, after each commit round, with Progress(). May be null.
  std::function<void(const std::vector<PartitionProgress>&)> on_progress;
};

class KeyedConsumer {
 public:
  // `store` re-reads omitted bodies and names the cluster (its config()); not
  // owned, it must outlive the consumer. The pool runs from here on, so
  // Submit() works without Start().
  KeyedConsumer(CellStore* store, KeyedConsumerOptions options, KeyedConsumerCallbacks callbacks);
  ~KeyedConsumer();  // Stop(0)

  KeyedConsumer(const KeyedConsumer&) = delete;
  KeyedConsumer& operator=(const KeyedConsumer&) = delete;

  // Joins the group and starts polling. InvalidArgument for an unknown
  // datastore, a bad Kafka setting, a missing handler or both handlers, or
  // handle_batch without lane; FailedPrecondition
  // when already started or stopped. Nothing runs after an error.
  Status Start();

  // Stops polling; lets queued and running events finish for up to
  // drain_timeout_ms (retries and re-reads go on; after Pause(), or once
  // stopping, only the events before a started event of their partition
  // start, since the commit cannot skip them); then stopping() turns true:
  // waits end at once, and when the drain timed out no event starts any more
  // (they are delivered again); then commits the finished prefix and leaves
  // the group. Returns once no handler runs (a handler inside one long call
  // delays it; one that gave its event on, EventHandOff, does not). Idempotent.
  void Stop(int drain_timeout_ms);

  // Stops fetching and delivering for good (until a new consumer starts):
  // queued events are abandoned, so they are delivered again after a restart,
  // except those before a started event of their partition (see Stop()).
  // For "stop for a person". Idempotent.
  void Pause();

  bool paused() const;
  bool stopping() const;

  // Waits `ms`, or less when the consumer starts stopping. True when the whole
  // wait passed without stopping (for handlers' backoff).
  bool WaitUnlessStopping(int ms);

  // Inside a one-event `handle` call (or a `rest` given on): the hand-off of
  // the event it handles. Null elsewhere: batch mode, Submit()ted tasks,
  // threads not of a consumer's pool.
  static std::shared_ptr<EventHandOff> CurrentHandOff();

  // Runs `task` on the pool after every task queued for `row_key`: work that
  // does not come from the log (a replay) keeps the row's one-at-a-time order.
  void Submit(const std::string& row_key, std::function<void()> task);

  // Every partition this member has read since it was assigned.
  std::vector<PartitionProgress> Progress() const;

  const std::string& group() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
