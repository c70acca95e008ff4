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

// ---- Trip-like bodies -------------------------------------------------------

struct City {
  const char* name;
  const char* currency;
  double lat, lng;
};
constexpr City kCities[] = {
    {"san_francisco", "USD", 37.7749, -122.4194}, {"new_york", "USD", 40.7128, -74.0060},
    {"london", "GBP", 51.5074, -0.1278},          {"sao_paulo", "BRL", -23.5505, -46.6333},
    {"mumbai", "INR", 19.0760, 72.8777},          {"paris", "EUR", 48.8566, 2.3522},
    {"amsterdam", "EUR", 52.3676, 4.9041},        {"mexico_city", "MXN", 19.4326, -99.1332},
};
constexpr const char* kPayment[] = {"card", "card", "card", "wallet", "cash"};

double Coord(std::mt19937_64& rng, double center) {
  return Round(center + std::uniform_real_distribution<double>(-0.15, 0.15)(rng), 5);
}

// A realistic trip document (~380 bytes of JSON text), padded with a
// polyline-like "route" string up to about `target_bytes` when that is larger.
nlohmann::json MakeTripBody(std::mt19937_64& rng, int target_bytes) {
  const City& city = kCities[rng() % std::size(kCities)];
  const MicrosSinceEpoch requested =
      NowMicros() - static_cast<int64_t>(rng() % (86400ULL * 30)) * 1000000;
  const int64_t duration_s = 300 + static_cast<int64_t>(rng() % 3000);
  const double km =
      Round(duration_s / 60.0 * std::uniform_real_distribution<double>(0.3, 0.9)(rng), 2);
  const double surge = (rng() % 5 == 0) ? 1.0 + static_cast<double>(rng() % 15) / 10.0 : 1.0;
  const double total = Round((2.5 + km * 1.15 + duration_s / 60.0 * 0.3) * surge, 2);
  const uint64_t status_pick = rng() % 20;
  nlohmann::json body = {
      {"rider_uuid", Uuid::Random().ToString()},
      {"driver_uuid", Uuid::Random().ToString()},
      {"city", city.name},
      {"status", status_pick < 17   ? "completed"
                 : status_pick < 19 ? "rider_canceled"
                                    : "driver_canceled"},
      {"requested_at", FormatRfc3339(requested)},
      {"duration_s", duration_s},
      {"distance_km", km},
      {"pickup", {{"lat", Coord(rng, city.lat)}, {"lng", Coord(rng, city.lng)}}},
      {"dropoff", {{"lat", Coord(rng, city.lat)}, {"lng", Coord(rng, city.lng)}}},
      {"fare", {{"currency", city.currency}, {"total", total}}},
      {"payment", kPayment[rng() % std::size(kPayment)]},
  };
  const int size = static_cast<int>(body.dump().size());
  const int pad = target_bytes - size - static_cast<int>(sizeof(R"(,"route":"")") - 1);
  if (pad > 0) {
    // Encoded polylines use the 64 characters '?' .. '~'.
    std::string route(static_cast<size_t>(pad), '?');
    for (char& c : route) c = static_cast<char>('?' + rng() % 64);
    body["route"] = route;
  }
  return body;
}

// ---- Phase A: raw multi-row INSERTs ----------------------------------------

struct RawStatement {
  uint32_t shard = 0;
  std::string sql;
  std::vector<SqlParam> params;  // 6 per row; created_at (every 6th) set when run
};

struct PhaseResult {
  double seconds = 0;
  uint64_t rows = 0;
  uint64_t errors = 0;
  std::string first_error;
  bool interrupted = false;
};

// Builds `rows` rows in full `rows_per_insert`-row statements per shard (only
// the last statement may be shorter) and groups them by host.
std::vector<std::vector<RawStatement>> PlanRawStatements(const ClusterConfig& cfg,
                                                         const std::vector<uint32_t>& host_of_shard,
                                                         const std::string& datastore,
                                                         const std::string& column, int rows,
                                                         int rows_per_insert, int body_bytes,
                                                         std::mt19937_64& rng) {
  std::vector<std::vector<RawStatement>> by_host(cfg.mysql.hosts.size());
  std::vector<std::vector<std::pair<Uuid, std::string>>> buckets(cfg.shards);
  const std::string table_name = "cells_" + datastore;
  int emitted = 0;
  while (emitted < rows && !StopRequested()) {
    const Uuid row = Uuid::Random();
    const uint32_t shard = ShardForRow(row, cfg.shards);
    auto& bucket = buckets[shard];
    bucket.emplace_back(row, EncodeBody(MakeTripBody(rng, body_bytes)));
    const int want = std::min(rows_per_insert, rows - emitted);
    if (static_cast<int>(bucket.size()) < want) continue;
    RawStatement st;
    st.shard = shard;
    st.sql = "INSERT INTO " + QualifiedTable(cfg.ShardDatabase(shard), table_name) +
             " (row_key, column_name, ref_key, body, tombstone, created_at) VALUES ";
    st.params.reserve(bucket.size() * 6);
    for (size_t i = 0; i < bucket.size(); ++i) {
      st.sql += i ? ",(?,?,?,?,?,?)" : "(?,?,?,?,?,?)";
      st.params.emplace_back(bucket[i].first.ToBytes());
      st.params.emplace_back(column);
      st.params.emplace_back(int64_t{0});
      st.params.emplace_back(std::move(bucket[i].second));
      st.params.emplace_back(int64_t{0});
      st.params.emplace_back(int64_t{0});
    }
    emitted += static_cast<int>(bucket.size());
    bucket.clear();
    by_host[host_of_shard[shard]].push_back(std::move(st));
  }
  return by_host;
}

PhaseResult RunRawPhase(const ClusterConfig& cfg, std::vector<std::vector<RawStatement>>& by_host,
                        int connections_per_host) {
  PhaseResult result;
  std::mutex mu;
  auto record_error = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (result.errors++ == 0) result.first_error = s.ToString();
  };
  // Connect everything before the clock starts.
  struct Worker {
    size_t host;
    std::unique_ptr<MysqlConnection> conn;
  };
  std::vector<Worker> workers;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    if (by_host[h].empty()) continue;
    for (int i = 0; i < connections_per_host; ++i) {
      auto conn = MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts[h]));
      if (!conn.ok()) {
        record_error(conn.status());
        return result;
      }
      workers.push_back({h, std::move(conn).value()});
    }
  }
  std::vector<std::atomic<size_t>> next(by_host.size());
  for (auto& n : next) n.store(0);
  std::atomic<uint64_t> rows{0};
  std::latch start(static_cast<std::ptrdiff_t>(workers.size()) + 1);
  std::vector<std::thread> threads;
  for (auto& w : workers) {
    threads.emplace_back([&, wp = &w] {
      auto& statements = by_host[wp->host];
      start.arrive_and_wait();
      while (!StopRequested()) {
        const size_t i = next[wp->host].fetch_add(1);
        if (i >= statements.size()) break;
        RawStatement& st = statements[i];
        const int64_t now = NowMicros();
        for (size_t p = 5; p < st.params.size(); p += 6) st.params[p] = now;
        auto r = wp->conn->Execute(st.sql, st.params);
        if (!r.ok()) {
          record_error(r.status());
          continue;
        }
        rows.fetch_add(*r);
      }
    });
  }
  start.arrive_and_wait();
  Stopwatch clock;
  for (auto& t : threads) t.join();
  result.seconds = clock.Seconds();
  result.rows = rows.load();
  result.interrupted = StopRequested();
  return result;
}

// ---- Phase B: single puts through the store ---------------------------------

struct PutPhaseResult : PhaseResult {
  std::vector<double> latencies_ms;
  // Batch sizes achieved: cells per (shard, created_at) transaction.
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
  std::vector<double> raw_rates;
  PhaseResult raw_total;
  UsageDelta raw_usage;
  for (int round = 1; round <= o.raw_rounds && !StopRequested(); ++round) {
    auto statements = PlanRawStatements(cfg, host_of_shard, datastore, column, o.cells,
                                        o.raw_rows_per_insert, o.body_bytes, rng);
    size_t statement_count = 0;
    for (const auto& s : statements) statement_count += s.size();
    Progress("phase A round " + std::to_string(round) + "/" + std::to_string(o.raw_rounds) + ": " +
             std::to_string(statement_count) + " INSERT statements over " +
             std::to_string(o.raw_connections) + " connection(s) per host");
    Usage before = TakeUsage(cluster);
    PhaseResult raw = RunRawPhase(cfg, statements, o.raw_connections);
    Usage after = TakeUsage(cluster);
    if (raw.interrupted) {
      Progress("interrupted");
      return 130;
    }
    if (raw.errors > 0) {
      Progress("phase A failed (" + std::to_string(raw.errors) +
               " errors), first: " + raw.first_error);
      return 1;
    }
    raw_usage.Add(before, after);
    raw_rates.push_back(raw.rows / raw.seconds);
    raw_total.rows += raw.rows;
    raw_total.seconds += raw.seconds;
  }
  if (StopRequested()) {
    Progress("interrupted");
    return 130;
  }
  std::vector<double> sorted_rates = raw_rates;
  const double raw_rows_per_s = Percentile(sorted_rates, 50);

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
  std::string rounds;
  for (double r : raw_rates) rounds += (rounds.empty() ? "" : ", ") + FormatNumber(r, 0);
  t.Add("rounds of N rows", std::to_string(o.raw_rounds) + " (rows/s: " + rounds + ")");
  t.Add("rows written", std::to_string(raw_total.rows));
  t.Add("seconds", FormatNumber(raw_total.seconds, 3));
  t.Add("raw rows/s (median round)", FormatNumber(raw_rows_per_s, 0));
  AddUsageRows(t, raw_usage, static_cast<double>(raw_total.rows), raw_total.seconds);
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
  t.Add("transactions (batches)", std::to_string(put.batches));
  t.Add("transactions/s", FormatNumber(put.batches / put.seconds, 0));
  t.Add("cells per batch (mean)",
        FormatNumber(put.batches ? static_cast<double>(put.rows) / put.batches : 0, 2));
  t.Add("cells per batch (as seen by a cell)", FormatNumber(put.cell_weighted_batch, 2));
  t.Add("largest batch", std::to_string(put.max_batch));
  t.Add("single-cell batches",
        FormatNumber(put.batches ? 100.0 * put.single_cell_batches / put.batches : 0, 1) + " %");
  UsageDelta put_usage;
  put_usage.Add(put_before, put_after);
  if (put.rows > 0) AddUsageRows(t, put_usage, static_cast<double>(put.rows), put.seconds);
  t.Section("result");
  t.Add("ratio (cells/s / raw rows/s)", FormatNumber(ratio, 3) + " (target >= 0.5)");
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
