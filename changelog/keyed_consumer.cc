#include "changelog/keyed_consumer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "base/thread_name.h"
#include "changelog/consumer_probe.h"
#include "changelog/internal/assigned_partitions.h"
#include "changelog/internal/lane_queues.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "changelog/keyed_executor.h"

namespace cellar {
namespace {

constexpr int kPollTimeoutMs = 20;
// Records handed to the pool in one go at most.
constexpr size_t kMaxBurst = 256;
// A pool full for longer than this pauses the assignment and polling goes on
// (rebalances are served, the member stays in the group).
constexpr int kPauseFetchAfterFullMs = 1000;
// Bound of a look-up of the record a lagging partition waits at
// (AssignedPartitions::AfterCommit) and of an end asked from the broker.
constexpr int kLookupTimeoutMs = 1000;
// Commit rounds between partition ends asked from the broker while fetching is
// paused (KeyedConsumerOptions::commit_interval_ms each).
constexpr int kQueryEndEveryRounds = 5;

bool IsTransient(StatusCode c) {
  return c == StatusCode::kUnavailable || c == StatusCode::kAborted ||
         c == StatusCode::kDeadlineExceeded || c == StatusCode::kResourceExhausted;
}

// 50 ms doubling to 2 s.
int RereadBackoffMs(int attempt) { return std::min(2000, 50 << std::min(attempt, 6)); }

std::string Where(const std::string& topic, int32_t partition, int64_t offset) {
  return topic + "/" + std::to_string(partition) + "@" + std::to_string(offset);
}

}  // namespace

struct KeyedConsumer::Impl {
  CellStore* const store;
  const KeyedConsumerOptions o;
  const KeyedConsumerCallbacks cb;
  std::unique_ptr<ConsumerProbe> probe;  // null without o.metrics; outlives the pool
  KeyedExecutor pool;
  std::unique_ptr<ChangeLogConsumer> consumer;
  std::thread poll_thread;

  Mutex lifecycle_mu;  // Start/Stop
  bool started GUARDED_BY(lifecycle_mu) = false;
  bool stopped GUARDED_BY(lifecycle_mu) = false;
  std::atomic<bool> stop_polling{false}, stopping{false}, paused{false};
  // The drain timed out: no event starts any more (MayStart).
  std::atomic<bool> drain_expired{false};
  std::atomic<int> drain_ms{0};
  Mutex stop_mu;  // stopping (atomic) turns true under it, for WaitUnlessStopping
  CondVar stop_cv;

  // Tasks hold their partition's assignment (PartitionRef) rather than look
  // it up by name per event.
  AssignedPartitions partitions;
  using PartitionRef = AssignedPartitions::Ref;

  bool fetch_paused = false;  // polling thread only: the assignment is paused
  int paused_rounds = 0;      // polling thread only: commit rounds while fetch_paused

  // Batch mode: events queued per lane until a pool task takes them.
  LaneQueues lanes;

  Impl(CellStore* s, KeyedConsumerOptions opts, KeyedConsumerCallbacks c)
      : store(s),
        o(std::move(opts)),
        cb(std::move(c)),
        pool(std::max(1, o.concurrency), o.log_component + "-pool"),
        lanes(static_cast<size_t>(std::max(1, o.max_batch)),
              std::chrono::milliseconds(std::max(0, o.batch_linger_ms)),
              static_cast<size_t>(std::max(0, o.lane_share_below))) {
    if (o.metrics) probe = std::make_unique<ConsumerProbe>(o.metrics, o.group_id);
  }

  bool batch_mode() const { return static_cast<bool>(cb.handle_batch); }

  // Events queued or running (back-pressure).
  size_t Pending() const { return batch_mode() ? lanes.events() : pool.pending(); }

  void Count(BodyRereadOutcome outcome) {
    if (probe) probe->BodyRereads(outcome).Increment();
  }

  // Polling thread: records retention deleted before this group read them.
  // They are lost to the group (nothing can fetch them again): said loudly,
  // with what to do.
  void OnSkipped(const SkippedRecords& s) {
    if (probe) probe->SkippedRecords().Increment(static_cast<uint64_t>(s.count()));
    LogError(
        o.log_component,
        "records were deleted by the topic's retention before this group read them: their "
        "events are lost to it (raise the topic's retention or keep the group closer to the "
        "head; the cells are still in the host log: replay a trigger's time range, or cellar index "
        "check NAME --repair)",
        {{"group", o.group_id},
         {"topic", s.partition.topic},
         {"partition", std::to_string(s.partition.partition)},
         {"first_offset", std::to_string(s.first)},
         {"end_offset", std::to_string(s.end)},
         {"records", std::to_string(s.count())}});
  }

  // --- offsets ----------------------------------------------------------------

  // Polling thread: commits each partition's finished prefix and updates its lag.
  void CommitDone() {
    std::vector<RecordPosition> lookups;
    const std::vector<AssignedPartitions::CommitCandidate> round = partitions.StartCommitRound();
    // Every partition's commit in one request (ChangeLogConsumer::Commit).
    std::vector<ChangeLogConsumer::CommitPosition> positions;
    std::vector<size_t> position_of(round.size(), SIZE_MAX);
    for (size_t i = 0; i < round.size(); ++i)
      if (round[i].worth_committing()) {
        position_of[i] = positions.size();
        positions.push_back({round[i].tp, round[i].committable});
      }
    const std::vector<Status> results = consumer->Commit(positions);
    for (const Status& s : results)
      if (!s.ok()) {
        LogWarn(o.log_component, "offset commit failed",
                {{"group", o.group_id}, {"error", s.ToString()}});
        break;  // one line per round: a broker outage fails every partition alike
      }
    for (size_t i = 0; i < round.size(); ++i) {
      const AssignedPartitions::CommitCandidate& c = round[i];
      const bool committed = position_of[i] != SIZE_MAX && results[position_of[i]].ok();
      // While fetching is paused no fetch response refreshes the known end:
      // ask the broker, about once a second.
      auto end = fetch_paused && paused_rounds % kQueryEndEveryRounds == 0
                     ? consumer->QueryEnd(c.tp, kLookupTimeoutMs)
                     : consumer->KnownEnd(c.tp);
      if (auto at = partitions.AfterCommit(c, committed,
                                           end.ok() ? std::optional<int64_t>(*end) : std::nullopt))
        lookups.push_back(std::move(*at));
    }
    paused_rounds = fetch_paused ? paused_rounds + 1 : 0;
    if (!lookups.empty()) {
      // Partitions lagging with nothing in hand: the polling thread has
      // nothing else to do for them.
      auto ts = ReadRecordTimestamps(store->config().kafka, lookups, kLookupTimeoutMs);
      partitions.RecordLookedUp(lookups, ts.ok() ? &*ts : nullptr);
    }
    if (cb.on_progress) cb.on_progress(partitions.Progress());
  }

  // Polling thread, inside Poll/Close.
  void OnRebalance(RebalanceKind kind, const std::vector<TopicPartitionId>& tps) {
    for (const auto& tp : tps)
      LogInfo(o.log_component, kind == RebalanceKind::kAssigned ? "assigned" : "revoked",
              {{"group", o.group_id},
               {"topic", tp.topic},
               {"partition", std::to_string(tp.partition)}});
    if (kind == RebalanceKind::kAssigned) {
      if (fetch_paused)
        if (Status s = consumer->Pause(tps); !s.ok())
          LogWarn(o.log_component, "cannot pause new partitions",
                  {{"group", o.group_id}, {"error", s.ToString()}});
      return;
    }
    // Revoked: commit what is finished; the rest goes to the next owner. Events
    // of these partitions not started yet will not be delivered here.
    CommitDone();
    partitions.Revoke(tps);
  }

  // --- polling ----------------------------------------------------------------

  // Pauses the assignment after Pause() or while the pool has been full for
  // kPauseFetchAfterFullMs; resumes it once half of max_pending is left.
  // Shorter back-pressure only stops polling (PollLoop): a resumed partition
  // is fetched again only after a delay (about 1 s with librdkafka 2.0), which
  // short bursts must not pay; a long one must keep serving the group.
  void UpdateFetchPause(size_t pending, bool full_for_long) {
    const size_t max = static_cast<size_t>(std::max(1, o.max_pending));
    const bool want = paused || full_for_long || (fetch_paused && pending > max / 2);
    if (want == fetch_paused) return;
    auto assigned = consumer->Assignment();
    Status s = !assigned.ok() ? assigned.status()
               : want         ? consumer->Pause(*assigned)
                              : consumer->Resume(*assigned);
    if (!s.ok()) {
      LogWarn(o.log_component, want ? "cannot pause fetching" : "cannot resume fetching",
              {{"group", o.group_id}, {"error", s.ToString()}});
      return;
    }
    fetch_paused = want;
    if (probe) probe->FetchPaused().Set(want ? 1 : 0);
    Log(LogLevel::kDebug, o.log_component, want ? "fetching paused" : "fetching resumed",
        {{"group", o.group_id}, {"pending", std::to_string(pending)}});
  }

  Result<std::optional<CellEvent>> Decode(const ConsumedRecord& rec) {
    if (probe) probe->RecordsDecoded().Increment();
    if (cb.decode) {
      try {
        return cb.decode(rec);
      } catch (const std::exception& e) {
        return Internal(std::string("decode threw: ") + e.what());
      }
    }
    CELLAR_ASSIGN_OR_RETURN(CellEvent e, DecodeCellEvent(rec.value));
    return std::optional<CellEvent>(std::move(e));
  }

  using Tasks = std::vector<std::pair<std::string, std::function<void()>>>;

  // Polling thread, for a record tracked in `part`. Batch mode
  // decodes here (the lane needs the event); one event at a time appends a
  // task to `tasks` that decodes on the pool, in the record key's order, so
  // decoding runs on every core rather than only the polling thread's.
  void Dispatch(ConsumedRecord rec, PartitionRef part, Tasks* tasks) {
    if (!batch_mode()) {
      std::string key = rec.key;
      tasks->emplace_back(std::move(key),
                          [this, rec = std::move(rec), part = std::move(part)]() mutable {
                            DecodeAndRun(rec, part);
                          });
      return;
    }
    auto decoded = DecodeOrPassBy(rec, part);
    if (!decoded) return;
    QueuedEvent q;
    q.e.event = std::move(*decoded);
    q.e.topic = std::move(rec.topic);
    q.e.partition = rec.partition;
    q.e.offset = rec.offset;
    q.e.broker_timestamp_ms = rec.broker_timestamp_ms;
    q.part = std::move(part);
    q.queued_at = std::chrono::steady_clock::now();
    std::string lane = cb.lane(q.e.event);
    std::string group = cb.lane_group ? cb.lane_group(lane) : std::string();
    if (lanes.Push(lane, std::move(q), group))
      tasks->emplace_back(lane, [this, lane] { RunLane(lane); });
  }

  // Polling thread: the records the consumer has at hand, up to
  // kMaxBurst and the room left under max_pending, waiting up to
  // kPollTimeoutMs for the first, handed to the pool in one SubmitMany (one
  // wake-up per burst, not per record). Each is tracked as soon as it is
  // polled: a rebalance inside a later poll must find it.
  void PollBurst(size_t room) {
    Tasks tasks;
    const size_t limit = std::max<size_t>(1, std::min(room, kMaxBurst));
    for (size_t n = 0; n < limit; ++n) {
      auto rec = consumer->PollRecord(n == 0 ? kPollTimeoutMs : 0);
      if (!rec.ok()) {
        LogWarn(o.log_component, "consume failed",
                {{"group", o.group_id}, {"error", rec.status().ToString()}});
        break;
      }
      if (!rec->has_value()) break;
      ConsumedRecord& r = **rec;
      PartitionRef part =
          partitions.Track(TopicPartitionId{r.topic, r.partition}, r.offset, r.broker_timestamp_ms);
      Dispatch(std::move(r), std::move(part), &tasks);
    }
    if (!tasks.empty()) pool.SubmitMany(std::move(tasks));
  }

  // The event of `rec`, or nullopt when it is passed by (not an event, or the
  // decoder declined it): then it is finished here.
  std::optional<CellEvent> DecodeOrPassBy(const ConsumedRecord& rec, const PartitionRef& part) {
    auto decoded = Decode(rec);
    if (decoded.ok() && decoded->has_value()) return std::move(**decoded);
    if (!decoded.ok())
      LogWarn(o.log_component, "skipping a record that is not an event",
              {{"group", o.group_id},
               {"record", Where(rec.topic, rec.partition, rec.offset)},
               {"error", decoded.status().ToString()}});
    partitions.MarkDone(part, rec.offset);
    return std::nullopt;
  }

  // Whether an event starts now. At a stop or pause only the events before
  // a started one of their partition do (else the last commit would stop
  // short of them and that one would be delivered again), and none once the
  // drain timed out (Stop() is bounded: they are delivered again).
  bool MayStart(const PartitionRef& part, int64_t offset) {
    if (drain_expired) return false;
    return partitions.TryStart(part, offset, [this] { return stopping || paused; });
  }

  // Pool thread, one event at a time.
  void DecodeAndRun(ConsumedRecord& rec, const PartitionRef& part) {
    if (!MayStart(part, rec.offset)) return;  // abandoned
    auto decoded = DecodeOrPassBy(rec, part);
    if (!decoded) return;
    KeyedEvent e;
    e.event = std::move(*decoded);
    e.topic = std::move(rec.topic);
    e.partition = rec.partition;
    e.offset = rec.offset;
    e.broker_timestamp_ms = rec.broker_timestamp_ms;
    Run(e, part);
  }

  void PollLoop() {
    using Clock = std::chrono::steady_clock;
    const size_t max = static_cast<size_t>(std::max(1, o.max_pending));
    auto last_commit = Clock::now();
    std::optional<Clock::time_point> full_since;
    while (!stop_polling) {
      const auto now = Clock::now();
      const size_t pending = Pending();
      const bool full = pending >= max;
      if (!full) full_since.reset();
      if (full && !full_since) full_since = now;
      UpdateFetchPause(
          pending, full && now - *full_since >= std::chrono::milliseconds(kPauseFetchAfterFullMs));
      if (full && !fetch_paused) {
        pool.WaitIdle(5);  // back-pressure: no polling, so nothing more is fetched
      } else {
        PollBurst(max - std::min(max, pending));
      }
      if (Clock::now() - last_commit >= std::chrono::milliseconds(o.commit_interval_ms)) {
        CommitDone();
        last_commit = Clock::now();
      }
    }
    Drain();
  }

  // Polling thread, after the loop: the bounded drain, the last commit, leaving.
  void Drain() {
    const int ms = drain_ms;
    WakeLingeringLanes();  // stop_polling is set: queued batches go now, within the drain
    if (!pool.WaitIdle(ms)) {
      drain_expired = true;
      LogWarn(o.log_component, "drain timed out; unfinished events will be delivered again",
              {{"group", o.group_id}, {"pending", std::to_string(Pending())}});
    }
    {
      MutexLock lock(&stop_mu);
      stopping = true;
    }
    stop_cv.NotifyAll();
    WakeLingeringLanes();
    // Queued events are now passed by and waits end: only calls in progress remain.
    pool.WaitIdle(std::max(ms, 1000));
    CommitDone();
    consumer->Close();
  }

  // --- events -------------------------------------------------------------------

  // fn() for a callback of the owner; a throw is logged and abandons the event.
  template <typename Fn>
  auto Guarded(const KeyedEvent& e, Fn&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const std::exception& ex) {
      LogError(o.log_component, "handler threw; the event is abandoned",
               {{"group", o.group_id},
                {"record", Where(e.topic, e.partition, e.offset)},
                {"error", ex.what()}});
    } catch (...) {
      LogError(o.log_component, "handler threw; the event is abandoned",
               {{"group", o.group_id}, {"record", Where(e.topic, e.partition, e.offset)}});
    }
    return Disposition::kAbandoned;
  }

  // Reads the omitted body into `e`. False when the event must not reach the
  // handler; then *d says whether it is finished.
  bool Reread(KeyedEvent& e, Disposition* d) {
    const Cell& c = e.event.cell;
    for (int attempt = 0;; ++attempt) {
      auto full = store->Get(e.event.datastore, c.row_key, c.column, c.ref_key);
      if (full.ok()) {
        Count(BodyRereadOutcome::kOk);
        e.event.cell.body = std::move(full->body);
        e.event.body_omitted = false;
        e.event.published_json.clear();  // it says body_omitted
        e.body_reread = true;
        return true;
      }
      const Status& s = full.status();
      const std::string address = c.Address(e.event.datastore);
      if (IsTransient(s.code())) {
        Count(BodyRereadOutcome::kRetry);
      } else {
        const bool not_found = s.code() == StatusCode::kNotFound;
        Count(not_found ? BodyRereadOutcome::kNotFound : BodyRereadOutcome::kError);
        std::optional<Disposition> decided;
        if (cb.unreadable) {
          decided = Guarded(e, [&] { return cb.unreadable(e, s); });
        } else if (not_found) {
          LogWarn(o.log_component, "omitted body no longer stored (expired or purged); passed by",
                  {{"group", o.group_id}, {"cell", address}});
          decided = Disposition::kDone;
        }
        if (decided) {
          *d = *decided;
          return false;
        }
      }
      if (attempt % 20 == 0)  // the first failure, then about every 40 s
        LogWarn(o.log_component, "cannot read an omitted body; the event waits",
                {{"group", o.group_id},
                 {"cell", address},
                 {"attempt", std::to_string(attempt + 1)},
                 {"error", s.ToString()}});
      if (!WaitUnlessStopping(RereadBackoffMs(attempt)) || paused) {
        *d = Disposition::kAbandoned;
        return false;
      }
    }
  }

  // --- one-event hand-off (EventHandOff) ----------------------------------------

  // The handle call running on this thread (CurrentHandOff): its hand-off
  // is made only when asked for.
  struct HandOffSlot {
    Impl* m;
    const KeyedEvent* e;
    const PartitionRef* part;
    std::shared_ptr<EventHandOff> made;
  };
  static thread_local HandOffSlot* current_hand_off;

  // Give() and the call's return race under one lock: exactly one of them
  // decides the event.
  class HandOff final : public EventHandOff {
   public:
    HandOff(Impl* m, const KeyedEvent& e, PartitionRef part)
        : m_(m), task_(m->pool.Current()), part_(std::move(part)) {
      where_.topic = e.topic;  // for Guarded's log lines; the rest has its own event
      where_.partition = e.partition;
      where_.offset = e.offset;
    }

    bool Give(std::function<Disposition()> rest) override {
      MutexLock lock(&mu_);
      if (returned_ || given_) return false;
      given_ = m_->pool.Detach(
          task_, [m = m_, where = where_, part = part_, rest = std::move(rest)]() mutable {
            m->Handle(where, part, rest);
          });
      return given_;
    }

    // The handle call returned: true when it had given the event away.
    bool Returned() {
      MutexLock lock(&mu_);
      returned_ = true;
      return given_;
    }

   private:
    Impl* const m_;
    const KeyedExecutor::RunningTask task_;
    const PartitionRef part_;
    KeyedEvent where_;
    Mutex mu_;
    bool returned_ GUARDED_BY(mu_) = false;
    bool given_ GUARDED_BY(mu_) = false;
  };

  // REQUIRES: the event is current (DecodeAndRun checked).
  void Run(KeyedEvent& e, const PartitionRef& part) {
    Disposition d = Disposition::kDone;
    if (e.event.body_omitted && !e.event.cell.tombstone && !Reread(e, &d)) {
      if (d == Disposition::kDone) partitions.MarkDone(part, e.offset);
      return;
    }
    Handle(e, part, [&] { return cb.handle(e); });
  }

  // A one-event handle call, or the `rest` it gave on (EventHandOff): `fn`
  // decides the event unless it gave the event away meanwhile.
  template <typename Fn>
  void Handle(const KeyedEvent& e, const PartitionRef& part, Fn&& fn) {
    HandOffSlot slot{this, &e, &part, nullptr};
    HandOffSlot* const outer = std::exchange(current_hand_off, &slot);
    const Disposition d = Guarded(e, fn);
    current_hand_off = outer;
    if (slot.made && static_cast<HandOff&>(*slot.made).Returned())
      return;  // the given `rest` finishes it
    if (d == Disposition::kDone) partitions.MarkDone(part, e.offset);
  }

  // Batch mode, pool thread: hands the lane's events on in calls of up to
  // max_batch until its queue is empty. A RunLane scheduled while another
  // runs (its queue was emptied meanwhile) waits for it (the pool runs one
  // task per lane key at a time) and finds what it left.
  void RunLane(const std::string& lane) {
    auto linger_ends = [this] { return stop_polling || stopping || paused; };
    for (auto batch = lanes.NextBatch(lane, linger_ends); !batch.empty();
         batch = lanes.NextBatch(lane, linger_ends)) {
      RunBatch(batch);
      lanes.Finished(lane, batch.size());
    }
  }

  // Ends every linger at once (stop_polling, stopping or paused was just set).
  void WakeLingeringLanes() { lanes.WakeAll(); }

  // One call's events: handle_batch in calls split at events whose body must
  // be re-read. Events of revoked partitions are not handed on, nor events
  // MayStart abandons at a stop or Pause() (another lane may have handed on a
  // later offset of the partition just before, and then this one must run);
  // after an abandoned call the rest is abandoned.
  void RunBatch(std::vector<QueuedEvent>& batch) {
    std::vector<KeyedEvent*> ready;
    std::vector<const QueuedEvent*> ready_q;
    auto flush = [&]() -> bool {
      if (ready.empty()) return true;
      const Disposition d = Guarded(*ready.front(), [&] { return cb.handle_batch(ready); });
      if (d == Disposition::kDone)
        for (const QueuedEvent* q : ready_q) partitions.MarkDone(q->part, q->e.offset);
      ready.clear();
      ready_q.clear();
      return d == Disposition::kDone;
    };
    for (QueuedEvent& q : batch) {
      if (!MayStart(q.part, q.e.offset)) continue;
      if (q.e.event.body_omitted && !q.e.event.cell.tombstone) {
        if (!flush()) return;
        Disposition d = Disposition::kDone;
        if (!Reread(q.e, &d)) {
          if (d != Disposition::kDone) return;
          partitions.MarkDone(q.part, q.e.offset);
          continue;
        }
      }
      ready.push_back(&q.e);
      ready_q.push_back(&q);
    }
    flush();  // every event in it has started: handled even at a stop
  }

  bool WaitUnlessStopping(int ms) {
    MutexLock lock(&stop_mu);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, ms));
    while (!stopping.load())
      if (!stop_cv.WaitUntil(&stop_mu, deadline)) break;
    return !stopping.load();
  }
};

double OldestUnprocessedAgeSeconds(const PartitionProgress& p, int64_t now_ms) {
  if ((p.lag <= 0 && p.open == 0) || p.oldest_timestamp_ms <= 0) return 0;
  return static_cast<double>(std::max<int64_t>(0, now_ms - p.oldest_timestamp_ms)) / 1e3;
}

KeyedConsumer::KeyedConsumer(CellStore* store, KeyedConsumerOptions options,
                             KeyedConsumerCallbacks callbacks)
    : impl_(std::make_unique<Impl>(store, std::move(options), std::move(callbacks))) {}

KeyedConsumer::~KeyedConsumer() { Stop(0); }

Status KeyedConsumer::Start() {
  Impl& m = *impl_;
  MutexLock lock(&m.lifecycle_mu);
  if (m.started || m.stopped)
    return FailedPrecondition("consumer of group " + m.o.group_id + " already " +
                              (m.stopped ? "stopped" : "started"));
  if (!m.cb.handle && !m.cb.handle_batch)
    return InvalidArgument("a keyed consumer needs a handler");
  if (m.cb.handle && m.cb.handle_batch)
    return InvalidArgument("a keyed consumer takes handle or handle_batch, not both");
  if (m.cb.handle_batch && !m.cb.lane)
    return InvalidArgument("a keyed consumer with handle_batch needs lane");
  if (m.o.group_id.empty()) return InvalidArgument("a keyed consumer needs a consumer group");
  ConsumerOptions co;
  co.group_id = m.o.group_id;
  co.from_beginning = m.o.from_beginning;
  co.client_id = m.o.client_id;
  co.extra_topics = m.o.extra_topics;
  co.on_rebalance = [&m](RebalanceKind kind, const std::vector<TopicPartitionId>& tps) {
    m.OnRebalance(kind, tps);
  };
  co.on_skipped = [&m](const SkippedRecords& s) { m.OnSkipped(s); };
  CELLAR_ASSIGN_OR_RETURN(m.consumer,
                          ChangeLogConsumer::Create(m.store->config(), m.o.datastores, co));
  m.started = true;
  m.poll_thread = NamedThread(m.o.log_component + "-poll", [&m] { m.PollLoop(); });
  return Status::Ok();
}

void KeyedConsumer::Stop(int drain_timeout_ms) {
  Impl& m = *impl_;
  MutexLock lock(&m.lifecycle_mu);
  if (m.stopped) return;
  m.stopped = true;
  m.drain_ms = drain_timeout_ms;
  if (m.poll_thread.joinable()) {
    m.stop_polling = true;  // the polling thread drains, commits and leaves
    m.poll_thread.join();
  } else {
    {
      MutexLock stop_lock(&m.stop_mu);
      m.stopping = true;
    }
    m.stop_cv.NotifyAll();
    m.WakeLingeringLanes();
  }
  m.pool.Shutdown();
}

void KeyedConsumer::Pause() {
  impl_->paused = true;
  impl_->WakeLingeringLanes();
}
bool KeyedConsumer::paused() const { return impl_->paused; }
bool KeyedConsumer::stopping() const { return impl_->stopping; }
bool KeyedConsumer::WaitUnlessStopping(int ms) { return impl_->WaitUnlessStopping(ms); }

void KeyedConsumer::Submit(const std::string& row_key, std::function<void()> task) {
  impl_->pool.Submit(row_key, std::move(task));
}

thread_local KeyedConsumer::Impl::HandOffSlot* KeyedConsumer::Impl::current_hand_off = nullptr;

std::shared_ptr<EventHandOff> KeyedConsumer::CurrentHandOff() {
  Impl::HandOffSlot* slot = Impl::current_hand_off;
  if (slot == nullptr) return nullptr;
  if (!slot->made) slot->made = std::make_shared<Impl::HandOff>(slot->m, *slot->e, *slot->part);
  return slot->made;
}

std::vector<PartitionProgress> KeyedConsumer::Progress() const {
  return impl_->partitions.Progress();
}
const std::string& KeyedConsumer::group() const { return impl_->o.group_id; }

}  // namespace cellar
