#include "triggers/internal/trigger_runner.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <span>

#include "base/log.h"
#include "base/time.h"
#include "changelog/consumer_groups.h"
#include "triggers/dead_letter.h"
#include "triggers/internal/batch_failures.h"

namespace cellar::internal {
namespace {

// A pausing consumer waits this long for handler calls in flight before it
// logs that the rest will be delivered again (it waits for them anyway).
constexpr int kPauseDrainMs = 2000;

int JitteredBackoffMs(const RetryPolicy& p, int attempt) {
  int64_t wait = p.initial_backoff_ms;
  for (int i = 1; i < attempt && wait < p.max_backoff_ms; ++i) wait *= 2;
  wait = std::min<int64_t>(wait, p.max_backoff_ms);
  if (wait <= 0) return 0;
  thread_local std::mt19937 rng(std::random_device{}());
  return std::uniform_int_distribution<int>(0, static_cast<int>(wait))(rng);  // full jitter
}

}  // namespace

TriggerRunner::TriggerRunner(TriggerSpec spec, const ClusterConfig& config, CellStore* store,
                             KafkaRecordWriter* writer, TriggerProbe* probe, std::string client_id)
    : spec_(std::move(spec)),
      config_(config),
      store_(store),
      writer_(writer),
      probe_(probe),
      client_id_(std::move(client_id)),
      cells_topic_(ChangeLogTopic(config.kafka, spec_.datastore)),
      dlq_topic_(DeadLetterTopic(config.kafka, spec_.datastore, spec_.name)),
      retry_topic_(RetryTopic(config.kafka, spec_.datastore, spec_.name)) {
  KeyedConsumerOptions& o = consumer_options_;
  o.group_id = TriggerGroup(config.kafka, spec_.name);
  o.client_id = client_id_ + "-" + spec_.name;
  o.datastores = {spec_.datastore};
  o.extra_topics = {retry_topic_};
  o.from_beginning = spec_.options.from_beginning;
  o.concurrency = spec_.options.concurrency;
  o.max_pending = spec_.options.max_pending;
  o.log_component = "trigger";
  o.max_batch = spec_.options.max_batch;
  o.batch_linger_ms = spec_.options.batch_linger_ms;
  o.metrics = &probe_->registry();
  // What a person alerts on exists from the start, at 0: an increase() sees
  // the first dead letter, and a missing series is not mistaken for none.
  for (int32_t p = 0; p < config.kafka.partitions; ++p)
    probe_->SetAside(spec_.name, std::to_string(p));
  probe_->SetAside(spec_.name, "retry");
  if (spec_.options.handler_timeout_ms > 0) {
    probe_->HandlerTimeouts(spec_.name);
    probe_->HandlersPastDeadline(spec_.name);
    if (!spec_.batch_handler)
      watchdog_ = std::make_unique<CallWatchdog>("trigger-watch", spec_.options.handler_timeout_ms);
  }
  MutexLock lock(&consumer_mu_);
  consumer_ = MakeConsumer();
}

TriggerRunner::~TriggerRunner() {
  Stop(0);
  MutexLock lock(&past_deadline_mu_);
  while (calls_past_deadline_ > 0) past_deadline_cv_.Wait(&past_deadline_mu_);
}

std::unique_ptr<KeyedConsumer> TriggerRunner::MakeConsumer() {
  KeyedConsumerCallbacks cb;
  cb.decode = [this](const ConsumedRecord& rec) { return Decode(rec); };
  if (spec_.batch_handler) {
    cb.handle_batch = [this](std::vector<KeyedEvent*>& es) { return HandleBatch(es); };
    // Lanes by row, as many as pool threads: a row's events stay in one lane
    // (KeyedConsumer's requirement), and every thread can have a lane.
    const size_t lanes = static_cast<size_t>(std::max(1, spec_.options.concurrency));
    cb.lane = [lanes](const CellEvent& e) {
      return std::to_string(std::hash<std::string>{}(e.cell.row_key.ToString()) % lanes);
    };
  } else {
    cb.handle = [this](KeyedEvent& e) { return Handle(e); };
  }
  cb.unreadable = [this](KeyedEvent& e, const Status& s) { return Unreadable(e, s); };
  cb.on_progress = [this](const std::vector<PartitionProgress>& p) { UpdateLag(p); };
  return std::make_unique<KeyedConsumer>(store_, consumer_options_, std::move(cb));
}

std::shared_ptr<KeyedConsumer> TriggerRunner::consumer() const {
  MutexLock lock(&consumer_mu_);
  return consumer_;
}

Status TriggerRunner::Start(bool paused, const std::string& reason) {
  // The DLQ and retry topics must exist before the consumer subscribes.
  CELLAR_RETURN_IF_ERROR(writer_->EnsureTopic(dlq_topic_, 1));
  CELLAR_RETURN_IF_ERROR(writer_->EnsureTopic(retry_topic_, 1));
  if (paused) {
    PauseLocally(reason);
    LogWarn("trigger", "started paused (trigger_control); `cellar trigger resume` continues it",
            {{"trigger", spec_.name}, {"reason", reason}});
    return Status::Ok();
  }
  MutexLock lock(&consumer_mu_);
  CELLAR_RETURN_IF_ERROR(consumer_->Start());
  consuming_ = true;
  probe_->Paused(spec_.name).Set(0);
  LogInfo("trigger", "started",
          {{"trigger", spec_.name},
           {"group", consumer_->group()},
           {"topic", cells_topic_},
           {"column", spec_.column}});
  return Status::Ok();
}

void TriggerRunner::RequestStop() {
  {
    MutexLock lock(&halt_mu_);
    stop_requested_ = true;
  }
  halt_cv_.NotifyAll();
  if (std::shared_ptr<KeyedConsumer> c = consumer()) c->Pause();
}

void TriggerRunner::Stop(int drain_timeout_ms) {
  RequestStop();
  std::shared_ptr<KeyedConsumer> c;
  {
    MutexLock lock(&consumer_mu_);
    stopped_ = true;
    consuming_ = false;
    c = consumer_;
  }
  // Queued events are abandoned without a call and a body re-read waiting
  // for the store gives up after its current backoff: only handler calls in
  // flight are waited for.
  c->Pause();
  c->Stop(drain_timeout_ms);
}

bool TriggerRunner::WaitUnlessHalted(int ms) {
  MutexLock lock(&halt_mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, ms));
  while (!Halted())
    if (!halt_cv_.WaitUntil(&halt_mu_, deadline)) break;
  return !Halted();
}

void TriggerRunner::PauseLocally(const std::string& reason) {
  {
    MutexLock lock(&reason_mu_);
    pause_reason_ = reason;
  }
  {
    MutexLock lock(&halt_mu_);
    paused_ = true;
  }
  halt_cv_.NotifyAll();
  probe_->Paused(spec_.name).Set(1);
}

std::optional<std::string> TriggerRunner::TakeAutoPause() {
  MutexLock lock(&reason_mu_);
  std::optional<std::string> r = std::move(auto_pause_);
  auto_pause_.reset();
  return r;
}

void TriggerRunner::RequeueAutoPause(const std::string& reason) {
  MutexLock lock(&reason_mu_);
  if (!auto_pause_) auto_pause_ = reason;
}

Status TriggerRunner::Control(bool paused, const std::string& reason) {
  if (paused) {
    std::shared_ptr<KeyedConsumer> c;
    {
      MutexLock lock(&consumer_mu_);
      if (stopped_) return Status::Ok();
      if (!paused_) {
        LogWarn("trigger", "PAUSED (trigger_control): no events are handled until resumed",
                {{"trigger", spec_.name}, {"reason", reason}});
      }
      if (consuming_) c = consumer_;
      consuming_ = false;
    }
    PauseLocally(reason);
    // Events not finished are abandoned; the finished prefix is committed and
    // the member leaves the group, so the partitions' offsets stop advancing.
    if (c) {
      c->Pause();
      c->Stop(kPauseDrainMs);
    }
    return Status::Ok();
  }
  std::shared_ptr<KeyedConsumer> old;
  {
    MutexLock lock(&consumer_mu_);
    if (stopped_ || !paused_) return Status::Ok();
    // An auto-pause the poller has not applied yet: its consumer is paused for good.
    if (consuming_) old = consumer_;
    consuming_ = false;
  }
  if (old) {
    old->Pause();
    old->Stop(kPauseDrainMs);
  }
  {
    // A resumed trigger starts a new window: the old set-aside events do not
    // pause it again at once.
    MutexLock dead(&dead_mu_);
    recent_dead_.clear();
  }
  // A stopped consumer cannot start again: a new member of the same group
  // reads on from the committed offsets.
  std::shared_ptr<KeyedConsumer> fresh = MakeConsumer();
  {
    MutexLock lock(&consumer_mu_);
    if (stopped_) return Status::Ok();
    paused_ = false;  // before Start: the new consumer's events must not be abandoned
    if (Status s = fresh->Start(); !s.ok()) {
      paused_ = true;
      return s;
    }
    consumer_ = std::move(fresh);
    consuming_ = true;
  }
  {
    MutexLock r(&reason_mu_);
    pause_reason_.clear();
  }
  probe_->Paused(spec_.name).Set(0);
  LogInfo("trigger", "resumed (trigger_control)", {{"trigger", spec_.name}});
  return Status::Ok();
}

Result<std::optional<CellEvent>> TriggerRunner::Decode(const ConsumedRecord& rec) const {
  std::string dead_letter_event;
  if (rec.topic == retry_topic_) {
    auto d = DecodeDeadLetter(rec.value);
    if (!d.ok()) return InvalidArgument("a retry record that is not a dead letter");
    dead_letter_event = std::move(d->event_json);
  }
  const std::string_view value = rec.topic == retry_topic_ ? dead_letter_event : rec.value;
  // A filter reads the body; without one a forwarding handler needs none.
  const bool forward = spec_.options.forward_published_json;
  CELLAR_ASSIGN_OR_RETURN(CellEvent e, forward && spec_.options.filter.empty()
                                           ? DecodeCellEventAsPublished(value)
                                           : DecodeCellEvent(value));
  if (forward && e.published_json.empty()) e.published_json = std::string(value);
  const Cell& c = e.cell;
  // An omitted body is filtered once it was read (Process).
  const bool wanted =
      c.column == spec_.column &&
      (c.tombstone ? spec_.options.include_tombstones
                   : (e.body_omitted || MatchesFilter(spec_.options.filter, c.body)));
  if (!wanted) return std::optional<CellEvent>();
  return std::optional<CellEvent>(std::move(e));
}

TriggerRunner::Work TriggerRunner::WorkOf(KeyedEvent& e) const {
  Work w;
  w.event = std::move(e.event);
  w.source_topic = e.topic;
  w.source_partition = e.partition;
  w.source_offset = e.offset;
  w.partition_label = e.topic == retry_topic_ ? "retry" : std::to_string(e.partition);
  w.body_reread = e.body_reread;
  return w;
}

Disposition TriggerRunner::Handle(KeyedEvent& e) {
  Work w = WorkOf(e);
  Work* one = &w;
  return Process({&one, 1}) ? Disposition::kDone : Disposition::kAbandoned;
}

Disposition TriggerRunner::HandleBatch(std::vector<KeyedEvent*>& events) {
  std::vector<Work> works;
  works.reserve(events.size());
  for (KeyedEvent* e : events) works.push_back(WorkOf(*e));
  std::vector<Work*> ptrs;
  ptrs.reserve(works.size());
  for (Work& w : works) ptrs.push_back(&w);
  return Process(ptrs) ? Disposition::kDone : Disposition::kAbandoned;
}

std::optional<Disposition> TriggerRunner::Unreadable(KeyedEvent& e, const Status& error) {
  if (error.code() == StatusCode::kNotFound) {  // expired or purged since: nothing to handle
    LogInfo("trigger", "the event's cell is no longer stored; passed by",
            {{"trigger", spec_.name}, {"cell", e.event.cell.Address(e.event.datastore)}});
    return Disposition::kDone;
  }
  Work w = WorkOf(e);
  const Status why(error.code(),
                   "the body left out of the change log cannot be read: " + error.message());
  return SetAside(w, why, 0) ? Disposition::kDone : Disposition::kAbandoned;
}

void TriggerRunner::UpdateLag(const std::vector<PartitionProgress>& progress) {
  probe_->UpdateProgress(spec_.name, progress, NowMicros() / 1000);
}

const TriggerRunner::PartitionMetrics& TriggerRunner::MetricsOf(const std::string& label) {
  MutexLock lock(&metrics_mu_);
  auto [it, added] = metrics_.try_emplace(label);
  if (added) {
    it->second.handler_seconds = &probe_->HandlerSeconds(spec_.name, label);
    it->second.handled = &probe_->Handled(spec_.name, label);
  }
  return it->second;
}

bool TriggerRunner::Process(std::span<Work* const> works, int first_attempt,
                            std::optional<Status> failed) {
  // Per-thread scratch, so that a call of one event allocates nothing (a no-op
  // handler's events cost a few microseconds each). Process never nests.
  thread_local std::vector<Work*> live;
  live.clear();
  for (Work* w : works) {
    // A row blocked by LaterEventsPolicy::kSetAside stays blocked for live
    // events, but events copied back by `dlq retry` run: they are the row's
    // set-aside events, in order (otherwise they could never be retried).
    bool blocked = false;
    if (any_blocked_.load() && w->source_topic != retry_topic_) {
      MutexLock lock(&dead_mu_);
      blocked = blocked_rows_.count(w->event.cell.row_key.ToString()) > 0;
    }
    if (blocked) {
      if (!SetAside(*w,
                    FailedPrecondition("an earlier event of row " +
                                       w->event.cell.row_key.ToString() + " was set aside"),
                    0))
        return false;
      continue;
    }
    // A body read from the store (too large for the log) meets the filter only now.
    if (w->body_reread && !w->event.cell.tombstone &&
        !MatchesFilter(spec_.options.filter, w->event.cell.body))
      continue;
    live.push_back(w);
  }
  if (live.empty()) return true;
  // The call's metrics go to each partition label among its events once
  // (looked up once per label: the lookup takes a lock the pool shares).
  struct LabelCount {
    const PartitionMetrics* metrics;
    const std::string* label;
    uint64_t events;
  };
  thread_local std::vector<LabelCount> labels;
  labels.clear();
  for (const Work* w : live) {
    auto it = std::find_if(labels.begin(), labels.end(),
                           [&](const LabelCount& l) { return *l.label == w->partition_label; });
    if (it == labels.end())
      labels.push_back({&MetricsOf(w->partition_label), &w->partition_label, 1});
    else
      ++it->events;
  }
  auto count_handled = [&](const Work* w) {
    for (const LabelCount& l : labels)
      if (*l.label == w->partition_label) l.metrics->handled->Increment();
  };
  const RetryPolicy& rp = spec_.options.retry;
  Status last;
  // Per event of `live`: why it failed, when a batch handler said
  // (ReportFailure); empty when the whole call failed (`last` counts).
  std::vector<Status> reported;
  std::vector<std::pair<size_t, Status>> failures;
  int attempt = first_attempt;
  int store_outage_calls = 0;  // failed calls while the store was down: not counted
  for (; attempt <= rp.max_attempts; ++attempt) {
    double seconds = spec_.options.handler_timeout_ms / 1000.0;
    if (failed) {  // this attempt ran on the thread that gave the events on
      last = *std::exchange(failed, std::nullopt);
      failures.clear();
    } else {
      auto t0 = std::chrono::steady_clock::now();
      bool given_on = false;
      last = Call(live, attempt, &failures, &given_on);
      if (given_on) return false;  // the given-on events' Process decides them
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    for (const LabelCount& l : labels) l.metrics->handler_seconds->Observe(seconds);
    reported.clear();
    if (last.ok() && failures.empty()) {
      if (attempt == 1) {
        for (const LabelCount& l : labels) l.metrics->handled->Increment(l.events);
      } else {
        for (const Work* w : live) count_handled(w);
      }
      return true;
    }
    if (last.ok()) {
      // Partial failure: the failed events and their rows' later events in
      // this call go again (each row keeps its order); the rest are done.
      std::vector<std::string> rows;
      rows.reserve(live.size());
      for (const Work* w : live) rows.push_back(w->event.cell.row_key.ToString());
      BatchRetry split = SplitReportedFailures(rows, std::move(failures));
      for (size_t i : split.done) count_handled(live[i]);
      std::vector<Work*> again;
      for (size_t i : split.again) again.push_back(live[i]);
      live.assign(again.begin(), again.end());
      reported = std::move(split.why);
      const bool retryable = split.retryable;
      // Set aside at once only when every reported failure says so
      // (FailedPrecondition); the rows' later events just follow them.
      last = retryable ? Unavailable(reported.front().message())
                       : FailedPrecondition(reported.front().message());
    }
    if (last.code() == StatusCode::kFailedPrecondition) break;
    if (StoreDownDuring(last, *live.front(), store_outage_calls)) {
      ++store_outage_calls;
      --attempt;  // the same attempt again once the store answers
    } else if (attempt == rp.max_attempts) {
      break;
    }
    for (const Work* w : live) probe_->Retried(spec_.name, w->partition_label).Increment();
    // Stop() or a pause cuts the backoff short: no new attempt, the events are
    // abandoned (uncommitted) and delivered again later. Outage calls keep
    // growing the wait (up to max_backoff_ms).
    if (!WaitUnlessHalted(JitteredBackoffMs(rp, attempt + store_outage_calls))) return false;
  }
  // Each event is its own dead letter, so `dlq retry` can re-run them one by one.
  for (size_t i = 0; i < live.size(); ++i)
    if (!SetAside(*live[i], reported.empty() ? last : reported[i],
                  std::min(attempt, rp.max_attempts)))
      return false;
  return true;
}

bool TriggerRunner::StoreDownDuring(const Status& failure, const Work& first, int earlier_calls) {
  if (failure.code() != StatusCode::kUnavailable || store_ == nullptr) return false;
  const Status ready = store_->CheckReady();
  if (ready.ok()) return false;
  if (earlier_calls == 0)
    LogWarn("trigger", "the store is unavailable: the event waits for it (attempts not counted)",
            {{"trigger", spec_.name},
             {"row", first.event.cell.row_key.ToString()},
             {"ref_key", std::to_string(first.event.cell.ref_key)},
             {"error", failure.ToString()},
             {"store", ready.ToString()}});
  return true;
}

Status TriggerRunner::Call(const std::vector<Work*>& works, int attempt,
                           std::vector<std::pair<size_t, Status>>* failures, bool* given_on) {
  failures->clear();
  const int timeout_ms = spec_.options.handler_timeout_ms;
  if (watchdog_)
    if (std::shared_ptr<EventHandOff> hand_off = KeyedConsumer::CurrentHandOff())
      return CallWatched(works, attempt, *hand_off, given_on);
  // With a deadline the call owns what it uses: past the deadline it runs on
  // without this frame. The events are moved into the call and back when it
  // returned in time (DeadlineCaller drops the call's captures before it
  // answers); a call past its deadline keeps them, and the works get copies
  // (it only reads them, and concurrent reads of a document are safe).
  auto events = std::make_shared<std::vector<CellEvent>>();
  std::vector<const CellEvent*> pointers;
  if (timeout_ms > 0) {
    events->reserve(works.size());
    for (Work* w : works) events->push_back(std::move(w->event));
    for (const CellEvent& e : *events) pointers.push_back(&e);
  } else {
    for (const Work* w : works) pointers.push_back(&w->event);
  }
  auto ctx = std::make_shared<TriggerContext>(store_, &spec_.name, attempt);
  auto call = [this, events, pointers = std::move(pointers), ctx]() -> Status {
    if (!spec_.batch_handler) return spec_.handler(*pointers.front(), *ctx);
    return spec_.batch_handler(pointers, *ctx);
  };
  Status s =
      timeout_ms > 0 ? deadline_caller_.Call(std::move(call), timeout_ms) : CallCatching(call);
  if (timeout_ms > 0) {
    const bool call_runs_on = s.code() == StatusCode::kDeadlineExceeded;
    for (size_t i = 0; i < works.size(); ++i)
      works[i]->event = call_runs_on ? (*events)[i] : std::move((*events)[i]);
    if (s.code() == StatusCode::kDeadlineExceeded) s = PastDeadline(*works.front());
    CountPastDeadline(0);
  }
  if (s.ok() && spec_.batch_handler)
    for (const auto& [index, why] : ctx->failures())
      if (index < works.size()) failures->emplace_back(index, why);
  return s;
}

Status TriggerRunner::CallWatched(const std::vector<Work*>& works, int attempt,
                                  EventHandOff& hand_off, bool* given_on) {
  TriggerContext ctx(store_, &spec_.name, attempt);
  const Work& work = *works.front();
  // The watchdog's action runs while this thread is in the handler (Disarm
  // waits for it), so it may read `works` and this frame.
  bool given = false;
  Status failed;
  const uint64_t alarm = watchdog_->Arm([&, attempt] {
    auto copies = std::make_shared<std::vector<Work>>();
    for (const Work* w : works) copies->push_back(*w);  // concurrent reads of a document are safe
    failed = PastDeadline(work);
    given = hand_off.Give([this, copies, attempt, failed]() -> Disposition {
      std::vector<Work*> ptrs;
      for (Work& w : *copies) ptrs.push_back(&w);
      return Process(ptrs, attempt, failed) ? Disposition::kDone : Disposition::kAbandoned;
    });
    if (given) CountPastDeadline(+1);
  });
  Status s = CallCatching([&] { return spec_.handler(work.event, ctx); });
  if (watchdog_->Disarm(alarm)) return s;
  if (!given) return failed;  // not given on: this thread goes on with the retries
  CountPastDeadline(-1);
  *given_on = true;
  return s;
}

Status TriggerRunner::PastDeadline(const Work& first) {
  const int timeout_ms = spec_.options.handler_timeout_ms;
  probe_->HandlerTimeouts(spec_.name).Increment();
  LogWarn("trigger", "handler call past its deadline: a failed attempt",
          {{"trigger", spec_.name},
           {"row", first.event.cell.row_key.ToString()},
           {"ref_key", std::to_string(first.event.cell.ref_key)},
           {"timeout_ms", std::to_string(timeout_ms)}});
  return DeadlineExceeded("the handler did not return within " + std::to_string(timeout_ms) +
                          " ms (it runs on, its outcome ignored)");
}

void TriggerRunner::CountPastDeadline(int delta) {
  MutexLock lock(&past_deadline_mu_);
  calls_past_deadline_ += delta;
  probe_->HandlersPastDeadline(spec_.name)
      .Set(static_cast<double>(calls_past_deadline_) +
           static_cast<double>(deadline_caller_.running_past_deadline()));
  if (calls_past_deadline_ == 0) past_deadline_cv_.NotifyAll();  // under the lock: see above
}

bool TriggerRunner::SetAside(const Work& w, const Status& error, int attempts) {
  DeadLetter d;
  d.trigger = spec_.name;
  d.datastore = spec_.datastore;
  d.error = error.ToString();
  d.attempts = attempts;
  d.failed_at = NowMicros();
  d.source_topic = w.source_topic;
  d.source_partition = w.source_partition;
  d.source_offset = w.source_offset;
  // An event whose body could not be read keeps "body_omitted", so its retry reads it again.
  d.event_json =
      !w.event.published_json.empty()
          ? w.event.published_json
          : EncodeCellEvent(w.event.datastore, w.event.cell, w.event.body_omitted ? -1 : INT64_MAX);
  const std::string value = EncodeDeadLetter(d);
  const std::string key = w.event.cell.row_key.ToString();
  // Never lose a set-aside event: retry the DLQ write until it lands or we stop.
  for (int i = 1;; ++i) {
    Status s = writer_->Write(dlq_topic_, key, value);
    if (s.ok()) break;
    LogWarn("trigger", "dead-letter write failed; retrying",
            {{"trigger", spec_.name}, {"error", s.ToString()}});
    if (!WaitUnlessHalted(std::min(5000, 100 * i))) return false;
  }
  probe_->SetAside(spec_.name, w.partition_label).Increment();
  LogWarn("trigger", "event set aside",
          {{"trigger", spec_.name},
           {"row", key},
           {"ref_key", std::to_string(w.event.cell.ref_key)},
           {"attempts", std::to_string(attempts)},
           {"error", d.error}});
  MutexLock lock(&dead_mu_);
  if (spec_.options.dead_letter.later_events_of_row == LaterEventsPolicy::kSetAside) {
    blocked_rows_.insert(key);
    any_blocked_ = true;
  }
  const MicrosSinceEpoch now = NowMicros();
  recent_dead_.push_back(now);
  while (!recent_dead_.empty() &&
         recent_dead_.front() < now - spec_.options.dead_letter.window_ms * 1000)
    recent_dead_.pop_front();
  if (static_cast<int>(recent_dead_.size()) > spec_.options.dead_letter.pause_after && !paused_) {
    const std::string reason =
        "dead_letter.pause_after: " + std::to_string(recent_dead_.size()) +
        " events set aside within " + std::to_string(spec_.options.dead_letter.window_ms) +
        " ms (pause_after " + std::to_string(spec_.options.dead_letter.pause_after) +
        "); last error: " + d.error;
    PauseLocally(reason);
    // Abandons what is queued; the control poller stops the consumer and
    // writes the pause to trigger_control, where `cellar trigger resume`
    // clears it.
    consumer()->Pause();
    {
      MutexLock r(&reason_mu_);
      auto_pause_ = reason;
    }
    LogError("trigger",
             "PAUSED: too many events set aside; a person must look (see `cellar trigger dlq "
             "list`), then `cellar trigger resume`",
             {{"trigger", spec_.name},
              {"set_aside_in_window", std::to_string(recent_dead_.size())},
              {"pause_after", std::to_string(spec_.options.dead_letter.pause_after)}});
  }
  return true;
}

TriggerStatus TriggerRunner::status() const {
  TriggerStatus st;
  st.name = spec_.name;
  st.paused = paused_;
  {
    MutexLock lock(&reason_mu_);
    st.pause_reason = pause_reason_;
  }
  for (const PartitionProgress& pp : consumer()->Progress()) {
    TriggerPartitionStatus p;
    p.topic = pp.partition.topic;
    p.partition = pp.partition.partition;
    p.committed = pp.committed;
    p.lag = pp.lag;
    const std::string label = p.topic == retry_topic_ ? "retry" : std::to_string(p.partition);
    p.handled = probe_->Handled(spec_.name, label).value();
    p.retried = probe_->Retried(spec_.name, label).value();
    p.set_aside = probe_->SetAside(spec_.name, label).value();
    Histogram& h = probe_->HandlerSeconds(spec_.name, label);
    p.latency_p50_ms = h.Quantile(0.5) * 1000;
    p.latency_p99_ms = h.Quantile(0.99) * 1000;
    st.partitions.push_back(p);
  }
  return st;
}

}  // namespace cellar::internal
