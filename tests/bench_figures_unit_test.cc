// The rows `cellar-bench all` writes into BENCHMARKS.md from a benchmark's
// JSON line (bench/bench_all_figures.h).
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_name.h"
#include "bench/bench_all_figures.h"
#include "bench/bench_common.h"
#include "gtest/gtest.h"

namespace cellar::bench {
namespace {

const FigureRow* Find(const std::vector<FigureRow>& rows, const std::string& prefix) {
  for (const FigureRow& r : rows)
    if (r.figure.rfind(prefix, 0) == 0) return &r;
  return nullptr;
}

// A pipeline run that sustained no step reports its p99s as 0: the table
// must not call a latency target met at a rate that was never sustained.
TEST(BenchFiguresTest, PipelineThatSustainedNoStepMeetsNoLatencyTarget) {
  nlohmann::ordered_json j = {
      {"sustained_writes_per_s", 0.0}, {"raw_rows_per_s", 47000.0}, {"ratio", 0.0},
      {"index_p99_ms", 0.0},           {"trigger_p99_ms", 0.0},     {"webhook_p99_ms", 0.0}};
  const std::vector<FigureRow> rows = BenchFigureRows("pipeline", j);
  for (const char* figure :
       {"commit-ack to index-visible p99", "commit-ack to no-op handler p99"}) {
    const FigureRow* row = Find(rows, figure);
    ASSERT_NE(row, nullptr) << figure;
    EXPECT_EQ(row->target.find("(met)"), std::string::npos) << figure << ": " << row->target;
    EXPECT_NE(row->target.find("no step sustained"), std::string::npos) << row->target;
    EXPECT_EQ(row->value, "n/a") << figure;
  }
  EXPECT_NE(Find(rows, "sustained single puts/s")->target.find("(missed)"), std::string::npos);
}

TEST(BenchFiguresTest, PipelineThatSustainedAStepJudgesItsLatency) {
  nlohmann::ordered_json j = {{"sustained_writes_per_s", 1000.0},
                              {"raw_rows_per_s", 40000.0},
                              {"ratio", 0.025},
                              {"index_p99_ms", 80.0},
                              {"trigger_p99_ms", 120.0},
                              {"webhook_p99_ms", 90.0}};
  const std::vector<FigureRow> rows = BenchFigureRows("pipeline", j);
  EXPECT_EQ(Find(rows, "commit-ack to index-visible p99")->target, "p99 < 100 ms (met)");
  EXPECT_EQ(Find(rows, "commit-ack to no-op handler p99")->target, "p99 < 100 ms (missed)");
  EXPECT_EQ(Find(rows, "commit-ack to index-visible p99")->value, "80.00");
}

// Issue #50's targets: the sustained rate against the plain-SQL ceiling and
// the whole machine's CPU per write at 1,000 writes/s.
TEST(BenchFiguresTest, PipelineJudgesTheCeilingRatioAndCpuPerWrite) {
  nlohmann::ordered_json j = {{"sustained_writes_per_s", 8000.0},
                              {"raw_rows_per_s", 50000.0},
                              {"ratio", 0.16},
                              {"sql_ceiling_writes_per_s", 14000.0},
                              {"ratio_to_sql_ceiling", 0.571},
                              {"cpu_ms_per_write_at_1000", 1.372}};
  std::vector<FigureRow> rows = BenchFigureRows("pipeline", j);
  EXPECT_EQ(Find(rows, "sustained single puts/s vs the plain-SQL ceiling")->target, ">= 0.5 (met)");
  EXPECT_EQ(Find(rows, "CPU ms per write at 1,000 writes/s")->target, "<= 0.6 (missed)");
  EXPECT_EQ(Find(rows, "CPU ms per write at 1,000 writes/s")->value, "1.372");
  j["ratio_to_sql_ceiling"] = 0.2;
  j["cpu_ms_per_write_at_1000"] = 0.55;
  rows = BenchFigureRows("pipeline", j);
  EXPECT_EQ(Find(rows, "sustained single puts/s vs the plain-SQL ceiling")->target,
            ">= 0.5 (missed)");
  EXPECT_EQ(Find(rows, "CPU ms per write at 1,000 writes/s")->target, "<= 0.6 (met)");
}

// The cost breakdown comes from the step at 1,000 writes/s, not another step.
TEST(BenchFiguresTest, PipelineBreaksDownTheCostOfTheStepAt1000) {
  nlohmann::ordered_json step500 = {
      {"rate", 500.0}, {"cpu_ms_per_write_mariadb", 9.0}, {"sql_statements_per_write", 9.0}};
  nlohmann::ordered_json step1000 = {
      {"rate", 1000.0},
      {"cpu_ms_per_write_mariadb", 0.242},
      {"cpu_ms_per_write_broker", 0.154},
      {"cpu_ms_per_write_process", 0.448},
      {"cpu_ms_per_write_by_threads", {{"relay", 0.027}, {"triggers", 0.112}}},
      {"sql_statements_per_write", 1.26},
      {"sql_commits_per_write", 0.123},
      {"innodb_fsyncs_per_write", 0.401},
      {"relay_transactions_per_write", 0.025}};
  nlohmann::ordered_json j = {{"sustained_writes_per_s", 1000.0},
                              {"steps", nlohmann::ordered_json::array({step500, step1000})}};
  std::vector<FigureRow> rows = BenchFigureRows("pipeline", j);
  const FigureRow* cpu = Find(rows, "at 1,000 writes/s: CPU ms per write, MariaDB");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->value, "0.242 / 0.154 / 0.448");
  const FigureRow* sql = Find(rows, "at 1,000 writes/s: SQL statements");
  ASSERT_NE(sql, nullptr);
  EXPECT_EQ(sql->value, "1.26 / 0.12 / 0.40");
  const FigureRow* threads = Find(rows, "at 1,000 writes/s: CPU ms per write in Cellar's");
  ASSERT_NE(threads, nullptr);
  EXPECT_EQ(threads->value, "relay 0.027, triggers 0.112");
  EXPECT_EQ(Find(rows, "at 1,000 writes/s: Kafka requests"), nullptr) << "not in this JSON";
  EXPECT_EQ(Find(rows, "at 1,000 writes/s: wake-ups"), nullptr) << "not in this JSON";
  EXPECT_EQ(Find(rows, "at 1,000 writes/s: change-log records"), nullptr) << "not in this JSON";
  EXPECT_EQ(Find(rows, "at 1,000 writes/s: SQL sent"), nullptr) << "not in this JSON";

  step1000["kafka_requests_per_write"] = 0.449;
  step1000["kafka_requests_per_write_by_type"] = {
      {"Produce", 0.1991}, {"Fetch", 0.0754}, {"ApiVersions", 0.0002}};
  step1000["records_decoded_per_write_by_stage"] = {{"index_worker", 1.0}, {"noop_trigger", 1.002}};
  step1000["wake_ups_per_write_mariadb"] = 1.23;
  step1000["wake_ups_per_write_broker"] = 1.13;
  step1000["wake_ups_per_write_process"] = 5.85;
  step1000["wake_ups_per_write_by_threads"] = {{"relay", 0.53}, {"triggers", 0.78}};
  step1000["sql_statements_per_write_by_threads"] = {
      {"relay", 0.118}, {"index_worker", 0.2}, {"harness", 0.141}, {"rest", 0.0}};
  step1000["sql_commits_per_write_by_threads"] = {
      {"relay", 0.025}, {"index_worker", 0.0312}, {"harness", 0.0}, {"rest", 0.0}};
  j["steps"] = nlohmann::ordered_json::array({step500, step1000});
  rows = BenchFigureRows("pipeline", j);
  const FigureRow* requests = Find(rows, "at 1,000 writes/s: Kafka requests");
  ASSERT_NE(requests, nullptr);
  EXPECT_EQ(requests->value, "449: Produce 199, Fetch 75");
  const FigureRow* decoded = Find(rows, "at 1,000 writes/s: change-log records decoded");
  ASSERT_NE(decoded, nullptr);
  EXPECT_EQ(decoded->value, "index_worker 1.00, noop_trigger 1.00");
  const FigureRow* sent = Find(rows, "at 1,000 writes/s: SQL sent");
  ASSERT_NE(sent, nullptr);
  EXPECT_EQ(sent->value,
            "relay 0.12, index_worker 0.20, harness 0.14 / relay 0.025, index_worker 0.031");
  const FigureRow* wake_ups = Find(rows, "at 1,000 writes/s: wake-ups");
  ASSERT_NE(wake_ups, nullptr);
  EXPECT_EQ(wake_ups->value,
            "1.23 / 1.13 / 5.85; the process by thread group: relay 0.53, triggers 0.78");

  // A run without a 1,000 writes/s step has no breakdown rows.
  j["steps"] = nlohmann::ordered_json::array({step500});
  EXPECT_EQ(Find(BenchFigureRows("pipeline", j), "at 1,000 writes/s:"), nullptr);
}

// Wake-ups are voluntary context switches: a thread that sleeps N times
// (each sleep blocks it, however short) counts at least N, a name that
// matches no thread counts none. Only live threads are read, so the named
// one waits to be told to end.
TEST(BenchCommonTest, ThreadsWakeUpsCountTheBlockingsOfTheNamedThreads) {
  std::mutex mu;
  std::condition_variable cv;
  bool slept = false, done = false;
  constexpr int kSleeps = 50;
  std::thread named([&] {
    NameThisThread("wakeup-probe");
    for (int i = 0; i < kSleeps; ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(100));  // the blocking counted
    std::unique_lock<std::mutex> lock(mu);
    slept = true;
    cv.notify_all();
    cv.wait(lock, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return slept; });
    EXPECT_GE(ThreadsWakeUps("wakeup-probe"), static_cast<uint64_t>(kSleeps));
    done = true;
    cv.notify_all();
  }
  named.join();
  EXPECT_EQ(ThreadsWakeUps("no-such-thread"), 0u);
  EXPECT_GE(ProcessWakeUps(), static_cast<uint64_t>(kSleeps));
  EXPECT_FALSE(OtherProcessWakeUps(-1).has_value());
}

// A thread's own CPU (both clocks): what it spins counts, what another thread
// spins while it waits does not; its wake-ups count its sleeps.
TEST(BenchCommonTest, ThisThreadCpuSecondsCountsOnlyTheCallingThread) {
  auto spin = [](double seconds) {
    const double start = ThisThreadCpuSeconds();
    volatile uint64_t sink = 0;
    while (ThisThreadCpuSeconds() - start < seconds) sink = sink + 1;
    return ThisThreadCpuSeconds() - start;
  };
  EXPECT_GE(spin(0.02), 0.02);
  const double before = ThisThreadCpuSeconds();
  const ThreadUsage usage_before = ThisThreadUsage();
  double other = 0;
  ThreadUsage other_usage;
  std::thread([&] {
    other = spin(0.05);
    for (int i = 0; i < 10; ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
    other_usage = ThisThreadUsage();
  }).join();
  EXPECT_GE(other, 0.05);
  EXPECT_GE(other_usage.cpu_seconds, 0.049);  // microseconds, rounded down
  EXPECT_GE(other_usage.wake_ups, 10u);
  EXPECT_LT(ThisThreadCpuSeconds() - before, 0.02);
  EXPECT_LT(ThisThreadUsage().cpu_seconds - usage_before.cpu_seconds, 0.02);
}

TEST(BenchFiguresTest, HttpJudgesGetsAgainstTheSameGetsInProcess) {
  nlohmann::ordered_json j = {
      {"http_puts_per_s", 3000.0}, {"store_puts_per_s", 4000.0},  {"put_ratio", 0.75},
      {"http_gets_per_s", 4000.0}, {"store_gets_per_s", 11000.0}, {"get_ratio", 0.364},
      {"http_get_p99_ms", 17.8},   {"store_get_p99_ms", 3.9},     {"get_p99_ratio", 4.56}};
  std::vector<FigureRow> rows = BenchFigureRows("http", j);
  EXPECT_EQ(Find(rows, "gets/s")->target, ">= 0.6 (missed)");
  EXPECT_EQ(Find(rows, "get latency p99 ms")->target, "<= 2x (missed)");
  j["get_ratio"] = 0.7;
  j["get_p99_ratio"] = 1.5;
  rows = BenchFigureRows("http", j);
  EXPECT_EQ(Find(rows, "gets/s")->target, ">= 0.6 (met)");
  EXPECT_EQ(Find(rows, "get latency p99 ms")->target, "<= 2x (met)");
  // A run from before the other reads were measured: their targets, unjudged.
  EXPECT_EQ(Find(rows, "latest reads/s")->target, ">= 0.6");
  EXPECT_EQ(Find(rows, "versions read latency p99 ms")->value, "n/a");
  j["http_row_per_s"] = 5000.0;
  j["store_row_per_s"] = 10000.0;
  j["row_ratio"] = 0.5;
  j["http_row_p99_ms"] = 3.0;
  j["store_row_p99_ms"] = 2.0;
  j["row_p99_ratio"] = 1.5;
  rows = BenchFigureRows("http", j);
  EXPECT_EQ(Find(rows, "row reads/s")->target, ">= 0.6 (missed)");
  EXPECT_EQ(Find(rows, "row reads/s")->value, "5,000");
  EXPECT_EQ(Find(rows, "row read latency p99 ms")->target, "<= 2x (met)");
}

// The bounds measured with no Cellar code sit next to the figures they bound.
TEST(BenchFiguresTest, PutAndHttpShowTheirBareBounds) {
  nlohmann::ordered_json put = {{"closed_loop_ceiling_rows_per_s", 40000.0},
                                {"ratio_to_closed_loop_ceiling", 0.72}};
  std::vector<FigureRow> rows = BenchFigureRows("put", put);
  EXPECT_EQ(Find(rows, "cells/s / closed-loop ceiling")->target, ">= 0.8 (missed)");
  EXPECT_EQ(Find(rows, "bare group commit rows/s")->value, "n/a");  // run without phase H
  put["bare_group_commit"] = {{"writer_answers_rows_per_s", 28000.0},
                              {"answering_thread_rows_per_s", 30000.0},
                              {"store_ratio_to_bare", 0.96}};
  rows = BenchFigureRows("put", put);
  EXPECT_EQ(Find(rows, "bare group commit rows/s")->value, "30,000");  // the faster variant
  EXPECT_EQ(Find(rows, "bare group commit rows/s")->ratio, "0.75x");
  EXPECT_EQ(Find(rows, "cells/s / bare group commit")->value, "0.960");

  nlohmann::ordered_json http = {
      {"bare_sql_gets_per_s", 16000.0},   {"bare_sql_store_gets_per_s", 38000.0},
      {"bare_sql_get_ratio", 0.421},      {"bare_sql_get_p99_ms", 2.2},
      {"bare_sql_store_get_p99_ms", 1.1}, {"get_ratio_to_bare_sql", 0.95}};
  rows = BenchFigureRows("http", http);
  EXPECT_EQ(Find(rows, "bare SQL gets/s")->ratio, "0.42x");
  EXPECT_EQ(Find(rows, "bare SQL get latency p99 ms")->ratio, "2.00x");
  EXPECT_EQ(Find(rows, "get_ratio / bare SQL get ratio")->value, "0.950");
}

}  // namespace
}  // namespace cellar::bench
