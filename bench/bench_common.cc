#include "bench/bench_common.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cells/mysql_client.h"
#include "config/number_options.h"
#include "testing/test_cluster.h"

namespace cellar::bench {
namespace {

std::atomic<bool> g_stop{false};

}  // namespace

double Percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  // Nearest rank: the smallest value with at least p% of the values <= it.
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  if (rank == 0) rank = 1;
  return values[rank - 1];
}

double Round(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

std::string FormatNumber(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, std::fabs(v));
  std::string s(buf);
  const size_t dot = s.find('.');
  std::string int_part = s.substr(0, dot), frac = dot == std::string::npos ? "" : s.substr(dot);
  std::string grouped;
  for (size_t i = 0; i < int_part.size(); ++i) {
    if (i > 0 && (int_part.size() - i) % 3 == 0) grouped += ',';
    grouped += int_part[i];
  }
  return (v < 0 ? "-" : "") + grouped + frac;
}

size_t MedianIndex(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  return order[(order.size() - 1) / 2];
}

std::string JoinRates(const std::vector<double>& rates) {
  std::string out;
  for (double r : rates) {
    if (!out.empty()) out += ", ";
    out += FormatNumber(r, 0);
  }
  return out;
}

void AckLatency::Acked(uint64_t key, MicrosSinceEpoch at) {
  std::lock_guard<std::mutex> lock(mu_);
  acked_[key] = at;
}

void AckLatency::Arrived(uint64_t key, MicrosSinceEpoch at) {
  std::lock_guard<std::mutex> lock(mu_);
  arrived_.emplace(key, at);
}

AckLatency::Figures AckLatency::Join() const {
  std::lock_guard<std::mutex> lock(mu_);
  Figures f;
  f.ms.reserve(arrived_.size());
  for (const auto& [key, arrived] : arrived_) {
    auto a = acked_.find(key);
    if (a == acked_.end()) {
      ++f.without_ack;
      continue;
    }
    if (arrived < a->second) ++f.arrived_before_ack;
    f.ms.push_back(static_cast<double>(std::max<int64_t>(0, arrived - a->second)) / 1e3);
  }
  std::sort(f.ms.begin(), f.ms.end());
  return f;
}

void Table::Add(std::string figure, std::string value) {
  rows_.emplace_back(std::move(figure), std::move(value));
}

void Table::Print() const {
  size_t width = 0;
  for (const auto& [figure, value] : rows_)
    if (!value.empty()) width = std::max(width, figure.size());
  std::string out = "\n" + title_ + "\n" + std::string(title_.size(), '=') + "\n";
  for (const auto& [figure, value] : rows_) {
    if (value.empty()) {
      out += "\n" + figure + "\n";
      continue;
    }
    out += "  " + figure + std::string(width - figure.size() + 2, ' ') + value + "\n";
  }
  std::cout << out << "\n" << std::flush;
}

void PrintJsonLine(const nlohmann::ordered_json& j) { std::cout << j.dump() << "\n" << std::flush; }

void Progress(const std::string& msg) { std::cerr << "cellar-bench: " << msg << "\n"; }

void InstallStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    g_stop.store(true);
    Progress(std::string("got ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
             ", stopping (again to abort at once)");
    sigwait(&set, &sig);
    _exit(130);
  }).detach();
}

bool StopRequested() { return g_stop.load(std::memory_order_relaxed); }

void AddClusterOptions(CLI::App* cmd, ClusterOptions* o) {
  cmd->add_option("--config", o->config_path,
                  "cluster config (YAML) of a running cluster; default: start a private MariaDB")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--mock-broker", o->mock_broker,
                "start librdkafka's in-memory mock cluster instead of Apache Kafka as the "
                "private broker (JSON broker: \"mock\")");
  cmd->add_flag("--broker-transaction-verification", o->broker_transaction_verification,
                "start Apache Kafka with transaction.partition.verification.enable=true "
                "(Kafka's default; Cellar's private brokers turn it off)");
  cmd->add_option("--shards", o->shards, "logical shards of the private cluster")
      ->transform(DecimalInRange(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-batch-cells", o->max_batch_cells,
                  "override group_commit.max_batch_cells (0: keep the config's)")
      ->transform(DecimalInRange(0, 10000));
  cmd->add_option("--writer-threads", o->writer_threads_per_host,
                  "override group_commit.writer_threads_per_host (0: keep the config's)")
      ->transform(DecimalInRange(0, 256));
  cmd->add_option("--min-pipelined-cells", o->min_pipelined_cells,
                  "override group_commit.min_pipelined_cells (-1: keep the config's)")
      ->transform(DecimalInRange(-1, 10000));
  cmd->add_option("--linger-us", o->linger_us,
                  "override group_commit.linger_us (-1: keep the config's)")
      ->transform(DecimalInRange(-1, 100000));
  cmd->add_option("--commit-interval-us", o->commit_interval_us,
                  "override group_commit.commit_interval_us (-1: keep the config's)")
      ->transform(DecimalInRange(-1, 100000));
  cmd->add_option("--relay-poll-min-ms", o->relay_poll_min_ms,
                  "override relay.poll_min_ms (0: keep the config's)")
      ->transform(DecimalInRange(0, 10000));
  cmd->add_option("--relay-poll-max-ms", o->relay_poll_max_ms,
                  "override relay.poll_max_ms (0: keep the config's)")
      ->transform(DecimalInRange(0, 60000));
}

BenchCluster::~BenchCluster() {
  if (db && db->running())
    Progress("stopping the private MariaDB on port " + std::to_string(db->port()));
}

Result<BenchCluster> OpenBenchCluster(const ClusterOptions& options) {
  BenchCluster c;
  if (!options.config_path.empty()) {
    CELLAR_ASSIGN_OR_RETURN(c.config, LoadClusterConfig(options.config_path));
    c.description = options.config_path;
  } else {
    Progress("starting a private MariaDB");
    try {
      // Production-like InnoDB sizing (see PrivateMariaDbOptions).
      c.db = testing::PrivateMariaDb::Start(
          "bench", {.innodb_log_file_size = "512M", .innodb_buffer_pool_size = "1G"});
    } catch (const std::exception& e) {
      return Unavailable(std::string("could not start a private MariaDB: ") + e.what());
    }
    c.config = testing::MakeClusterConfig({c.db.get()}, options.shards);
    c.description = "private MariaDB " + c.db->host() + ":" + std::to_string(c.db->port());
  }
  if (options.max_batch_cells > 0) c.config.group_commit.max_batch_cells = options.max_batch_cells;
  if (options.writer_threads_per_host > 0)
    c.config.group_commit.writer_threads_per_host = options.writer_threads_per_host;
  if (options.min_pipelined_cells >= 0)
    c.config.group_commit.min_pipelined_cells = options.min_pipelined_cells;
  if (options.linger_us >= 0) c.config.group_commit.linger_us = options.linger_us;
  if (options.commit_interval_us >= 0)
    c.config.group_commit.commit_interval_us = options.commit_interval_us;
  if (options.relay_poll_min_ms > 0) c.config.relay.poll_min_ms = options.relay_poll_min_ms;
  if (options.relay_poll_max_ms > 0) c.config.relay.poll_max_ms = options.relay_poll_max_ms;
  if (c.config.relay.poll_max_ms < c.config.relay.poll_min_ms)
    return InvalidArgument("relay.poll_max_ms (" + std::to_string(c.config.relay.poll_max_ms) +
                           ") is below relay.poll_min_ms (" +
                           std::to_string(c.config.relay.poll_min_ms) + ")");
  if (c.config.datastores.empty() || c.config.datastores[0].columns.empty())
    return InvalidArgument(c.description + ": the benchmark needs a datastore with a column");
  return c;
}

void DescribeCluster(const BenchCluster& cluster, Table& table) {
  const ClusterConfig& cfg = cluster.config;
  table.Add("cluster", cluster.description);
  table.Add("mysql hosts", std::to_string(cfg.mysql.hosts.size()));
  table.Add("logical shards", std::to_string(cfg.shards));
  table.Add("group_commit.max_batch_cells", std::to_string(cfg.group_commit.max_batch_cells));
  table.Add("group_commit.writer_threads_per_host",
            std::to_string(cfg.group_commit.writer_threads_per_host));
  table.Add("group_commit.min_pipelined_cells",
            std::to_string(cfg.group_commit.min_pipelined_cells));
  table.Add("group_commit.linger_us / commit_interval_us",
            std::to_string(cfg.group_commit.linger_us) + " / " +
                std::to_string(cfg.group_commit.commit_interval_us));
}

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

double ThisThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

ThreadUsage ThisThreadUsage() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  // The CPU from the same clock as ThisThreadCpuSeconds, so that calls timed
  // with it can be taken out of a thread's total.
  return {ThisThreadCpuSeconds(), static_cast<uint64_t>(ru.ru_nvcsw)};
}

namespace {

// utime + stime of a /proc/.../stat file, in seconds; nullopt when unreadable.
std::optional<double> StatCpuSeconds(const std::string& path) {
  std::ifstream stat_file(path);
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

namespace {

// Calls add(task_dir) for each thread under `tasks` (/proc/.../task) whose
// name (comm) passes `match`.
template <typename Match, typename Add>
void ForEachTask(const std::filesystem::path& tasks, Match match, Add add) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream comm_file(task.path() / "comm");
    std::string comm;
    if (std::getline(comm_file, comm) && match(comm)) add(task.path());
  }
}

// CPU seconds of the threads under `tasks` whose name passes `match`.
template <typename Match>
double TasksCpuSeconds(const std::filesystem::path& tasks, Match match) {
  double total = 0;
  ForEachTask(tasks, match, [&](const std::filesystem::path& task) {
    total += StatCpuSeconds((task / "stat").string()).value_or(0);
  });
  return total;
}

// voluntary_ctxt_switches of a /proc/.../status file; 0 when unreadable.
uint64_t VoluntarySwitches(const std::filesystem::path& status_path) {
  std::ifstream status(status_path);
  const std::string key = "voluntary_ctxt_switches:";
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size()));
  return 0;
}

template <typename Match>
uint64_t TasksWakeUps(const std::filesystem::path& tasks, Match match) {
  uint64_t total = 0;
  ForEachTask(tasks, match, [&](const std::filesystem::path& task) {
    total += VoluntarySwitches(task / "status");
  });
  return total;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

}  // namespace

double ThreadsCpuSeconds(const std::string& name_prefix) {
  return TasksCpuSeconds("/proc/self/task",
                         [&](const std::string& comm) { return StartsWith(comm, name_prefix); });
}

double ThreadsCpuSeconds(long pid, const std::string& name_part) {
  return TasksCpuSeconds("/proc/" + std::to_string(pid) + "/task", [&](const std::string& comm) {
    return comm.find(name_part) != std::string::npos;
  });
}

uint64_t ThreadsWakeUps(const std::string& name_prefix) {
  return TasksWakeUps("/proc/self/task",
                      [&](const std::string& comm) { return StartsWith(comm, name_prefix); });
}

uint64_t ProcessWakeUps() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_nvcsw);
}

std::optional<uint64_t> OtherProcessWakeUps(long pid) {
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  if (pid <= 0 || !std::filesystem::exists(tasks)) return std::nullopt;
  return TasksWakeUps(tasks, [](const std::string&) { return true; });
}

std::optional<double> ServerCpuSeconds(const BenchCluster& cluster) {
  if (!cluster.db) return std::nullopt;
  return ServerCpuSeconds(*cluster.db);
}

std::optional<double> ServerCpuSeconds(const testing::PrivateMariaDb& db) {
  const std::optional<long> pid = ServerPid(db);
  if (!pid) return std::nullopt;
  return OtherProcessCpuSeconds(*pid);
}

std::optional<uint64_t> ServerWakeUps(const BenchCluster& cluster) {
  const std::optional<long> pid = cluster.db ? ServerPid(*cluster.db) : std::nullopt;
  if (!pid) return std::nullopt;
  return OtherProcessWakeUps(*pid);
}

std::optional<long> ServerPid(const testing::PrivateMariaDb& db) {
  if (!db.running()) return std::nullopt;
  std::ifstream pid_file(db.dir() + "/mariadbd.pid");
  long pid = 0;
  if (!(pid_file >> pid) || pid <= 0) return std::nullopt;
  return pid;
}

std::optional<double> OtherProcessCpuSeconds(long pid) {
  return StatCpuSeconds("/proc/" + std::to_string(pid) + "/stat");
}

std::optional<double> OtherProcessCpuSeconds(long pid, long tid) {
  return StatCpuSeconds("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
}

Result<std::map<std::string, int64_t>> ServerStatus(const ClusterConfig& config,
                                                    const std::vector<std::string>& names) {
  std::map<std::string, int64_t> out;
  for (const auto& n : names) out[n] = 0;
  std::string sql =
      "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
      " WHERE VARIABLE_NAME IN (";
  std::vector<SqlParam> params;
  for (size_t i = 0; i < names.size(); ++i) {
    sql += i ? ",?" : "?";
    params.emplace_back(names[i]);
  }
  sql += ")";
  for (const auto& host : config.mysql.hosts) {
    CELLAR_ASSIGN_OR_RETURN(auto conn, MysqlConnection::Connect(EndpointFor(config, host)));
    CELLAR_ASSIGN_OR_RETURN(auto rows, conn->Query(sql, params));
    for (const auto& r : rows) out[r.Bytes(0)] += r.Int(1);
  }
  return out;
}

void AddTwoWayLatencyRows(Table& t, const std::string& to, const TwoWayLatency& l,
                          const AckLatency::Figures& ack, double target_ms,
                          const std::string& target_note) {
  t.Add("txn-start (created_at) to " + to + " p50 ms", FormatNumber(l.created_p50, 2));
  t.Add("txn-start (created_at) to " + to + " p99 ms", FormatNumber(l.created_p99, 2));
  t.Add("txn-start (created_at) to " + to + " max ms", FormatNumber(l.created_max, 2));
  t.Add("commit-ack to " + to + " p50 / p99 ms",
        FormatNumber(l.ack_p50, 2) + " / " + FormatNumber(l.ack_p99, 2) +
            (l.ack_p99 < target_ms ? " (meets" : " (MISSES") + " the target < " +
            FormatNumber(target_ms, 0) + " ms p99" + target_note + ")");
  t.Add("commit-ack to " + to + " max ms", FormatNumber(l.ack_max, 2));
  t.Add("events arrived before their put returned",
        std::to_string(ack.arrived_before_ack) + " of " + std::to_string(ack.ms.size()) +
            " (counted as 0 ms)" +
            (ack.without_ack ? ", " + std::to_string(ack.without_ack) + " without an ok put"
                             : std::string()));
}

}  // namespace cellar::bench
