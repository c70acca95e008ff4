// TriggerRunner: one named trigger (see trigger_worker.h) on a KeyedConsumer
// (changelog/keyed_consumer.h), which owns its consumer group, polling,
// offsets, keyed pool and the reading of omitted bodies. The runner decides
// which events reach the handler (column, tombstones, filter), runs the
// handler with retries, sets events aside in the dead-letter topic, pauses
// after too many, and replays from the cell tables on the same pool.
//
// Pause and resume (trigger_control.h): a paused runner stops its consumer
// (the finished prefix is committed, the member leaves the group, everything
// else is delivered again later) and a resume starts a new consumer of the
// same group, which reads on from the committed offsets.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "changelog/kafka/record_writer.h"
#include "changelog/keyed_consumer.h"
#include "triggers/internal/call_watchdog.h"
#include "triggers/internal/deadline_caller.h"
#include "triggers/trigger_probe.h"
#include "triggers/trigger_worker.h"

namespace cellar::internal {

struct TriggerSpec {
  std::string name;
  std::string datastore;
  std::string column;
  TriggerHandler handler;             // exactly one of handler and batch_handler is set
  TriggerBatchHandler batch_handler;  // batch mode (TriggerWorker::on_batch)
  TriggerOptions options;
};

class TriggerRunner {
 public:
  // None of config, store, writer and probe is owned; all outlive the runner.
  TriggerRunner(TriggerSpec spec, const ClusterConfig& config, CellStore* store,
                KafkaRecordWriter* writer, TriggerProbe* probe, std::string client_id);
  // Stop(0), then waits for handler calls past their deadline to return.
  ~TriggerRunner();

  // Creates the DLQ and retry topics and starts consuming the change log
  // (unless `paused`: then consuming starts at the first Control(false)).
  // Replay() works without it.
  Status Start(bool paused = false, const std::string& reason = "");
  // Ends waits at once (a retrying event makes no new attempt and stays
  // uncommitted), abandons events not started, waits for handler calls in
  // flight (up to drain_timeout_ms, then for calls that still run, but not
  // for calls past their deadline), commits the finished prefix and leaves
  // the group.
  void Stop(int drain_timeout_ms);
  // The first step of Stop(): ends waits (a retrying event makes no new
  // attempt) and pauses the consumer, which then starts only the events
  // before a started one of their partition (keyed_consumer.h). Thread-safe.
  void RequestStop();
  // Control poller thread only (one caller at a time): applies the shared
  // state. Pausing stops the consumer (returns once no handler runs); resuming
  // starts a new one. Unavailable when a resume cannot start the consumer
  // (the runner stays paused; call again).
  Status Control(bool paused, const std::string& reason);
  // A dead-letter auto-pause not yet written to the control table: its
  // reason, cleared by the call (the caller writes it, and calls
  // RequeueAutoPause(reason) when the write failed).
  std::optional<std::string> TakeAutoPause();
  void RequeueAutoPause(const std::string& reason);
  bool paused() const { return paused_.load(); }
  Status Replay(const ReplayFrom& from);
  TriggerStatus status() const;
  const TriggerSpec& spec() const { return spec_; }

 private:
  struct Work {
    CellEvent event;
    std::string source_topic;
    int32_t source_partition = -1;
    int64_t source_offset = -1;
    std::string partition_label;  // metrics label: partition number, "retry" or "replay"
    bool body_reread = false;     // the body was left out of the log
  };

  // The per-partition metrics, looked up once per label (building labels per
  // event cost more than a no-op handler).
  struct PartitionMetrics {
    Histogram* handler_seconds = nullptr;
    Counter* handled = nullptr;
  };
  const PartitionMetrics& MetricsOf(const std::string& partition_label);

  Result<std::optional<CellEvent>> Decode(const ConsumedRecord& rec) const;
  Disposition Handle(KeyedEvent& e);
  Disposition HandleBatch(std::vector<KeyedEvent*>& events);
  std::optional<Disposition> Unreadable(KeyedEvent& e, const Status& error);
  void UpdateLag(const std::vector<PartitionProgress>& progress);
  Work WorkOf(KeyedEvent& e) const;
  // True when every event is finished (handled, filtered out or set aside);
  // false when abandoned (paused or stopping: no new attempt after a failed
  // one), or when a call past its deadline gave the events on (CallWatched).
  // The first attempt is made whenever Process is called: the consumer
  // decided that the events start (an event before a handled one of its
  // partition must, or that one would be delivered again). With a per-event handler,
  // `works` holds one event. With `failed` set, attempt `first_attempt`
  // already failed with it (a call past its deadline): Process goes on from
  // there (the given-on events of CallWatched).
  bool Process(std::span<Work* const> works, int first_attempt = 1,
               std::optional<Status> failed = std::nullopt);
  // One attempt of the handler (or batch handler) on `works`. A batch
  // handler's reported failures (TriggerContext::ReportFailure) are moved to
  // `failures` (indexes into `works`, in range). *given_on turns true when
  // the events went on without this thread (CallWatched): nothing more may
  // be done with them here.
  Status Call(const std::vector<Work*>& works, int attempt,
              std::vector<std::pair<size_t, Status>>* failures, bool* given_on);
  // A per-event handler's attempt with handler_timeout_ms, inside the
  // consumer's handle call: the handler runs on this thread; if it has not
  // returned at its deadline, the watchdog counts the attempt as failed and
  // gives copies of the events on (EventHandOff), so that the retries and
  // the row's later events go on on a new pool thread while this one waits
  // for the handler (its outcome then ignored).
  Status CallWatched(const std::vector<Work*>& works, int attempt, EventHandOff& hand_off,
                     bool* given_on);
  // DeadlineExceeded for a call past handler_timeout_ms; counts and logs it.
  Status PastDeadline(const Work& first);
  // Handler calls past their deadline still running: the gauge follows.
  // A call given on calls it with -1 as the last thing it does in the runner.
  void CountPastDeadline(int delta);
  // True when `failure` (of a call whose first event is `first`) is
  // Unavailable and the cluster's own store does not answer either
  // (CellStore::CheckReady): the store's outage, not the event's fault, so
  // the call does not count as an attempt. Logs once per event
  // (`earlier_calls` == 0). Costs a query per host.
  bool StoreDownDuring(const Status& failure, const Work& first, int earlier_calls);
  // False when the worker is stopping and the event was abandoned.
  bool SetAside(const Work& w, const Status& error, int attempts);
  // Stop() was called or the trigger is paused: no new attempt starts.
  bool Halted() const { return stop_requested_.load() || paused_.load(); }
  // Waits `ms`, or less once Halted(). True when the whole wait passed.
  bool WaitUnlessHalted(int ms);
  // Pauses delivery (from a pool thread too): later events are abandoned.
  void PauseLocally(const std::string& reason);
  std::unique_ptr<KeyedConsumer> MakeConsumer();
  std::shared_ptr<KeyedConsumer> consumer() const;

  const TriggerSpec spec_;
  const ClusterConfig& config_;
  CellStore* store_;
  KafkaRecordWriter* writer_;
  TriggerProbe* probe_;
  const std::string client_id_;
  const std::string cells_topic_, dlq_topic_, retry_topic_;
  KeyedConsumerOptions consumer_options_;

  mutable Mutex consumer_mu_;
  // Replaced on resume; shared with a Replay() in progress.
  std::shared_ptr<KeyedConsumer> consumer_ GUARDED_BY(consumer_mu_);
  bool consuming_ GUARDED_BY(consumer_mu_) = false;  // consumer_ was started and not stopped
  bool stopped_ GUARDED_BY(consumer_mu_) = false;    // Stop() was called

  std::atomic<bool> stop_requested_{false}, paused_{false};
  Mutex halt_mu_;  // paused_/stop_requested_ turn true under it, for WaitUnlessHalted
  CondVar halt_cv_;
  mutable Mutex reason_mu_;
  std::string pause_reason_ GUARDED_BY(reason_mu_);
  std::optional<std::string> auto_pause_ GUARDED_BY(reason_mu_);  // not yet written

  Mutex dead_mu_;
  // set-aside times within the window
  std::deque<MicrosSinceEpoch> recent_dead_ GUARDED_BY(dead_mu_);
  std::set<std::string> blocked_rows_ GUARDED_BY(dead_mu_);  // LaterEventsPolicy::kSetAside
  std::atomic<bool> any_blocked_{false};                     // blocked_rows_ is not empty

  Mutex metrics_mu_;
  std::map<std::string, PartitionMetrics> metrics_ GUARDED_BY(metrics_mu_);

  // CallWatched calls given on and still running: their threads come back
  // into this runner when the handler returns, so the destructor waits.
  Mutex past_deadline_mu_;
  CondVar past_deadline_cv_;
  int calls_past_deadline_ GUARDED_BY(past_deadline_mu_) = 0;
  // Per-event handler calls with handler_timeout_ms (CallWatched); null
  // without a timeout or with a batch handler.
  std::unique_ptr<CallWatchdog> watchdog_;
  // The other calls with handler_timeout_ms: batch handlers (a hand-off per
  // batch), replays. Last: destroyed first, it waits for calls still running
  // (they use spec_ and the context's store).
  DeadlineCaller deadline_caller_{"trigger-call"};
};

}  // namespace cellar::internal
