// `cellar-bench put`: group-committed single puts against raw multi-row INSERTs.
//
// Phase A (baseline): N rows written with prepared 100-row INSERT statements
// (autocommit, one statement per transaction) straight into the cells tables
// of the shard databases, through cellar::MysqlConnection: same columns, same
// EncodeBody bytes, distinct random row keys, each row in the shard its key
// hashes to. --raw-connections connections per MySQL host run in parallel
// (default 4, the default number of group-commit writer threads per host, so
// both phases keep the same number of transactions in flight on the server).
// Bodies are encoded before the clock starts. The phase runs --raw-rounds
// times (fresh rows each time) and the median round's rate is the baseline:
// the rate of a sub-second phase on a shared machine is noisy.
//
// Phase A' (only with --single-row-baseline): N single-row autocommit INSERTs
// from C connections per host, i.e. what the callers would get with no group
// commit at all.
//
// Phase B (the store): C caller threads each call CellStore::Put for one cell
// at a time (distinct random rows, trip-like bodies). The clock covers the
// whole Put: validation, encoding, queueing and the group-committed
// transaction. Per-put latency gives p50/p99/max. Each PutResult's
// (shard, created_at) identifies the transaction that committed it (every
// cell of one batch gets the same created_at), which yields the batch sizes
// the group committer achieved.
//
// Phase C (the layout's ceiling): the same N rows as single-row prepared
// INSERTs, C / W of them per transaction, each row in a different shard,
// from W connections per host (W = writer threads per host). That is what an
// ideal group commit does when no two waiting cells share a shard: with 64
// shards and 32 callers, nearly every cell needs its own INSERT. It takes no
// commit lock, so it is an upper bound for phase B.
//
// For each phase the table also shows where the time goes: client and server
// CPU per row (server CPU only for the private MariaDB), SQL statements per
// row, statement prepares and InnoDB fsyncs (GLOBAL_STATUS deltas; with
// --config they include whatever else the servers did meanwhile).
#include <algorithm>
#include <atomic>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "base/uuid.h"
#include "cells/body_codec.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "workers/bench/bench_common.h"
#include "workers/bench/bench_put_raw.h"

namespace cellar::bench {
namespace {

struct PutOptions {
  ClusterOptions cluster;
  int cells = 20000;
  int callers = 32;
  int body_bytes = 400;
  int raw_connections = 4;  // per MySQL host
  int raw_rows_per_insert = 100;
  int raw_rounds = 3;  // the median round is the baseline (the machine may be shared)
  bool single_row_baseline = false;
};

// ---- Phase B: single puts through the store ---------------------------------

struct PutPhaseResult : PhaseResult {
  std::vector<double> latencies_ms;
  // Batch sizes achieved: cells per (shard, created_at), i.e. per shard
  // INSERT; every shard of one transaction gets the same created_at.
  uint64_t transactions = 0;  // distinct created_at values
  uint64_t batches = 0;
  uint64_t max_batch = 0;
  uint64_t single_cell_batches = 0;
  double cell_weighted_batch = 0;  // the batch size the average cell shared
};

PutPhaseResult RunPutPhase(CellStore& store, const std::string& datastore,
                           const std::vector<CellWrite>& cells, int callers) {
  PutPhaseResult result;
  std::mutex mu;
  struct Committed {
    uint32_t shard = 0;
    MicrosSinceEpoch created_at = -1;  // -1: failed or not attempted
  };
  std::vector<Committed> committed(cells.size());
  std::vector<std::vector<double>> latencies(static_cast<size_t>(callers));
  std::atomic<size_t> next{0};
  std::latch start(callers + 1);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      auto& mine = latencies[static_cast<size_t>(c)];
      mine.reserve(cells.size() / static_cast<size_t>(callers) + 1);
      start.arrive_and_wait();
      while (!StopRequested()) {
        const size_t i = next.fetch_add(1);
        if (i >= cells.size()) break;
        Stopwatch put_clock;
        auto r = store.Put(datastore, cells[i]);
        mine.push_back(put_clock.Millis());
        if (!r.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (result.errors++ == 0) result.first_error = r.status().ToString();
          continue;
        }
        committed[i] = {r->shard, r->created_at};
      }
    });
  }
  start.arrive_and_wait();
  Stopwatch clock;
  for (auto& t : threads) t.join();
  result.seconds = clock.Seconds();
  result.interrupted = StopRequested();

  for (auto& l : latencies)
    result.latencies_ms.insert(result.latencies_ms.end(), l.begin(), l.end());
  std::map<std::pair<uint32_t, MicrosSinceEpoch>, uint64_t> batch_sizes;
  for (const auto& c : committed)
    if (c.created_at >= 0) {
      ++batch_sizes[{c.shard, c.created_at}];
      ++result.rows;
    }
  std::set<MicrosSinceEpoch> transactions;
  for (const auto& [key, n] : batch_sizes) transactions.insert(key.second);
  result.transactions = transactions.size();
  double weighted = 0;
  for (const auto& [key, n] : batch_sizes) {
    ++result.batches;
    result.max_batch = std::max(result.max_batch, n);
    if (n == 1) ++result.single_cell_batches;
    weighted += static_cast<double>(n) * static_cast<double>(n);
  }
  if (result.rows > 0) result.cell_weighted_batch = weighted / static_cast<double>(result.rows);
  return result;
}

// Resources a phase used: CPU of both processes and server counters.
struct Usage {
  double client_cpu_s = 0;
  std::optional<double> server_cpu_s;
  std::map<std::string, int64_t> status;  // empty when it could not be read
};

const std::vector<std::string> kStatusNames = {"QUESTIONS", "INNODB_DATA_FSYNCS",
                                               "COM_STMT_PREPARE"};

Usage TakeUsage(const BenchCluster& cluster) {
  Usage u;
  u.client_cpu_s = ProcessCpuSeconds();
  u.server_cpu_s = ServerCpuSeconds(cluster);
  auto st = ServerStatus(cluster.config, kStatusNames);
  if (st.ok()) u.status = std::move(st).value();
  return u;
}

// What a phase used between two snapshots; deltas of several rounds add up.
struct UsageDelta {
  double client_cpu_s = 0;
  std::optional<double> server_cpu_s;
  std::map<std::string, int64_t> status;  // empty when it could not be read

  void Add(const Usage& a, const Usage& b) {
    client_cpu_s += b.client_cpu_s - a.client_cpu_s;
    if (a.server_cpu_s && b.server_cpu_s)
      server_cpu_s = server_cpu_s.value_or(0) + *b.server_cpu_s - *a.server_cpu_s;
    if (!a.status.empty() && !b.status.empty())
      for (const auto& name : kStatusNames) status[name] += b.status.at(name) - a.status.at(name);
  }
};

// Adds "where the time goes" rows for `rows` rows written in `seconds`.
void AddUsageRows(Table& t, const UsageDelta& u, double rows, double seconds) {
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  t.Add("client CPU per row (us)", FormatNumber(u.client_cpu_s / rows * 1e6, 1));
  if (u.server_cpu_s) {
    t.Add("server CPU per row (us)", FormatNumber(*u.server_cpu_s / rows * 1e6, 1));
    t.Add("CPU busy, client + server",
          FormatNumber(100.0 * (u.client_cpu_s + *u.server_cpu_s) / (seconds * cores), 0) +
              " % of " + FormatNumber(cores, 0) + " cores");
  }
  if (!u.status.empty()) {
    auto get = [&](const char* name) { return static_cast<double>(u.status.at(name)); };
    t.Add("SQL statements per row", FormatNumber(get("QUESTIONS") / rows, 2));
    t.Add("statement prepares", FormatNumber(get("COM_STMT_PREPARE"), 0));
    const double fsyncs = get("INNODB_DATA_FSYNCS");
    t.Add("InnoDB fsyncs", FormatNumber(fsyncs, 0) + " (" +
                               FormatNumber(fsyncs > 0 ? rows / fsyncs : 0, 2) + " rows each)");
  }
}

// Rounds of one raw phase; the median round's rate counts (the machine may be shared).
struct RawRounds {
  std::vector<double> rates;  // rows/s of each round, in order
  double median_rows_per_s = 0;
  PhaseResult total;
  UsageDelta usage;
  int exit_code = 0;  // non-zero: the phase failed or was interrupted (reported)
};

template <typename Plan>
RawRounds RunRawRounds(const BenchCluster& cluster, const std::string& name, int rounds,
                       int connections, Plan plan) {
  RawRounds out;
  for (int round = 1; round <= rounds && !StopRequested(); ++round) {
    RawWork work = plan();
    size_t transactions = 0, statements = 0;
    for (const auto& host : work) {
      transactions += host.size();
      for (const auto& tx : host) statements += tx.statements.size();
    }
    Progress(name + " round " + std::to_string(round) + "/" + std::to_string(rounds) + ": " +
             std::to_string(statements) + " INSERT statements in " + std::to_string(transactions) +
             " transactions over " + std::to_string(connections) + " connection(s) per host");
    Usage before = TakeUsage(cluster);
    PhaseResult r = RunRawPhase(cluster.config, work, connections);
    Usage after = TakeUsage(cluster);
    if (r.interrupted) break;
    if (r.errors > 0) {
      Progress(name + " failed (" + std::to_string(r.errors) + " errors), first: " + r.first_error);
      out.exit_code = 1;
      return out;
    }
    out.usage.Add(before, after);
    out.rates.push_back(r.rows / r.seconds);
    out.total.rows += r.rows;
    out.total.seconds += r.seconds;
  }
  if (StopRequested()) {
    Progress("interrupted");
    out.exit_code = 130;
    return out;
  }
  std::vector<double> sorted = out.rates;
  out.median_rows_per_s = Percentile(sorted, 50);
  return out;
}

std::string JoinRates(const std::vector<double>& rates) {
  std::string out;
  for (double r : rates) {
    if (!out.empty()) out += ", ";
    out += FormatNumber(r, 0);
  }
  return out;
}

int RunPut(const PutOptions& o) {
  auto cluster_or = OpenBenchCluster(o.cluster);
  if (!cluster_or.ok()) {
    Progress(cluster_or.status().ToString());
    return 2;
  }
  BenchCluster cluster = std::move(cluster_or).value();
  const ClusterConfig& cfg = cluster.config;
  const std::string datastore = cfg.datastores[0].name;
  const std::string column = cfg.datastores[0].columns[0].name;

  std::unique_ptr<CellStore> store = CellStore::Open(cfg);
  Progress("creating shard databases and tables (" + std::to_string(cfg.shards) + " shards)");
  if (Status s = store->Init(); !s.ok()) {
    Progress("init failed: " + s.ToString());
    return 1;
  }
  if (StopRequested()) return 130;

  std::vector<uint32_t> host_of_shard(cfg.shards, 0);
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h)
    for (uint32_t s = cfg.mysql.hosts[h].first_shard;
         s <= cfg.mysql.hosts[h].last_shard && s < cfg.shards; ++s)
      host_of_shard[s] = static_cast<uint32_t>(h);

  std::mt19937_64 rng(std::random_device{}());

  // Phase A: --raw-rounds rounds of N rows each; the median round counts.
  RawRounds raw_phase = RunRawRounds(cluster, "phase A", o.raw_rounds, o.raw_connections, [&] {
    return PlanRawStatements(cfg, host_of_shard, datastore, column, o.cells, o.raw_rows_per_insert,
                             o.body_bytes, rng);
  });
  if (raw_phase.exit_code != 0) return raw_phase.exit_code;
  const double raw_rows_per_s = raw_phase.median_rows_per_s;

  // Phase C (run before B, reported after it): the layout's ceiling for
  // single puts, every cell alone in its shard's INSERT, C / W cells per
  // transaction from W connections.
  const int writers = cfg.group_commit.writer_threads_per_host;
  const int ceiling_rows_per_tx = std::max(1, o.callers / std::max(1, writers));
  RawRounds ceiling = RunRawRounds(cluster, "phase C", o.raw_rounds, writers, [&] {
    return PlanShardRowTransactions(cfg, host_of_shard, datastore, column, o.cells,
                                    ceiling_rows_per_tx, o.body_bytes, rng);
  });
  if (ceiling.exit_code != 0) return ceiling.exit_code;

  // Optional reference: what C callers get without group commit.
  PhaseResult single;
  if (o.single_row_baseline) {
    auto statements =
        PlanRawStatements(cfg, host_of_shard, datastore, column, o.cells, 1, o.body_bytes, rng);
    Progress("phase A': " + std::to_string(o.cells) + " single-row autocommit INSERTs over " +
             std::to_string(o.callers) + " connection(s) per host");
    single = RunRawPhase(cfg, statements, o.callers);
    if (single.interrupted) {
      Progress("interrupted");
      return 130;
    }
    if (single.errors > 0) {
      Progress("phase A' failed (" + std::to_string(single.errors) +
               " errors), first: " + single.first_error);
      return 1;
    }
  }

  // Phase B.
  Progress("phase B: generating " + std::to_string(o.cells) + " trip cells");
  std::vector<CellWrite> cells(static_cast<size_t>(o.cells));
  uint64_t json_bytes = 0, encoded_bytes = 0;
  for (auto& c : cells) {
    if (StopRequested()) {
      Progress("interrupted");
      return 130;
    }
    c.row_key = Uuid::Random();
    c.column = column;
    c.ref_key = 0;
    c.body = MakeTripBody(rng, o.body_bytes);
    json_bytes += c.body.dump().size();
    encoded_bytes += EncodeBody(c.body).size();
  }
  const double compression_ratio =
      static_cast<double>(json_bytes) / static_cast<double>(encoded_bytes);
  Progress("phase B: " + std::to_string(o.callers) + " callers doing single puts");
  Usage put_before = TakeUsage(cluster);
  PutPhaseResult put = RunPutPhase(*store, datastore, cells, o.callers);
  Usage put_after = TakeUsage(cluster);
  if (put.interrupted) {
    Progress("interrupted");
    return 130;
  }
  const double cells_per_s = put.rows / put.seconds;
  const double ratio = cells_per_s / raw_rows_per_s;
  std::vector<double> lat = std::move(put.latencies_ms);
  const double p50 = Percentile(lat, 50), p99 = Percentile(lat, 99),
               max_ms = lat.empty() ? 0 : lat.back();
  store->Close();

  Table t("cellar-bench put");
  t.Section("settings");
  DescribeCluster(cluster, t);
  t.Add("datastore / column", datastore + " / " + column);
  t.Add("cells (N)", std::to_string(o.cells));
  t.Add("callers (C)", std::to_string(o.callers));
  t.Add("body JSON bytes (mean)", FormatNumber(static_cast<double>(json_bytes) / o.cells, 1));
  t.Add("body stored bytes (mean)", FormatNumber(static_cast<double>(encoded_bytes) / o.cells, 1));
  t.Section("phase A: raw multi-row INSERT (baseline)");
  t.Add("rows per INSERT", std::to_string(o.raw_rows_per_insert) + " (prepared, autocommit)");
  t.Add("connections", std::to_string(o.raw_connections) +
                           " per host (= default writer threads per host: same number of "
                           "transactions in flight)");
  t.Add("rounds of N rows",
        std::to_string(raw_phase.rates.size()) + " (rows/s: " + JoinRates(raw_phase.rates) + ")");
  t.Add("rows written", std::to_string(raw_phase.total.rows));
  t.Add("seconds", FormatNumber(raw_phase.total.seconds, 3));
  t.Add("raw rows/s (median round)", FormatNumber(raw_rows_per_s, 0));
  AddUsageRows(t, raw_phase.usage, static_cast<double>(raw_phase.total.rows),
               raw_phase.total.seconds);
  if (o.single_row_baseline) {
    t.Section("phase A': raw single-row autocommit INSERT (no group commit)");
    t.Add("connections", std::to_string(o.callers) + " per host (= callers)");
    t.Add("rows written", std::to_string(single.rows));
    t.Add("seconds", FormatNumber(single.seconds, 3));
    t.Add("single-row rows/s", FormatNumber(single.rows / single.seconds, 0));
  }
  t.Section("phase B: CellStore::Put, group commit");
  t.Add("cells written", std::to_string(put.rows));
  t.Add("errors", std::to_string(put.errors) +
                      (put.errors ? " (first: " + put.first_error + ")" : std::string()));
  t.Add("seconds", FormatNumber(put.seconds, 3));
  t.Add("cells/s", FormatNumber(cells_per_s, 0));
  t.Add("put latency p50 ms", FormatNumber(p50, 2));
  t.Add("put latency p99 ms", FormatNumber(p99, 2));
  t.Add("put latency max ms", FormatNumber(max_ms, 2));
  t.Add(
      "transactions",
      std::to_string(put.transactions) + " (" + FormatNumber(put.transactions / put.seconds, 0) +
          "/s, " +
          FormatNumber(put.transactions ? static_cast<double>(put.rows) / put.transactions : 0, 2) +
          " cells each)");
  t.Add("shard batches (one INSERT each)", std::to_string(put.batches));
  t.Add("cells per shard batch (mean)",
        FormatNumber(put.batches ? static_cast<double>(put.rows) / put.batches : 0, 2));
  t.Add("cells per shard batch (as seen by a cell)", FormatNumber(put.cell_weighted_batch, 2));
  t.Add("largest batch", std::to_string(put.max_batch));
  t.Add("single-cell batches",
        FormatNumber(put.batches ? 100.0 * put.single_cell_batches / put.batches : 0, 1) + " %");
  UsageDelta put_usage;
  put_usage.Add(put_before, put_after);
  if (put.rows > 0) AddUsageRows(t, put_usage, static_cast<double>(put.rows), put.seconds);
  t.Section("phase C: the layout's ceiling (raw single-row INSERTs, one per shard)");
  t.Add("transactions", std::to_string(ceiling_rows_per_tx) + " rows of distinct shards each, " +
                            std::to_string(writers) +
                            " connection(s) per host (= writer threads), no commit lock");
  t.Add("rounds of N rows",
        std::to_string(ceiling.rates.size()) + " (rows/s: " + JoinRates(ceiling.rates) + ")");
  t.Add("ceiling rows/s (median round)", FormatNumber(ceiling.median_rows_per_s, 0));
  AddUsageRows(t, ceiling.usage, static_cast<double>(ceiling.total.rows), ceiling.total.seconds);
  t.Section("result");
  t.Add("ratio (cells/s / raw rows/s)", FormatNumber(ratio, 3) + " (target >= 0.5)");
  t.Add("ceiling / raw rows/s", FormatNumber(ceiling.median_rows_per_s / raw_rows_per_s, 3) +
                                    " (the best ratio single puts can reach on this layout)");
  t.Add("cells/s / ceiling rows/s", FormatNumber(cells_per_s / ceiling.median_rows_per_s, 3));
  t.Add("compression ratio (JSON / stored)", FormatNumber(compression_ratio, 2));
  t.Print();

  nlohmann::ordered_json j;
  j["bench"] = "put";
  j["cells"] = o.cells;
  j["callers"] = o.callers;
  j["cells_per_s"] = Round(cells_per_s, 1);
  j["raw_rows_per_s"] = Round(raw_rows_per_s, 1);
  j["ratio"] = Round(ratio, 3);
  j["p50_ms"] = Round(p50, 3);
  j["p99_ms"] = Round(p99, 3);
  j["compression_ratio"] = Round(compression_ratio, 3);
  j["max_ms"] = Round(max_ms, 3);
  j["shards"] = cfg.shards;
  j["raw_connections"] = o.raw_connections;
  j["max_batch_cells"] = cfg.group_commit.max_batch_cells;
  j["writer_threads"] = cfg.group_commit.writer_threads_per_host;
  j["mean_batch_cells"] = Round(put.batches ? static_cast<double>(put.rows) / put.batches : 0, 2);
  j["ceiling_rows_per_s"] = Round(ceiling.median_rows_per_s, 1);
  j["ceiling_ratio"] = Round(ceiling.median_rows_per_s / raw_rows_per_s, 3);
  j["ratio_to_ceiling"] = Round(cells_per_s / ceiling.median_rows_per_s, 3);
  j["transactions"] = put.transactions;
  j["cells_per_transaction"] =
      Round(put.transactions ? static_cast<double>(put.rows) / put.transactions : 0, 2);
  if (o.single_row_baseline) j["single_row_rows_per_s"] = Round(single.rows / single.seconds, 1);
  j["errors"] = put.errors;
  PrintJsonLine(j);
  return put.errors ? 1 : 0;
}

}  // namespace

void AddPutCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PutOptions>();
  CLI::App* cmd = app.add_subcommand(
      "put",
      "group-committed single puts from C callers vs raw 100-row INSERTs on the same server "
      "(writes N cells and N raw rows into the first datastore's first column)");
  AddClusterOptions(cmd, &o->cluster);
  cmd->add_option("--cells", o->cells, "cells N written by each phase")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  cmd->add_option("--callers", o->callers, "concurrent caller threads C doing single puts")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--body-bytes", o->body_bytes,
                  "approximate JSON size of a trip body (padded with a route string)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--raw-connections", o->raw_connections,
                  "parallel connections per host for the raw INSERT baseline")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--raw-rounds", o->raw_rounds,
                  "rounds of N raw rows; the median round's rate is the baseline")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--single-row-baseline", o->single_row_baseline,
                "also time N single-row autocommit INSERTs from C connections (no group commit)");
  cmd->callback([o, exit_code] { *exit_code = RunPut(*o); });
}

}  // namespace cellar::bench
