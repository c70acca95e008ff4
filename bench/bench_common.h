// Shared plumbing of `cellar-bench`: timing, percentiles, the figures table,
// the closing JSON line, Ctrl-C handling and the "start a private MariaDB
// unless --config names a running cluster" helper.
//
// Output contract of every subcommand: a readable table of (figure, value)
// rows on stdout, then as the very last line one line of JSON holding the
// figures (`{"bench":"<name>", ...}`). Progress and diagnostics go to stderr.
//
// Threading: Stopwatch, Table and Percentile are values; StopRequested() may
// be called from any thread.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "config/cluster_config.h"
#include "testing/private_mariadb.h"

namespace cellar::bench {

// ---- Subcommands (each in its own bench_<name>.cc) -------------------------

// Registers `put`; when it runs, its exit code is stored in *exit_code.
void AddPutCommand(CLI::App& app, int* exit_code);
// Registers `http`: the HTTP worker node vs. the in-process store (bench_http.cc).
void AddHttpCommand(CLI::App& app, int* exit_code);

// ---- Timing ----------------------------------------------------------------

class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;
  Stopwatch() : start_(Clock::now()) {}
  void Restart() { start_ = Clock::now(); }
  double Seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double Millis() const { return Seconds() * 1e3; }

 private:
  Clock::time_point start_;
};

// The p-th percentile (0 <= p <= 100, nearest rank) of `values`; 0 when empty.
// Sorts `values` in place.
double Percentile(std::vector<double>& values, double p);

// Rounds to `digits` decimals (for the JSON line and the table).
double Round(double v, int digits);

// "12,345.6" style formatting with `digits` decimals.
std::string FormatNumber(double v, int digits);

// The index of the median of `values`: the value Percentile(values, 50)
// picks (nearest rank, the lower middle one of an even count).
// REQUIRES: !values.empty().
size_t MedianIndex(const std::vector<double>& values);

// Rounds' rates as "12,345, 13,001, 12,870" (no decimals), for a table row.
std::string JoinRates(const std::vector<double>& rates);

// ---- Commit-acknowledged latency -------------------------------------------

// Latency measured from the commit acknowledged to the writer (CellStore::Put
// returned OK) rather than from the cell's created_at, which the store takes
// at the START of the group-commit transaction (before its locks, INSERTs and
// the COMMIT's fsync). Joins, per cell, the wall-clock time its Put returned
// with the time its event arrived, recorded in either order: an event may
// arrive before the writer saw Put return. Thread-safe.
class AckLatency {
 public:
  // A cell's identity, as in PutResult and Cell.
  static uint64_t Key(uint32_t shard, uint64_t added_id) {
    return (static_cast<uint64_t>(shard) << 44) | added_id;
  }
  // Put of `key` returned OK at `at` (NowMicros()).
  void Acked(uint64_t key, MicrosSinceEpoch at);
  // The event of `key` arrived at `at`; later arrivals of a key are ignored.
  void Arrived(uint64_t key, MicrosSinceEpoch at);

  struct Figures {
    std::vector<double> ms;           // arrival - ack per joined cell, >= 0, sorted
    uint64_t arrived_before_ack = 0;  // arrival < ack: counted as 0 ms in `ms`
    uint64_t without_ack = 0;         // arrivals whose Put never returned OK
  };
  Figures Join() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, MicrosSinceEpoch> acked_, arrived_;
};

// ---- Output ----------------------------------------------------------------

// Rows of (figure, value) printed as an aligned two-column table; a row with
// an empty value is printed as a section heading.
class Table {
 public:
  explicit Table(std::string title) : title_(std::move(title)) {}
  void Add(std::string figure, std::string value);
  void Section(std::string heading) { Add(std::move(heading), ""); }
  // Prints the table on stdout.
  void Print() const;

 private:
  std::string title_;
  std::vector<std::pair<std::string, std::string>> rows_;
};

// The rows of a latency phase measured both ways: "txn-start (created_at) to
// <to>" p50/p99/max (`created_*`) and "commit-ack to <to>" p50/p99 against
// `target_ms` (with `target_note` after it), max, and the early arrivals.
struct TwoWayLatency {
  double created_p50 = 0, created_p99 = 0, created_max = 0;
  double ack_p50 = 0, ack_p99 = 0, ack_max = 0;
};
void AddTwoWayLatencyRows(Table& t, const std::string& to, const TwoWayLatency& l,
                          const AckLatency::Figures& ack, double target_ms,
                          const std::string& target_note);

// Prints `j` compactly (keys in insertion order) as one line on stdout and flushes.
void PrintJsonLine(const nlohmann::ordered_json& j);

// Progress line on stderr ("cellar-bench: <msg>").
void Progress(const std::string& msg);

// ---- Signals ---------------------------------------------------------------

// Blocks SIGINT and SIGTERM in the calling thread (call it first in main,
// before any thread is started, so every thread inherits the mask) and starts
// a thread that turns the first of them into StopRequested() == true. A
// second one ends the process at once (a private MariaDB then dies with it
// through PR_SET_PDEATHSIG, but its temp dir is left behind).
void InstallStopSignals();
bool StopRequested();

// ---- The cluster a benchmark runs against ----------------------------------

struct ClusterOptions {
  std::string config_path;  // empty: start a private MariaDB
  uint32_t shards = 64;     // private cluster only
  // Group-commit overrides (0 = keep the config's value).
  int max_batch_cells = 0;
  int writer_threads_per_host = 0;
  int min_pipelined_cells = -1;  // -1: keep the config's
  int linger_us = -1;            // -1: keep the config's
  int commit_interval_us = -1;   // -1: keep the config's
  int relay_poll_min_ms = 0;     // relay.poll_min_ms; 0: keep the config's
  int relay_poll_max_ms = 0;     // relay.poll_max_ms; 0: keep the config's
  // The private broker: Apache Kafka (false), or librdkafka's mock cluster.
  bool mock_broker = false;
  // Apache Kafka's transaction.partition.verification.enable (bench_broker.h).
  bool broker_transaction_verification = false;
};

// Adds --config, --shards, --max-batch-cells and --writer-threads to `cmd`.
void AddClusterOptions(CLI::App* cmd, ClusterOptions* options);

// The cluster of one benchmark run. Destroying it stops the private MariaDB
// (if one was started) and removes its data.
struct BenchCluster {
  std::unique_ptr<testing::PrivateMariaDb> db;  // null when --config was given
  ClusterConfig config;
  std::string description;  // "private MariaDB 127.0.0.1:PORT" or the config path

  BenchCluster() = default;
  BenchCluster(BenchCluster&&) = default;
  BenchCluster& operator=(BenchCluster&&) = default;
  ~BenchCluster();
};

// Loads --config, or starts a private MariaDB and describes a cluster of
// `options.shards` shards on it (datastores as in testing/test_cluster.h:
// trips with BASE, STATUS, EPHEMERAL; users with PROFILE). Applies the
// group-commit overrides. Does not create any table (CellStore::Init does).
Result<BenchCluster> OpenBenchCluster(const ClusterOptions& options);

// Adds the cluster rows (where, shards, hosts, group commit) to `table`.
void DescribeCluster(const BenchCluster& cluster, Table& table);

// ---- Where the time goes ----------------------------------------------------

// CPU seconds (user + system) this process has used so far.
double ProcessCpuSeconds();
// CPU seconds (user + system) the calling thread has used so far, to the
// nanosecond (CLOCK_THREAD_CPUTIME_ID: for timing one call on a thread that
// also does other work).
double ThisThreadCpuSeconds();
// What the calling thread has used so far: CPU seconds (ThisThreadCpuSeconds)
// and wake-ups (voluntary context switches, getrusage RUSAGE_THREAD). For a
// thread to report before it ends: /proc lists live threads only.
struct ThreadUsage {
  double cpu_seconds = 0;
  uint64_t wake_ups = 0;
};
ThreadUsage ThisThreadUsage();
// CPU seconds (user + system) of this process's live threads whose name
// starts with `name_prefix` (/proc/self/task/*/comm), e.g. "rdk:mock", the
// thread of the private local broker. 0 when none is found.
double ThreadsCpuSeconds(const std::string& name_prefix);
// The same for the threads of process `pid` whose name contains `name_part`
// (e.g. "CompilerThre", a JVM's JIT compiler threads).
double ThreadsCpuSeconds(long pid, const std::string& name_part);

// CPU seconds (user + system) process `pid` has used so far (/proc); nullopt
// when it cannot be read.
std::optional<double> OtherProcessCpuSeconds(long pid);
// CPU seconds so far of thread `tid` of process `pid` (/proc/pid/task/tid/stat);
// nullopt when there is no such thread.
std::optional<double> OtherProcessCpuSeconds(long pid, long tid);

// Wake-ups: voluntary context switches (a thread blocked, to be woken later;
// each costs the scheduler, and in a VM often an inter-processor interrupt),
// so far.
// This process's live threads whose name starts with `name_prefix`.
uint64_t ThreadsWakeUps(const std::string& name_prefix);
// All of this process's threads, ended ones included (getrusage).
uint64_t ProcessWakeUps();
// Process `pid`'s live threads; nullopt when it cannot be read.
std::optional<uint64_t> OtherProcessWakeUps(long pid);

// CPU seconds the private MariaDB has used so far (read from /proc); nullopt
// when the benchmark runs against --config or /proc cannot be read.
std::optional<double> ServerCpuSeconds(const BenchCluster& cluster);
// The same for the private server `db` (nullopt when it does not run).
std::optional<double> ServerCpuSeconds(const testing::PrivateMariaDb& db);
// The private MariaDB's wake-ups so far (OtherProcessWakeUps); nullopt as
// ServerCpuSeconds.
std::optional<uint64_t> ServerWakeUps(const BenchCluster& cluster);
// The pid of the private server `db` (its pid file); nullopt when it does not run.
std::optional<long> ServerPid(const testing::PrivateMariaDb& db);

// Global status counters (information_schema.GLOBAL_STATUS, names in upper
// case, e.g. "QUESTIONS") summed over every MySQL host of the cluster.
Result<std::map<std::string, int64_t>> ServerStatus(const ClusterConfig& config,
                                                    const std::vector<std::string>& names);

}  // namespace cellar::bench
