#include "triggers/trigger_worker.h"

#include <pthread.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <set>
#include <stdexcept>
#include <thread>

#include "base/log.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "changelog/kafka/kafka_start_check.h"
#include "changelog/kafka/record_writer.h"
#include "triggers/internal/trigger_control_internal.h"
#include "triggers/internal/trigger_runner.h"
#include "triggers/trigger_probe.h"
#include "triggers/webhook.h"

namespace cellar {

using internal::TriggerRunner;
using internal::TriggerSpec;

struct TriggerWorker::Impl {
  ClusterConfig config;
  TriggerWorkerOptions options;
  // Before the store: its group commit updates metrics until it is destroyed.
  MetricsRegistry own_metrics;
  MetricsRegistry* metrics = &own_metrics;
  std::unique_ptr<CellStore> store;
  std::unique_ptr<TriggerProbe> probe;
  std::unique_ptr<KafkaRecordWriter> writer;
  std::vector<TriggerSpec> specs;
  std::vector<std::unique_ptr<TriggerRunner>> runners;
  Mutex mu;  // Start, Stop, EnsureRunners
  bool started GUARDED_BY(mu) = false;
  bool stopped GUARDED_BY(mu) = false;

  // The trigger_control poller (trigger_control.h): its thread, its own
  // connection (control thread only) and its stop signal.
  std::thread control_thread;
  std::unique_ptr<MysqlConnection> control_conn;
  std::string control_table;
  std::string control_error;  // the last error logged (logged again only when it changes)
  Mutex control_mu;
  CondVar control_cv;
  bool control_stop GUARDED_BY(control_mu) = false;

  // Validates and stores a trigger's spec (on, on_batch).
  Status Register(TriggerSpec spec) {
    const std::string& name = spec.name;
    const DatastoreConfig* ds = config.FindDatastore(spec.datastore);
    if (!ds)
      return InvalidArgument("trigger " + name + ": unknown datastore '" + spec.datastore + "'");
    if (!ds->FindColumn(spec.column))
      return InvalidArgument("trigger " + name + ": datastore '" + spec.datastore +
                             "' has no column '" + spec.column + "'");
    if (!IsValidTriggerName(name))
      return InvalidArgument("trigger name '" + name + "' must match [a-z][a-z0-9_]{0,47}");
    if (spec.options.retry.max_attempts < 1)
      return InvalidArgument("trigger " + name + ": retry.max_attempts must be >= 1");
    if (spec.options.handler_timeout_ms < 0)
      return InvalidArgument("trigger " + name + ": handler_timeout_ms must be >= 0 (0: no bound)");
    MutexLock lock(&mu);
    if (started) return FailedPrecondition("TriggerWorker::on after Start()");
    for (const auto& s : specs)
      if (s.name == name) return InvalidArgument("duplicate trigger name '" + name + "'");
    specs.push_back(std::move(spec));
    return Status::Ok();
  }

  // Connects (again) and creates the table when needed.
  Status EnsureControlConnection() {
    if (control_conn && !control_conn->broken()) return Status::Ok();
    control_conn.reset();
    CELLAR_ASSIGN_OR_RETURN(auto conn, internal::ConnectControl(config, &control_table));
    CELLAR_RETURN_IF_ERROR(internal::EnsureControlTable(*conn, control_table));
    control_conn = std::move(conn);
    return Status::Ok();
  }

  void ControlError(const Status& s) {
    if (s.ToString() == control_error) return;
    control_error = s.ToString();
    LogWarn("trigger", "trigger_control unreadable; pause state unchanged until it can be read",
            {{"error", control_error}});
  }

  // One poll: writes pending dead-letter auto-pauses, reads every state and
  // applies it to the runners. Control thread (or Start before it exists).
  void ControlRound() {
    if (Status s = EnsureControlConnection(); !s.ok()) return ControlError(s);
    std::set<std::string> unwritten;  // auto-pauses not stored yet: not resumed meanwhile
    for (auto& r : runners) {
      auto reason = r->TakeAutoPause();
      if (!reason) continue;
      Status s =
          internal::WriteControl(*control_conn, control_table, r->spec().name, true, *reason);
      if (!s.ok()) {
        r->RequeueAutoPause(*reason);
        unwritten.insert(r->spec().name);
        ControlError(s);
      }
    }
    auto states = internal::ReadControl(*control_conn, control_table);
    if (!states.ok()) return ControlError(states.status());
    if (!control_error.empty() && unwritten.empty()) {
      LogInfo("trigger", "trigger_control readable again", {});
      control_error.clear();
    }
    for (auto& r : runners) {
      if (unwritten.count(r->spec().name)) continue;
      const TriggerControlState* st = nullptr;
      for (const auto& s : *states)
        if (s.trigger == r->spec().name) st = &s;
      const bool paused = st && st->paused;
      if (!paused && !r->paused()) continue;
      if (Status s = r->Control(paused, st ? st->reason : ""); !s.ok())
        LogWarn("trigger", "cannot resume; trying again at the next poll",
                {{"trigger", r->spec().name}, {"error", s.ToString()}});
    }
  }

  void ControlLoop() {
    while (true) {
      {
        MutexLock lock(&control_mu);
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(options.control_poll_ms);
        while (!control_stop)
          if (!control_cv.WaitUntil(&control_mu, deadline)) break;
        if (control_stop) return;
      }
      ControlRound();
    }
  }

  // Creates the DLQ writer and one runner per trigger (idempotent).
  Status EnsureRunners() REQUIRES(mu) {
    if (writer) return Status::Ok();
    CELLAR_ASSIGN_OR_RETURN(writer,
                            KafkaRecordWriter::Create(config.kafka, options.client_id + "-dlq"));
    for (auto& spec : specs)
      runners.push_back(std::make_unique<TriggerRunner>(spec, config, store.get(), writer.get(),
                                                        probe.get(), options.client_id));
    return Status::Ok();
  }
};

TriggerWorker::TriggerWorker(const ClusterConfig& config, TriggerWorkerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  impl_->options = std::move(options);
  if (impl_->options.metrics) impl_->metrics = impl_->options.metrics;
  impl_->store = CellStore::Open(impl_->config, impl_->metrics);
  impl_->probe = std::make_unique<TriggerProbe>(impl_->metrics);
}

TriggerWorker::~TriggerWorker() { Stop(); }

CellStore& TriggerWorker::store() { return *impl_->store; }
MetricsRegistry& TriggerWorker::metrics() { return *impl_->metrics; }

Status TriggerWorker::on(const std::string& datastore, const std::string& column,
                         const std::string& name, TriggerHandler handler, TriggerOptions options) {
  return impl_->Register(
      TriggerSpec{name, datastore, column, std::move(handler), nullptr, std::move(options)});
}

Status TriggerWorker::on_batch(const std::string& datastore, const std::string& column,
                               const std::string& name, TriggerBatchHandler handler,
                               TriggerOptions options) {
  if (options.max_batch < 1 || options.max_batch > 10000)
    return InvalidArgument("trigger " + name + ": max_batch must be within 1..10000");
  if (options.batch_linger_ms < 0 || options.batch_linger_ms > 60000)
    return InvalidArgument("trigger " + name + ": batch_linger_ms must be within 0..60000");
  return impl_->Register(
      TriggerSpec{name, datastore, column, nullptr, std::move(handler), std::move(options)});
}

Status TriggerWorker::on_webhook(const WebhookTriggerConfig& config) {
  if (config.batch_size > 1) {
    auto handler = MakeWebhookBatchHandler(config);
    if (!handler.ok())
      return InvalidArgument("trigger " + config.name + ": " + handler.status().message());
    return on_batch(config.datastore, config.column, config.name, std::move(handler).value(),
                    WebhookTriggerOptions(config));
  }
  auto handler = MakeWebhookHandler(config);
  if (!handler.ok())
    return InvalidArgument("trigger " + config.name + ": " + handler.status().message());
  return on(config.datastore, config.column, config.name, std::move(handler).value(),
            WebhookTriggerOptions(config));
}

Status TriggerWorker::Start() {
  Impl& m = *impl_;
  MutexLock lock(&m.mu);
  if (m.started) return FailedPrecondition("trigger worker already started");
  CELLAR_RETURN_IF_ERROR(m.EnsureRunners());
  // A trigger paused in trigger_control starts paused. When the table cannot
  // be read now, triggers start running and the poller applies the state as
  // soon as it can read it.
  std::vector<TriggerControlState> states;
  if (m.options.control_poll_ms > 0) {
    Status s = m.EnsureControlConnection();
    if (s.ok()) {
      auto read = internal::ReadControl(*m.control_conn, m.control_table);
      if (read.ok())
        states = std::move(read).value();
      else
        s = read.status();
    }
    if (!s.ok()) m.ControlError(s);
  }
  for (auto& runner : m.runners) {
    const TriggerControlState* st = nullptr;
    for (const auto& c : states)
      if (c.trigger == runner->spec().name && c.paused) st = &c;
    CELLAR_RETURN_IF_ERROR(runner->Start(st != nullptr, st ? st->reason : ""));
  }
  m.started = true;
  if (m.options.control_poll_ms > 0) m.control_thread = std::thread([&m] { m.ControlLoop(); });
  return Status::Ok();
}

void TriggerWorker::Stop() {
  Impl& m = *impl_;
  MutexLock lock(&m.mu);
  if (m.stopped) return;
  m.stopped = true;
  // No new attempts from here on, also while a control round finishes.
  for (auto& r : m.runners) r->RequestStop();
  {
    MutexLock control_lock(&m.control_mu);
    m.control_stop = true;
  }
  m.control_cv.NotifyAll();
  if (m.control_thread.joinable()) m.control_thread.join();
  for (auto& r : m.runners) r->Stop(m.options.drain_timeout_ms);
  m.store->Close();
}

int TriggerWorker::run() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A broker that cannot be used stops the process here, naming the cause.
  if (Status s = CheckKafkaAtStart(impl_->config.kafka); !s.ok()) {
    LogError("trigger", "cannot start", {{"error", s.ToString()}});
    return 1;
  }
  if (Status s = Start(); !s.ok()) {
    LogError("trigger", "cannot start", {{"error", s.ToString()}});
    return 1;
  }
  int sig = 0;
  sigwait(&set, &sig);
  LogInfo("trigger", "signal received; draining", {{"signal", std::to_string(sig)}});
  Stop();
  return 0;
}

Status TriggerWorker::Replay(const std::string& name, const ReplayFrom& from) {
  {
    MutexLock lock(&impl_->mu);
    CELLAR_RETURN_IF_ERROR(impl_->EnsureRunners());
  }
  for (auto& r : impl_->runners)
    if (r->spec().name == name) return r->Replay(from);
  return NotFound("no trigger named '" + name + "'");
}

namespace {

// A whole string of decimal digits that fits in T.
template <typename T>
bool ParseDecimal(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 10);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

Result<ReplayFrom> ParseReplayFrom(const std::string& text) {
  ReplayFrom from;
  if (text == "beginning" || text == "0") return from;
  if (text.find(':') != std::string::npos && text.find('T') == std::string::npos &&
      text.find('-') == std::string::npos) {
    // Every comma separates two pairs: an empty pair (e.g. a trailing comma)
    // is an error, and so is a shard or added_id out of range.
    size_t start = 0;
    while (true) {
      size_t comma = text.find(',', start);
      std::string_view part = std::string_view(text).substr(
          start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t colon = part.find(':');
      uint32_t shard = 0;
      uint64_t id = 0;
      if (colon == std::string_view::npos || !ParseDecimal(part.substr(0, colon), &shard) ||
          !ParseDecimal(part.substr(colon + 1), &id))
        return InvalidArgument("--from: expected shard:added_id pairs, got '" + std::string(part) +
                               "' in '" + text + "'");
      from.after_added_id[shard] = id;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return from;
  }
  auto t = ParseRfc3339(text);
  if (!t.ok())
    return InvalidArgument(
        "--from: expected 'beginning', an RFC 3339 time or shard:added_id pairs, got '" + text +
        "'");
  from.time = *t;
  return from;
}

std::vector<TriggerStatus> TriggerWorker::status() const {
  std::vector<TriggerStatus> out;
  for (const auto& r : impl_->runners) out.push_back(r->status());
  return out;
}

}  // namespace cellar
