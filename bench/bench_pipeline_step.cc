// One step of `cellar-bench pipeline` (see bench_pipeline.cc): single puts
// (PutAsync, a bounded window) paced at the step's rate, index visibility of
// sampled puts (polled the way `cellar-bench index` does), each stage's lag
// sampled during the writes, then a wait until every stage has every cell.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_name.h"
#include "base/time.h"
#include "bench/bench_harness_store.h"
#include "bench/bench_pipeline.h"
#include "cells/sql_call_counts.h"
#include "indexes/index_query.h"
#include "testing/wait_for.h"

namespace cellar::bench::pipeline {
namespace {

constexpr double kNotVisibleAfterS = 10;
// GLOBAL_STATUS counters each step reports (StepFigures).
const std::vector<std::string> kServerCounters = {"QUESTIONS", "COM_COMMIT", "INNODB_DATA_FSYNCS",
                                                  "COM_STMT_PREPARE"};
// Statements by kind (StepFigures::statements_by_kind): (key, counter).
const std::vector<std::pair<std::string, std::string>> kStatementKinds = {
    {"select", "COM_SELECT"},     {"insert", "COM_INSERT"},       {"update", "COM_UPDATE"},
    {"delete", "COM_DELETE"},     {"begin", "COM_BEGIN"},         {"commit", "COM_COMMIT"},
    {"rollback", "COM_ROLLBACK"}, {"execute", "COM_STMT_EXECUTE"}};

std::vector<std::string> AllServerCounters() {
  std::vector<std::string> all = kServerCounters;
  for (const auto& [key, counter] : kStatementKinds)
    if (std::find(all.begin(), all.end(), counter) == all.end()) all.push_back(counter);
  return all;
}

// At most `size` puts in flight: Acquire blocks while the window is full.
class Window {
 public:
  explicit Window(int size) : free_(size), size_(size) {}
  // True when the caller had to wait for a free slot.
  bool Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    const bool waited = free_ == 0;
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
    return waited;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    ++free_;
    cv_.notify_all();
  }
  // Blocks until every acquired slot was released.
  void WaitEmpty() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_ == size_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
  const int size_;
};

// Commit-ack to query-visible of sampled puts, measured as `cellar-bench
// index` does: --pollers threads query the index (by the trip's driver) for
// each of their pending samples once per round, every --poll-ms, until the
// row is returned; a sample not visible within kNotVisibleAfterS counts as
// not visible. Add() never blocks on a query.
class VisibilityProbe {
 public:
  VisibilityProbe(CellStore* store, const IndexDefinition& def, int pollers, int poll_ms)
      : reader_(store, {def}), index_(def.table), pending_(static_cast<size_t>(pollers)) {
    for (size_t p = 0; p < pending_.size(); ++p)
      threads_.emplace_back([this, p, poll_ms](std::stop_token st) { Poll(st, p, poll_ms); });
  }
  ~VisibilityProbe() {
    for (auto& t : threads_) t.request_stop();
  }

  // A put of `row` (driver `driver`) answered OK at `acked`.
  void Add(const Uuid& driver, const Uuid& row, MicrosSinceEpoch acked) {
    const size_t p = next_++ % pending_.size();
    unresolved_++;
    {
      std::lock_guard<std::mutex> lock(pending_[p].mu);
      pending_[p].samples.push_back({driver, row, acked, Stopwatch()});
    }
    pending_[p].added.notify_one();
  }
  // Samples neither visible yet nor given up on.
  uint64_t unresolved() const { return unresolved_.load(); }
  uint64_t not_visible() const { return not_visible_.load(); }
  uint64_t queries() const { return queries_.load(); }
  std::vector<double> Millis() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ms_;
  }

 private:
  struct Sample {
    Uuid driver, row;
    MicrosSinceEpoch acked = 0;
    Stopwatch since;
  };
  struct Queue {
    std::mutex mu;
    std::condition_variable_any added;  // a sample was queued
    std::vector<Sample> samples;
  };

  bool Visible(const Sample& s) {
    queries_++;
    IndexQuery q;
    q.index = index_;
    q.shard_value = s.driver.ToString();
    q.limit = 10;
    auto r = reader_.Query(q);
    if (r.ok())
      for (const auto& h : r->hits)
        if (h.row_key == s.row) return true;
    return false;
  }

  void Poll(std::stop_token st, size_t p, int poll_ms) {
    NameThisThread("bench-probe");
    while (!st.stop_requested() && !StopRequested()) {
      std::vector<Sample> mine, still;
      {
        // Idle pollers sleep until a sample comes: the harness's CPU counts
        // in the machine's CPU per write.
        std::unique_lock<std::mutex> lock(pending_[p].mu);
        pending_[p].added.wait(lock, st, [&] { return !pending_[p].samples.empty(); });
        mine.swap(pending_[p].samples);
      }
      for (auto& s : mine) {
        if (Visible(s)) {
          const MicrosSinceEpoch now = NowMicros();
          std::lock_guard<std::mutex> lock(mu_);
          ms_.push_back(static_cast<double>(std::max<int64_t>(0, now - s.acked)) / 1e3);
          unresolved_--;
        } else if (s.since.Seconds() > kNotVisibleAfterS) {
          not_visible_++;
          unresolved_--;
        } else {
          still.push_back(std::move(s));
        }
      }
      {
        std::lock_guard<std::mutex> lock(pending_[p].mu);
        for (auto& s : still) pending_[p].samples.push_back(std::move(s));
      }
      // The next query round of the samples not visible yet (the index
      // cannot tell when a row becomes visible to a query).
      if (!still.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    }
  }

  IndexReader reader_;
  const std::string index_;
  std::vector<Queue> pending_;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> unresolved_{0}, not_visible_{0}, queries_{0};
  mutable std::mutex mu_;
  std::vector<double> ms_;
  std::vector<std::jthread> threads_;  // last: stopped and joined first
};

// CPU seconds of the run's private broker so far; 0 without one (--config).
double BrokerCpu() {
  const BenchBroker* b = CurrentBenchBroker();
  return b != nullptr ? b->CpuSeconds() : 0;
}

double BrokerJitCpu() {
  const BenchBroker* b = CurrentBenchBroker();
  return b != nullptr ? b->JitCpuSeconds() : 0;
}

std::optional<uint64_t> BrokerWakeUps() {
  const BenchBroker* b = CurrentBenchBroker();
  return b != nullptr ? b->WakeUps() : std::nullopt;
}

// Statements and COMMITs per write this process sent between two snapshots,
// by thread group (StepFigures::sql_statements_by_threads and
// sql_commits_by_threads).
void RecordSqlCalls(const std::map<std::string, SqlCallCounts>& before,
                    const std::map<std::string, SqlCallCounts>& after, uint64_t writes,
                    StepFigures* out) {
  if (writes == 0) return;
  std::vector<SqlCallCounts> groups(kThreadGroups.size() + 1);  // the last: "rest"
  for (const auto& [name, counts] : after) {
    SqlCallCounts d = counts;
    if (const auto was = before.find(name); was != before.end()) {
      d.statements -= was->second.statements;
      d.commits -= was->second.commits;
    }
    size_t g = 0;
    while (g < kThreadGroups.size() && !name.starts_with(kThreadGroups[g].second)) ++g;
    groups[g].statements += d.statements;
    groups[g].commits += d.commits;
  }
  const double n = static_cast<double>(writes);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string& key = g < kThreadGroups.size() ? kThreadGroups[g].first : "rest";
    out->sql_statements_by_threads.emplace_back(key, static_cast<double>(groups[g].statements) / n);
    out->sql_commits_by_threads.emplace_back(key, static_cast<double>(groups[g].commits) / n);
  }
}

// Wake-ups per write since the "before" counts (StepFigures::wake_ups_*).
void RecordWakeUps(const BenchCluster& cluster, uint64_t process_before,
                   const std::vector<uint64_t>& groups_before,
                   std::optional<uint64_t> server_before, std::optional<uint64_t> broker_before,
                   uint64_t writer_wake_ups, uint64_t writes, StepFigures* out) {
  if (writes == 0) return;
  const double n = static_cast<double>(writes);
  const auto per_write = [&](uint64_t before, uint64_t after) {
    return static_cast<double>(after >= before ? after - before : 0) / n;
  };
  const std::optional<uint64_t> server_after = ServerWakeUps(cluster);
  if (server_before && server_after)
    out->wake_ups_mariadb = per_write(*server_before, *server_after);
  // The mock's thread is part of this process; Apache Kafka is a process of its own.
  const BenchBroker* broker = CurrentBenchBroker();
  const bool broker_in_process = broker != nullptr && broker->in_process();
  const std::optional<uint64_t> broker_after = BrokerWakeUps();
  if (broker_before && broker_after)
    out->wake_ups_broker = per_write(*broker_before, *broker_after);
  const double process = per_write(process_before, ProcessWakeUps()) -
                         (broker_in_process ? out->wake_ups_broker.value_or(0) : 0);
  out->wake_ups_process = std::max(0.0, process);
  double grouped = 0;
  for (size_t g = 0; g < kThreadGroups.size(); ++g) {
    double w = per_write(groups_before[g], ThreadsWakeUps(kThreadGroups[g].second));
    if (kThreadGroups[g].second == "rdk:" && broker_in_process)
      w = std::max(0.0, w - out->wake_ups_broker.value_or(0));
    // The writers ended with the step: their own count.
    if (kThreadGroups[g].first == "harness") w += static_cast<double>(writer_wake_ups) / n;
    grouped += w;
    out->wake_ups_by_threads.emplace_back(kThreadGroups[g].first, w);
  }
  out->wake_ups_by_threads.emplace_back("rest", std::max(0.0, out->wake_ups_process - grouped));
}

// Cumulative counts of every stage at one moment.
struct Counts {
  double t = 0;  // seconds since the step started
  uint64_t written = 0, relay = 0, index = 0, handler = 0, webhook = 0;
  double broker_cpu = 0;  // CPU seconds of the private broker so far (BrokerCpu)
};

Counts Take(const Stages& s, double t, uint64_t written) {
  return {t, written, s.relay_acknowledged(), s.index_applied(), s.handled(), s.delivered()};
}

// The trend of (written - stage's count) over `samples`, relative to `start`
// (taken before the first write), over writes of `seconds`.
LagTrend Trend(const std::vector<Counts>& samples, const Counts& start, double seconds, double rate,
               uint64_t Counts::*stage) {
  LagTrend out;
  double first_sum = 0, last_sum = 0;
  int first_n = 0, last_n = 0;
  for (const Counts& c : samples) {
    const double lag = static_cast<double>(c.written - start.written) -
                       static_cast<double>(c.*stage - start.*stage);
    out.max = std::max(out.max, lag);
    if (c.t < seconds / 3) {
      first_sum += lag;
      ++first_n;
    } else if (c.t >= 2 * seconds / 3 && c.t <= seconds) {
      last_sum += lag;
      ++last_n;
    }
  }
  out.first_third = first_n ? first_sum / first_n : 0;
  out.last_third = last_n ? last_sum / last_n : 0;
  out.grows = out.last_third - out.first_third > GrowthAllowance(rate);
  return out;
}

// CPU ms per second of the broker's thread between the samples nearest to
// `from` and `to` seconds into the step (from the start when `from` is 0);
// unset when no two samples span the interval.
std::optional<double> BrokerCpuMsPerS(const std::vector<Counts>& samples, const Counts& start,
                                      double from, double to) {
  const Counts* a = from <= 0 ? &start : nullptr;
  const Counts* b = nullptr;
  for (const Counts& c : samples) {
    if (!a && c.t >= from) a = &c;
    if (c.t <= to) b = &c;
  }
  if (!a || !b || b->t <= a->t) return std::nullopt;
  return 1e3 * (b->broker_cpu - a->broker_cpu) / (b->t - a->t);
}

Quantiles Of(const AckLatency::Figures& f) {
  std::vector<double> ms = f.ms;
  Quantiles q;
  q.count = ms.size();
  q.max = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
  q.p50 = Percentile(ms, 50);
  q.p99 = Percentile(ms, 99);
  return q;
}

Quantiles Of(std::vector<double> ms) {
  AckLatency::Figures f;
  f.ms = std::move(ms);
  return Of(f);
}

// Why the step is not sustained; empty when it is.
std::string Verdict(const StepFigures& s) {
  std::string why;
  auto add = [&](const std::string& w) { why += (why.empty() ? "" : "; ") + w; };
  if (s.errors) add(std::to_string(s.errors) + " put errors");
  if (s.achieved < kMinAchievedShare * s.rate) add("achieved < 95% of the target");
  if (s.index.p99 >= kTargetP99Ms) add("index p99 >= 100 ms");
  if (s.handler.p99 >= kTargetP99Ms) add("trigger p99 >= 100 ms");
  if (s.webhook.p99 >= kTargetP99Ms) add("webhook p99 >= 100 ms");
  if (s.not_visible) add(std::to_string(s.not_visible) + " samples not visible in 10 s");
  if (s.handler_missing || s.webhook_missing) add("trigger events missing");
  if (s.relay_lag.grows) add("relay lag grows");
  if (s.index_lag.grows) add("index lag grows");
  if (s.handler_lag.grows) add("trigger lag grows");
  if (s.webhook_lag.grows) add("webhook lag grows");
  if (!s.drained) add("stages not caught up within the drain timeout");
  return why;
}

}  // namespace

double GrowthAllowance(double rate) { return std::max(50.0, 0.1 * rate); }

int RunStep(const BenchCluster& cluster, CellStore* store, Stages& stages,
            const PipelineBenchOptions& o, const std::string& datastore, const std::string& column,
            const std::string& run, size_t step, double rate, double seconds,
            const std::string& label, StepFigures* out) {
  out->rate = rate;
  const int64_t total = std::max<int64_t>(1, static_cast<int64_t>(rate * seconds));
  const int64_t sample_every =
      std::max<int64_t>(1, static_cast<int64_t>(rate / std::max(1, o.visibility_per_s)));
  // Built before the clock starts: making a body is the harness's work (a
  // service's), and the writer threads' CPU is then what PutAsync costs.
  std::vector<std::pair<Uuid, nlohmann::json>> bodies;
  bodies.reserve(static_cast<size_t>(total));
  {
    std::mt19937_64 rng(std::random_device{}());
    for (int64_t k = 0; k < total; ++k) {
      const Uuid driver = Uuid::Random();
      bodies.emplace_back(driver, StepBody(rng, o.body_bytes, run, static_cast<int>(step), driver));
    }
  }
  Progress(label + ": " + FormatNumber(rate, 0) + " writes/s for " + FormatNumber(seconds, 1) +
           " s");
  StageLatency& handler = stages.handler(step);
  StageLatency& webhook = stages.webhook(step);
  // The probes read through the harness's own login where there is one, so
  // that the server's CPU for them is told from the stages'.
  std::string harness_store_missing;
  std::unique_ptr<CellStore> harness_store = OpenHarnessStore(cluster, &harness_store_missing);
  if (harness_store) {
    if (Status filled = FillHarnessPools(*harness_store, o.pollers); !filled.ok()) {
      harness_store_missing = filled.ToString();
      harness_store.reset();
    }
  }
  if (!harness_store)
    Progress(label + ": the visibility probes read through Cellar's store (" +
             harness_store_missing + "); their server CPU counts as Cellar's");
  VisibilityProbe probe(harness_store ? harness_store.get() : store, stages.index(), o.pollers,
                        o.poll_ms);
  Window window(o.window);
  std::atomic<uint64_t> ok{0}, errors{0}, window_waits{0};
  std::mutex mu;
  std::string first_error;
  std::vector<double> put_ms;
  put_ms.reserve(static_cast<size_t>(total));

  Counts start = Take(stages, 0, 0);
  std::vector<Counts> samples;
  const double cpu_before = ProcessCpuSeconds();
  const double broker_cpu_before = BrokerCpu();
  start.broker_cpu = broker_cpu_before;
  std::vector<double> group_cpu_before;
  for (const auto& [key, prefix] : kThreadGroups)
    group_cpu_before.push_back(ThreadsCpuSeconds(prefix));
  const std::optional<double> server_cpu_before = ServerCpuSeconds(cluster);
  const std::optional<ServerThreadsCpu> harness_server_before =
      harness_store ? HarnessServerCpu(cluster) : std::nullopt;
  const double jit_cpu_before = BrokerJitCpu();
  const uint64_t wake_ups_before = ProcessWakeUps();
  std::vector<uint64_t> group_wake_ups_before;
  for (const auto& [key, prefix] : kThreadGroups)
    group_wake_ups_before.push_back(ThreadsWakeUps(prefix));
  const std::optional<uint64_t> server_wake_ups_before = ServerWakeUps(cluster);
  const std::optional<uint64_t> broker_wake_ups_before = BrokerWakeUps();
  const auto status_before = ServerStatus(cluster.config, AllServerCounters());
  const std::map<std::string, SqlCallCounts> sql_calls_before = SqlCallCountsByThreadName();
  const uint64_t transactions_before = stages.relay_transactions();
  const auto decoded_before = stages.records_decoded();
  Stopwatch clock;
  std::atomic<bool> writing{true};
  std::jthread sampler([&] {
    NameThisThread("bench-lag");
    const auto period = std::chrono::duration<double, std::milli>(o.lag_sample_ms);
    auto next = std::chrono::steady_clock::now();
    while (writing && !StopRequested()) {
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
      std::this_thread::sleep_until(next);  // the sampling period, not a wait for a condition
      Counts c = Take(stages, clock.Seconds(), ok.load());
      c.broker_cpu = BrokerCpu();
      std::lock_guard<std::mutex> lock(mu);
      samples.push_back(c);
    }
  });

  // CPU of the PutAsync calls themselves: the system's part of the writer
  // threads (the rest is their pacing, the harness's).
  std::atomic<uint64_t> put_call_ns{0};
  const PacedResult paced = RunPaced(o.writer_threads, total, rate, [&](int64_t k) {
    if (window.Acquire()) window_waits++;
    const Uuid driver = bodies[static_cast<size_t>(k)].first;
    const Uuid row = Uuid::Random();
    const CellWrite write{row, column, 0, std::move(bodies[static_cast<size_t>(k)].second)};
    const bool sampled = k % sample_every == 0;
    const Stopwatch::Clock::time_point began = Stopwatch::Clock::now();
    const double call_cpu_before = ThisThreadCpuSeconds();
    store->PutAsync(datastore, write, [&, driver, row, sampled, began](Result<PutResult> r) {
      const MicrosSinceEpoch acked = NowMicros();
      const double took_ms =
          std::chrono::duration<double, std::milli>(Stopwatch::Clock::now() - began).count();
      if (r.ok()) {
        const uint64_t key = AckLatency::Key(r->shard, r->added_id);
        handler.ack.Acked(key, acked);
        webhook.ack.Acked(key, acked);
        if (sampled) probe.Add(driver, row, acked);
        std::lock_guard<std::mutex> lock(mu);
        put_ms.push_back(took_ms);
        ok++;  // under the lock: a lag sample never counts an ack whose latency is missing
      } else {
        std::lock_guard<std::mutex> lock(mu);
        if (errors++ == 0) first_error = r.status().ToString();
      }
      window.Release();
    });
    put_call_ns.fetch_add(
        static_cast<uint64_t>(std::max(0.0, 1e9 * (ThisThreadCpuSeconds() - call_cpu_before))),
        std::memory_order_relaxed);
  });
  window.WaitEmpty();
  out->seconds = clock.Seconds();
  const double client_cpu = ProcessCpuSeconds() - cpu_before;
  const double broker_cpu = BrokerCpu() - broker_cpu_before;
  // The mock broker runs in this process (its CPU is in client_cpu); Apache
  // Kafka is a process of its own.
  const bool broker_in_process =
      CurrentBenchBroker() != nullptr && CurrentBenchBroker()->in_process();
  const double process_broker_cpu = broker_in_process ? broker_cpu : 0;
  const std::optional<double> server_cpu_after = ServerCpuSeconds(cluster);
  const std::optional<ServerThreadsCpu> harness_server_after =
      harness_store ? HarnessServerCpu(cluster) : std::nullopt;
  const double jit_cpu = BrokerJitCpu() - jit_cpu_before;
  RecordWakeUps(cluster, wake_ups_before, group_wake_ups_before, server_wake_ups_before,
                broker_wake_ups_before, paced.threads.wake_ups, ok.load(), out);
  const auto status_after = ServerStatus(cluster.config, AllServerCounters());
  RecordSqlCalls(sql_calls_before, SqlCallCountsByThreadName(), ok.load(), out);
  if (const uint64_t writes = ok.load(); writes > 0)
    out->relay_transactions_per_write =
        static_cast<double>(stages.relay_transactions() - transactions_before) /
        static_cast<double>(writes);
  if (const uint64_t writes = ok.load(); writes > 0 && status_before.ok() && status_after.ok()) {
    auto delta = [&](const char* name) {
      return static_cast<double>(status_after->at(name) - status_before->at(name));
    };
    out->statements_per_write = delta("QUESTIONS") / static_cast<double>(writes);
    out->commits_per_write = delta("COM_COMMIT") / static_cast<double>(writes);
    out->fsyncs_per_write = delta("INNODB_DATA_FSYNCS") / static_cast<double>(writes);
    out->prepares_per_s = delta("COM_STMT_PREPARE") / std::max(1e-9, out->seconds);
    for (const auto& [key, counter] : kStatementKinds)
      out->statements_by_kind.emplace_back(key,
                                           delta(counter.c_str()) / static_cast<double>(writes));
  }
  if (server_cpu_before && server_cpu_after) {
    const double server_cpu = *server_cpu_after - *server_cpu_before;
    out->cpu_busy = (client_cpu + server_cpu + (broker_in_process ? 0 : broker_cpu)) /
                    (out->seconds * std::max(1u, std::thread::hardware_concurrency()));
    if (const uint64_t writes = ok.load(); writes > 0) {
      out->cpu_ms_mariadb = 1e3 * server_cpu / static_cast<double>(writes);
      out->cpu_ms_broker = 1e3 * broker_cpu / static_cast<double>(writes);
      out->cpu_ms_broker_jit = 1e3 * jit_cpu / static_cast<double>(writes);
      out->cpu_ms_process = 1e3 * (client_cpu - process_broker_cpu) / static_cast<double>(writes);
      const double put_calls_cpu = static_cast<double>(put_call_ns.load()) / 1e9;
      double grouped = 0;
      for (size_t g = 0; g < kThreadGroups.size(); ++g) {
        double cpu = ThreadsCpuSeconds(kThreadGroups[g].second) - group_cpu_before[g];
        if (kThreadGroups[g].second == "rdk:") cpu -= process_broker_cpu;
        // The writers (ended with the step: their own count) are the
        // harness's but for their PutAsync calls, a group of their own.
        if (kThreadGroups[g].first == "harness") cpu += paced.threads.cpu_seconds - put_calls_cpu;
        cpu = std::max(0.0, cpu);
        grouped += cpu;
        out->cpu_ms_by_threads.emplace_back(kThreadGroups[g].first,
                                            1e3 * cpu / static_cast<double>(writes));
        if (kThreadGroups[g].first == "harness")
          out->cpu_ms_harness = 1e3 * cpu / static_cast<double>(writes);
      }
      grouped += put_calls_cpu;
      out->cpu_ms_by_threads.emplace_back("put_calls",
                                          1e3 * put_calls_cpu / static_cast<double>(writes));
      if (harness_server_before && harness_server_after)
        out->cpu_ms_mariadb_harness = 1e3 *
                                      CpuSince(*harness_server_before, *harness_server_after) /
                                      static_cast<double>(writes);
      out->cpu_ms_machine = out->cpu_ms_mariadb + out->cpu_ms_broker + out->cpu_ms_process -
                            out->cpu_ms_harness - out->cpu_ms_mariadb_harness.value_or(0);
      out->cpu_ms_by_threads.emplace_back(
          "rest", 1e3 * std::max(0.0, client_cpu - process_broker_cpu - grouped) /
                      static_cast<double>(writes));
    }
  }
  writing = false;
  sampler.join();
  if (StopRequested()) return 130;
  if (broker_cpu > 0) {
    out->broker_ms_per_s_first_third = BrokerCpuMsPerS(samples, start, 0, out->seconds / 3);
    out->broker_ms_per_s_last_third =
        BrokerCpuMsPerS(samples, start, 2 * out->seconds / 3, out->seconds);
  }
  out->ok = ok.load();
  out->errors = errors.load();
  out->first_error = first_error;
  out->window_waits = window_waits.load();
  out->achieved = out->ok / out->seconds;

  // Until every stage has every cell of the step (bounded), timed from the
  // last put's answer.
  const uint64_t n = out->ok;
  out->drained = testing::WaitFor(
      [&] {
        if (StopRequested()) return true;
        const Counts c = Take(stages, 0, 0);
        return c.relay - start.relay >= n && c.index - start.index >= n &&
               handler.arrived.load() >= n && webhook.arrived.load() >= n &&
               probe.unresolved() == 0;
      },
      std::chrono::seconds(o.drain_timeout_s), std::chrono::milliseconds(5));
  if (StopRequested()) return 130;
  out->drain_s = clock.Seconds() - out->seconds;
  if (n > 0) {  // after the drain: every stage has decoded the step's events
    const auto decoded_after = stages.records_decoded();
    for (size_t i = 0; i < decoded_after.size() && i < decoded_before.size(); ++i)
      out->records_decoded_by_stage.emplace_back(
          decoded_after[i].first,
          static_cast<double>(decoded_after[i].second - decoded_before[i].second) /
              static_cast<double>(n));
  }

  {
    std::lock_guard<std::mutex> lock(mu);
    out->put_p50 = Percentile(put_ms, 50);
    out->put_p99 = Percentile(put_ms, 99);
  }
  out->index = Of(probe.Millis());
  out->not_visible = probe.not_visible() + probe.unresolved();
  out->index_queries = probe.queries();
  out->handler = Of(handler.ack.Join());
  out->webhook = Of(webhook.ack.Join());
  out->handler_missing = n - std::min<uint64_t>(n, handler.arrived.load());
  out->webhook_missing = n - std::min<uint64_t>(n, webhook.arrived.load());
  const double writes_s = std::min(out->seconds, paced.seconds);
  out->relay_lag = Trend(samples, start, writes_s, rate, &Counts::relay);
  out->index_lag = Trend(samples, start, writes_s, rate, &Counts::index);
  out->handler_lag = Trend(samples, start, writes_s, rate, &Counts::handler);
  out->webhook_lag = Trend(samples, start, writes_s, rate, &Counts::webhook);
  out->verdict = Verdict(*out);
  out->sustained = out->verdict.empty();
  Progress(label + ": achieved " + FormatNumber(out->achieved, 0) +
           " writes/s, p99 index / trigger / webhook " + FormatNumber(out->index.p99, 1) + " / " +
           FormatNumber(out->handler.p99, 1) + " / " + FormatNumber(out->webhook.p99, 1) +
           " ms: " + (out->sustained ? "sustained" : "not sustained (" + out->verdict + ")"));
  return 0;
}

}  // namespace cellar::bench::pipeline
