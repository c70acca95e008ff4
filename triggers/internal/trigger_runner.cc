#include "triggers/internal/trigger_runner.h"

#include <chrono>
#include <random>

#include "base/log.h"

namespace cellar::internal {
namespace {

constexpr int kCommitIntervalMs = 200;

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
                             KafkaRecordWriter* writer, MetricsRegistry* metrics,
                             std::string client_id)
    : spec_(std::move(spec)),
      config_(config),
      store_(store),
      writer_(writer),
      metrics_(metrics),
      client_id_(std::move(client_id)),
      cells_topic_(ChangeLogTopic(config.kafka, spec_.datastore)),
      dlq_topic_(DeadLetterTopic(config.kafka, spec_.datastore, spec_.name)),
      retry_topic_(RetryTopic(config.kafka, spec_.datastore, spec_.name)),
      executor_(std::make_unique<KeyedExecutor>(spec_.options.concurrency)) {}

TriggerRunner::~TriggerRunner() { Stop(0); }

Counter& TriggerRunner::PartitionCounter(const char* name, const char* help,
                                         const std::string& partition) {
  return metrics_->GetCounter(name, help, {{"trigger", spec_.name}, {"partition", partition}});
}

Status TriggerRunner::Start() {
  // The DLQ and retry topics must exist before the consumer subscribes.
  CELLAR_RETURN_IF_ERROR(writer_->EnsureTopic(dlq_topic_, 1));
  CELLAR_RETURN_IF_ERROR(writer_->EnsureTopic(retry_topic_, 1));
  ConsumerOptions opts;
  opts.group_id = config_.kafka.topic_prefix + ".trigger." + spec_.name;
  opts.from_beginning = spec_.options.from_beginning;
  opts.client_id = client_id_ + "-" + spec_.name;
  opts.extra_topics = {retry_topic_};
  opts.rebalance_cb = this;
  CELLAR_ASSIGN_OR_RETURN(consumer_, ChangeLogConsumer::Create(config_, {spec_.datastore}, opts));
  metrics_
      ->GetGauge("cellar_trigger_paused", "1 while the trigger is paused for a person",
                 {{"trigger", spec_.name}})
      .Set(0);
  poll_thread_ = std::thread([this] { PollLoop(); });
  LogInfo("trigger", "started",
          {{"trigger", spec_.name},
           {"group", opts.group_id},
           {"topic", cells_topic_},
           {"column", spec_.column}});
  return Status::Ok();
}

void TriggerRunner::Stop(int drain_timeout_ms) {
  if (!poll_thread_.joinable()) {
    stopping_ = true;
    stop_cv_.notify_all();
    executor_->Shutdown();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    drain_timeout_ms_ = drain_timeout_ms;
  }
  stop_polling_ = true;  // the poll thread drains, commits and closes
  poll_thread_.join();
  executor_->Shutdown();
}

void TriggerRunner::rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                                 std::vector<RdKafka::TopicPartition*>& partitions) {
  if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
    consumer->assign(partitions);
    for (auto* p : partitions)
      LogInfo("trigger", "assigned",
              {{"trigger", spec_.name},
               {"topic", p->topic()},
               {"partition", std::to_string(p->partition())}});
    return;
  }
  // Revoked: commit what is done, forget the rest (it will be re-delivered to
  // the partition's next owner).
  CommitDone(true);
  {
    std::lock_guard<std::mutex> lock(offsets_mu_);
    for (auto* p : partitions) {
      TopicPartitionKey tp{p->topic(), p->partition()};
      offsets_.erase(tp);
      committed_.erase(tp);
      lag_.erase(tp);
    }
  }
  consumer->unassign();
}

void TriggerRunner::MarkDone(const TopicPartitionKey& tp, int64_t offset) {
  std::lock_guard<std::mutex> lock(offsets_mu_);
  auto it = offsets_.find(tp);
  if (it != offsets_.end()) it->second.Done(offset);
}

void TriggerRunner::CommitDone(bool force) {
  std::vector<std::pair<TopicPartitionKey, int64_t>> to_commit;
  {
    std::lock_guard<std::mutex> lock(offsets_mu_);
    for (auto& [tp, off] : offsets_) {
      int64_t c = off.committable();
      auto& last = committed_[tp];
      if (c >= 0 && c + 1 > last) to_commit.emplace_back(tp, c);
      int64_t low = 0, high = 0;
      if (consumer_->raw()->get_watermark_offsets(tp.first, tp.second, &low, &high) ==
              RdKafka::ERR_NO_ERROR &&
          high >= 0) {
        int64_t next = std::max<int64_t>(c + 1, last);
        lag_[tp] = std::max<int64_t>(0, high - next);
        metrics_
            ->GetGauge("cellar_trigger_lag", "Records behind the partition end",
                       {{"trigger", spec_.name},
                        {"topic", tp.first},
                        {"partition", std::to_string(tp.second)}})
            .Set(static_cast<double>(lag_[tp]));
      }
    }
  }
  (void)force;
  for (const auto& [tp, c] : to_commit) {
    Status s = consumer_->Commit(tp.first, tp.second, c);
    if (!s.ok()) {
      LogWarn("trigger", "offset commit failed",
              {{"trigger", spec_.name}, {"error", s.ToString()}});
      continue;
    }
    std::lock_guard<std::mutex> lock(offsets_mu_);
    committed_[tp] = std::max(committed_[tp], c + 1);
  }
}

void TriggerRunner::PollLoop() {
  auto last_commit = std::chrono::steady_clock::now();
  bool pause_applied = false;
  while (!stop_polling_) {
    if (paused_ && !pause_applied) {
      std::vector<RdKafka::TopicPartition*> parts;
      consumer_->raw()->assignment(parts);
      consumer_->raw()->pause(parts);
      RdKafka::TopicPartition::destroy(parts);
      pause_applied = true;
    }
    if (executor_->pending() >= static_cast<size_t>(spec_.options.max_pending)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // backpressure
    } else {
      auto rec = consumer_->PollRecord(50);
      if (!rec.ok()) {
        LogWarn("trigger", "consume failed",
                {{"trigger", spec_.name}, {"error", rec.status().ToString()}});
      } else if (rec->has_value()) {
        Dispatch(**rec);
      }
    }
    if (std::chrono::steady_clock::now() - last_commit >
        std::chrono::milliseconds(kCommitIntervalMs)) {
      CommitDone(false);
      last_commit = std::chrono::steady_clock::now();
    }
  }
  // Drain: let queued and running handlers finish, abandon backoff waits.
  int drain_ms;
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    drain_ms = drain_timeout_ms_;
  }
  if (!executor_->WaitIdle(drain_ms)) {
    LogWarn("trigger", "drain timed out; unfinished events will be re-delivered",
            {{"trigger", spec_.name}});
  }
  stopping_ = true;
  stop_cv_.notify_all();
  executor_->WaitIdle(drain_ms);
  CommitDone(true);
  consumer_->Close();
  LogInfo("trigger", "stopped", {{"trigger", spec_.name}});
}

void TriggerRunner::Dispatch(const ConsumedRecord& rec) {
  TopicPartitionKey tp{rec.topic, rec.partition};
  {
    std::lock_guard<std::mutex> lock(offsets_mu_);
    offsets_[tp].Track(rec.offset);
  }
  Work w;
  w.source_topic = rec.topic;
  w.source_partition = rec.partition;
  w.source_offset = rec.offset;
  w.partition_label = std::to_string(rec.partition);
  std::string event_json = rec.value;
  if (rec.topic == retry_topic_) {
    auto d = DecodeDeadLetter(rec.value);
    if (!d.ok()) {
      LogWarn("trigger", "skipping a retry record that is not a dead letter",
              {{"trigger", spec_.name}, {"offset", std::to_string(rec.offset)}});
      MarkDone(tp, rec.offset);
      return;
    }
    event_json = d->event_json;
    w.partition_label = "retry";
  }
  auto ev = DecodeCellEvent(event_json);
  if (!ev.ok()) {
    LogWarn("trigger", "skipping a record that is not a cell event",
            {{"trigger", spec_.name},
             {"topic", rec.topic},
             {"offset", std::to_string(rec.offset)},
             {"error", ev.status().message()}});
    MarkDone(tp, rec.offset);
    return;
  }
  w.event = std::move(ev).value();
  const Cell& c = w.event.cell;
  const bool wanted =
      c.column == spec_.column &&
      (c.tombstone ? spec_.options.include_tombstones
                   : (w.event.body_omitted || MatchesFilter(spec_.options.filter, c.body)));
  if (!wanted) {
    MarkDone(tp, rec.offset);
    return;
  }
  w.on_done = [this, tp, offset = rec.offset] { MarkDone(tp, offset); };
  auto work = std::make_shared<Work>(std::move(w));
  executor_->Submit(work->event.cell.row_key.ToString(), [this, work] { Process(*work); });
}

bool TriggerRunner::SleepUnlessStopping(int ms) {
  std::unique_lock<std::mutex> lock(stop_mu_);
  return !stop_cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping_.load(); });
}

void TriggerRunner::Process(Work& w) {
  const std::string row = w.event.cell.row_key.ToString();
  if (paused_) return;  // abandoned: re-delivered after a restart
  // A row blocked by LaterEventsPolicy::kSetAside stays blocked for live
  // events, but events copied back by `dlq retry` run: they are the row's
  // set-aside events, in order (otherwise they could never be retried).
  bool blocked = false;
  if (w.source_topic != retry_topic_) {
    std::lock_guard<std::mutex> lock(dead_mu_);
    blocked = blocked_rows_.count(row) > 0;
  }
  if (blocked) {
    if (SetAside(w, FailedPrecondition("an earlier event of row " + row + " was set aside"), 0) &&
        w.on_done)
      w.on_done();
    return;
  }
  // A body too large for the change log is read from the store.
  if (w.event.body_omitted) {
    auto cell = store_->Get(w.event.datastore, w.event.cell.row_key, w.event.cell.column,
                            w.event.cell.ref_key);
    if (cell.ok()) {
      w.event.cell.body = cell->body;
      w.event.body_omitted = false;
    }
    if (!cell.ok() || !MatchesFilter(spec_.options.filter, w.event.cell.body)) {
      if (cell.ok() || cell.status().code() == StatusCode::kNotFound) {
        if (w.on_done) w.on_done();  // filtered out, or expired/purged since
        return;
      }
    }
  }
  Histogram& latency =
      metrics_->GetHistogram("cellar_trigger_handler_seconds", "Handler latency",
                             {{"trigger", spec_.name}, {"partition", w.partition_label}});
  const RetryPolicy& rp = spec_.options.retry;
  Status last;
  int attempt = 1;
  for (; attempt <= rp.max_attempts; ++attempt) {
    TriggerContext ctx(store_, &spec_.name, attempt);
    auto t0 = std::chrono::steady_clock::now();
    try {
      last = spec_.handler(w.event, ctx);
    } catch (const std::exception& e) {
      last = Internal(std::string("handler threw: ") + e.what());
    } catch (...) {
      last = Internal("handler threw a non-standard exception");
    }
    latency.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (last.ok()) {
      PartitionCounter("cellar_trigger_handled_total", "Events handled successfully",
                       w.partition_label)
          .Increment();
      if (w.on_done) w.on_done();
      return;
    }
    if (last.code() == StatusCode::kFailedPrecondition || attempt == rp.max_attempts) break;
    PartitionCounter("cellar_trigger_retried_total", "Handler attempts retried", w.partition_label)
        .Increment();
    if (!SleepUnlessStopping(JitteredBackoffMs(rp, attempt))) return;  // abandoned on stop
  }
  if (SetAside(w, last, std::min(attempt, rp.max_attempts)) && w.on_done) w.on_done();
}

bool TriggerRunner::SetAside(Work& w, const Status& error, int attempts) {
  DeadLetter d;
  d.trigger = spec_.name;
  d.datastore = spec_.datastore;
  d.error = error.ToString();
  d.attempts = attempts;
  d.failed_at = NowMicros();
  d.source_topic = w.source_topic;
  d.source_partition = w.source_partition;
  d.source_offset = w.source_offset;
  d.event_json = EncodeCellEvent(w.event.datastore, w.event.cell, INT64_MAX);
  const std::string value = EncodeDeadLetter(d);
  const std::string key = w.event.cell.row_key.ToString();
  // Never lose a set-aside event: retry the DLQ write until it lands or we stop.
  for (int i = 1;; ++i) {
    Status s = writer_->Write(dlq_topic_, key, value);
    if (s.ok()) break;
    LogWarn("trigger", "dead-letter write failed; retrying",
            {{"trigger", spec_.name}, {"error", s.ToString()}});
    if (!SleepUnlessStopping(std::min(5000, 100 * i))) return false;
  }
  PartitionCounter("cellar_trigger_set_aside_total", "Events set aside in the dead-letter topic",
                   w.partition_label)
      .Increment();
  LogWarn("trigger", "event set aside",
          {{"trigger", spec_.name},
           {"row", key},
           {"ref_key", std::to_string(w.event.cell.ref_key)},
           {"attempts", std::to_string(attempts)},
           {"error", d.error}});
  std::lock_guard<std::mutex> lock(dead_mu_);
  if (spec_.options.dead_letter.later_events_of_row == LaterEventsPolicy::kSetAside)
    blocked_rows_.insert(key);
  const MicrosSinceEpoch now = NowMicros();
  recent_dead_.push_back(now);
  while (!recent_dead_.empty() &&
         recent_dead_.front() < now - spec_.options.dead_letter.window_ms * 1000)
    recent_dead_.pop_front();
  if (static_cast<int>(recent_dead_.size()) > spec_.options.dead_letter.pause_after &&
      !paused_.exchange(true)) {
    metrics_
        ->GetGauge("cellar_trigger_paused", "1 while the trigger is paused for a person",
                   {{"trigger", spec_.name}})
        .Set(1);
    LogError("trigger",
             "PAUSED: too many events set aside; a person must look (see `cellar trigger dlq "
             "list`), then restart the trigger",
             {{"trigger", spec_.name},
              {"set_aside_in_window", std::to_string(recent_dead_.size())},
              {"pause_after", std::to_string(spec_.options.dead_letter.pause_after)}});
  }
  return true;
}

Status TriggerRunner::Replay(const ReplayFrom& from) {
  std::mutex mu;
  std::condition_variable cv;
  size_t outstanding = 0;
  uint64_t submitted = 0;
  for (uint32_t shard = 0; shard < config_.shards; ++shard) {
    auto it = from.after_added_id.find(shard);
    uint64_t after = it == from.after_added_id.end() ? 0 : it->second;
    while (true) {
      auto page = store_->ShardLog(spec_.datastore, shard, after, 1000);
      if (!page.ok()) return page.status();
      if (page->cells.empty()) break;
      after = page->next_after;
      for (Cell& c : page->cells) {
        if (from.time && c.created_at < *from.time) continue;
        if (c.column != spec_.column) continue;
        if (c.tombstone ? !spec_.options.include_tombstones
                        : !MatchesFilter(spec_.options.filter, c.body))
          continue;
        auto work = std::make_shared<Work>();
        work->event.datastore = spec_.datastore;
        work->event.cell = std::move(c);
        work->source_topic = "replay";
        work->partition_label = "replay";
        work->on_done = [&] {
          std::lock_guard<std::mutex> lock(mu);
          --outstanding;
          cv.notify_all();
        };
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock,
                  [&] { return outstanding < static_cast<size_t>(spec_.options.max_pending); });
          ++outstanding;
        }
        ++submitted;
        executor_->Submit(work->event.cell.row_key.ToString(), [this, work] { Process(*work); });
      }
    }
  }
  // Wait for every replayed event (an abandoned one, on stop, never finishes).
  std::unique_lock<std::mutex> lock(mu);
  while (outstanding > 0) {
    if (stopping_) {
      lock.unlock();
      executor_->WaitIdle(60000);
      return Aborted("replay interrupted by stop");
    }
    cv.wait_for(lock, std::chrono::milliseconds(100));
  }
  LogInfo("trigger", "replay done",
          {{"trigger", spec_.name}, {"events", std::to_string(submitted)}});
  return Status::Ok();
}

TriggerStatus TriggerRunner::status() const {
  TriggerStatus st;
  st.name = spec_.name;
  st.paused = paused_;
  std::lock_guard<std::mutex> lock(offsets_mu_);
  for (const auto& [tp, off] : offsets_) {
    TriggerPartitionStatus p;
    p.topic = tp.first;
    p.partition = tp.second;
    auto c = committed_.find(tp);
    p.committed = c == committed_.end() ? -1 : c->second;
    auto l = lag_.find(tp);
    p.lag = l == lag_.end() ? 0 : l->second;
    const std::string label = tp.first == retry_topic_ ? "retry" : std::to_string(tp.second);
    MetricLabels labels{{"trigger", spec_.name}, {"partition", label}};
    auto& m = *metrics_;
    p.handled =
        m.GetCounter("cellar_trigger_handled_total", "Events handled successfully", labels).value();
    p.retried =
        m.GetCounter("cellar_trigger_retried_total", "Handler attempts retried", labels).value();
    p.set_aside = m.GetCounter("cellar_trigger_set_aside_total",
                               "Events set aside in the dead-letter topic", labels)
                      .value();
    Histogram& h = m.GetHistogram("cellar_trigger_handler_seconds", "Handler latency", labels);
    p.latency_p50_ms = h.Quantile(0.5) * 1000;
    p.latency_p99_ms = h.Quantile(0.99) * 1000;
    st.partitions.push_back(p);
  }
  return st;
}

}  // namespace cellar::internal
