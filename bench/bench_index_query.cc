// Phase C of `cellar-bench index` (see bench_index.cc): queries on an index of
// --entries entries. The entry tables of bench_query_index are emptied and
// bulk-loaded directly (multi-row INSERTs, not the change log), then every
// query runs through IndexReader::Query and as the same SQL text through a
// raw MysqlConnection (baseline).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_common.h"
#include "bench/bench_index_phases.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"
#include "indexes/index_entry.h"
#include "indexes/index_query.h"

namespace cellar::bench::index_phases {
namespace {

// ---- Phase C helpers --------------------------------------------------------------

// The hosts' index of every shard.
std::vector<size_t> HostOfShard(const ClusterConfig& cfg) {
  std::vector<size_t> out(cfg.shards, 0);
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h)
    for (uint32_t s : cfg.mysql.hosts[h].shards) out[s] = h;
  return out;
}

// One multi-row INSERT: `count` entries of the shard's drivers starting at `first`.
struct LoadItem {
  uint32_t shard = 0;
  uint64_t first = 0;
  uint64_t count = 0;
};

struct LoadResult {
  double seconds = 0;
  uint64_t rows = 0;
  uint64_t errors = 0;
  std::string first_error;
};

// Bulk-loads the entry table of (def, version): entries / drivers rows per
// driver, each on its driver's shard.
LoadResult BulkLoad(const ClusterConfig& cfg, const IndexDefinition& def, int version,
                    const std::vector<Uuid>& drivers, const std::vector<uint32_t>& driver_shard,
                    uint64_t entries, int rows_per_insert, int connections_per_host) {
  LoadResult result;
  std::mutex mu;
  auto record_error = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (result.errors++ == 0) result.first_error = s.ToString();
  };
  // Per shard: its drivers; entry j of the shard belongs to driver j % size.
  std::vector<std::vector<size_t>> drivers_of(cfg.shards);
  for (size_t d = 0; d < drivers.size(); ++d) drivers_of[driver_shard[d]].push_back(d);
  const uint64_t per_driver = entries / drivers.size();
  uint64_t remainder = entries % drivers.size();
  const std::vector<size_t> host_of = HostOfShard(cfg);
  std::vector<std::vector<LoadItem>> items(cfg.mysql.hosts.size());
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    if (drivers_of[s].empty()) continue;
    uint64_t rows = per_driver * drivers_of[s].size();
    const uint64_t extra = std::min<uint64_t>(remainder, drivers_of[s].size());
    rows += extra;
    remainder -= extra;
    for (uint64_t first = 0; first < rows; first += static_cast<uint64_t>(rows_per_insert))
      items[host_of[s]].push_back(
          {s, first, std::min<uint64_t>(static_cast<uint64_t>(rows_per_insert), rows - first)});
  }
  const IndexColumnDef& cd = def.column_defs.front();
  std::string cols = "shard, row_key, column_key, ref_key, added_id, source_shard, created_at";
  for (const auto& f : cd.fields) cols += ", " + f.sql_column;
  std::string row_marks = "(?, ?, ?, ?, ?, ?, ?";
  for (size_t i = 0; i < cd.fields.size(); ++i) row_marks += ", ?";
  row_marks += ")";
  const MicrosSinceEpoch now = NowMicros();
  std::atomic<uint64_t> next_added_id{1}, rows{0};
  std::vector<std::atomic<size_t>> next(items.size());
  for (auto& n : next) n.store(0);

  struct Worker {
    size_t host;
    std::unique_ptr<MysqlConnection> conn;
  };
  std::vector<Worker> workers;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    if (items[h].empty()) continue;
    for (int i = 0; i < connections_per_host; ++i) {
      auto conn = MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts[h]));
      if (!conn.ok()) {
        record_error(conn.status());
        return result;
      }
      workers.push_back({h, std::move(conn).value()});
    }
  }
  Stopwatch clock;
  {
    std::vector<std::jthread> threads;
    for (auto& w : workers)
      threads.emplace_back([&, wp = &w] {
        std::mt19937_64 rng(std::random_device{}());
        std::vector<SqlParam> params;
        while (!StopRequested()) {
          const size_t i = next[wp->host].fetch_add(1);
          if (i >= items[wp->host].size()) break;
          const LoadItem& it = items[wp->host][i];
          const std::string table =
              QualifiedTable(cfg.DatabaseForShard(it.shard), EntryTableName(def.table, version));
          std::string sql = "INSERT INTO " + table + " (" + cols + ") VALUES ";
          params.clear();
          const auto& mine = drivers_of[it.shard];
          uint64_t added_id = next_added_id.fetch_add(it.count);
          for (uint64_t j = 0; j < it.count; ++j) {
            sql += j ? ", " + row_marks : row_marks;
            const Uuid row = Uuid::Random();
            const size_t d = mine[(it.first + j) % mine.size()];
            const MicrosSinceEpoch requested =
                now - static_cast<int64_t>(rng() % static_cast<uint64_t>(30 * kDayMicros));
            params.emplace_back(int64_t{it.shard});
            params.emplace_back(row.ToBytes());
            params.emplace_back(cd.column_key);
            params.emplace_back(int64_t{0});
            params.emplace_back(added_id++);
            params.emplace_back(int64_t{ShardForRow(row, cfg.shards)});
            params.emplace_back(requested + static_cast<int64_t>(300 + rng() % 3000) * 1000000);
            params.emplace_back(drivers[d].ToBytes());
            params.emplace_back(std::string(kCities[rng() % std::size(kCities)]));
            params.emplace_back(int64_t{requested});
            params.emplace_back(Round(5 + static_cast<double>(rng() % 10000) / 100.0, 2));
          }
          auto r = wp->conn->Execute(sql, params);
          if (!r.ok()) {
            record_error(r.status());
            continue;
          }
          rows.fetch_add(*r);
        }
      });
  }
  result.seconds = clock.Seconds();
  result.rows = rows.load();
  return result;
}

// The SQL IndexReader::Query runs for driver + city + requested_at >= since,
// newest first, limit 100 (indexes/index_query.cc).
std::string QuerySql(const ClusterConfig& cfg, const IndexDefinition& def, int version,
                     uint32_t shard) {
  const auto all = def.AllFields();
  std::string sql = "SELECT row_key, column_key, ref_key, created_at";
  for (const auto& f : all) sql += ", " + f.sql_column;
  sql +=
      " FROM " + QualifiedTable(cfg.DatabaseForShard(shard), EntryTableName(def.table, version)) +
      " WHERE shard = ? AND " + all.front().sql_column + " = ? AND " +
      def.FindField("city")->sql_column + " = ? AND " + def.FindField("requested_at")->sql_column +
      " >= ? ORDER BY created_at DESC, row_key DESC, column_key DESC LIMIT 101";
  return sql;
}

}  // namespace

int RunQueryPhase(const IndexBenchRun& b, IndexReader& reader, const std::vector<Uuid>& drivers,
                  QueryFigures* out) {
  const IndexBenchOptions& o = b.o;
  const BenchCluster& cluster = b.cluster;
  const ClusterConfig& cfg = b.cfg;
  CellStore* const store = b.store;
  const IndexDefinition& query_def = b.query_def;
  const int query_version = b.query_version;
  Progress("phase C: emptying " + std::string(kQueryIndex) + " and bulk-loading " +
           std::to_string(o.entries) + " entries over " + std::to_string(o.drivers) +
           " drivers (direct multi-row INSERTs)");
  for (size_t h = 0; h < cfg.mysql.hosts.size() && !StopRequested(); ++h) {
    const std::string db = cfg.HostDatabase(cfg.mysql.hosts[h]);
    auto lease = store->PoolForHost(h).Acquire();
    Status st =
        lease.ok()
            ? (*lease)->ExecuteDdl("TRUNCATE TABLE " +
                                   QualifiedTable(db, EntryTableName(kQueryIndex, query_version)))
            : lease.status();
    if (st.ok())
      st = (*lease)->ExecuteDdl("TRUNCATE TABLE " +
                                QualifiedTable(db, PointerTableName(kQueryIndex, query_version)));
    if (!st.ok()) {
      Progress("truncate failed: " + st.ToString());
      return 1;
    }
  }
  const IndexField& shard_field = query_def.AllFields().front();
  std::vector<uint32_t> driver_shard(drivers.size());
  for (size_t d = 0; d < drivers.size(); ++d)
    driver_shard[d] = ShardForFieldValue(shard_field, SqlParam(drivers[d].ToBytes()), cfg.shards);
  // The private server starts with a 128 MB buffer pool and 64 MB redo log
  // (testing/private_mariadb.cc): too small for 1M entries with five
  // B-trees, which turns the load and the queries into disk I/O. Both are
  // dynamic in MariaDB 10.11; the benchmark's own server gets 1 GB / 512 MB.
  std::string server_memory = "unchanged (--config)";
  if (cluster.db) {
    const bool ok = cluster.db->Execute("SET GLOBAL innodb_buffer_pool_size = 1073741824") &&
                    cluster.db->Execute("SET GLOBAL innodb_log_file_size = 536870912");
    server_memory = ok ? "innodb_buffer_pool_size 1 GB, innodb_log_file_size 512 MB (raised "
                         "before the load)"
                       : "could not be raised (see stderr)";
  }
  const double load_cpu_before = ProcessCpuSeconds();
  const std::optional<double> load_server_before = ServerCpuSeconds(cluster);
  LoadResult load =
      BulkLoad(cfg, query_def, query_version, drivers, driver_shard,
               static_cast<uint64_t>(o.entries), o.rows_per_insert, o.load_connections);
  if (StopRequested()) return 130;
  const double load_client_cpu = ProcessCpuSeconds() - load_cpu_before;
  const std::optional<double> load_server_after = ServerCpuSeconds(cluster);
  if (load.errors > 0) {
    Progress("bulk load failed (" + std::to_string(load.errors) +
             " errors), first: " + load.first_error);
    return 1;
  }

  Progress("phase C: " + std::to_string(o.queries) +
           " queries by driver + city + time range, IndexReader vs raw SQL");
  std::vector<std::unique_ptr<MysqlConnection>> raw(cfg.mysql.hosts.size());
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    auto c = MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts[h]));
    if (!c.ok()) {
      Progress("raw connection: " + c.status().ToString());
      return 1;
    }
    raw[h] = std::move(c).value();
  }
  const std::vector<size_t> host_of = HostOfShard(cfg);
  std::mt19937_64 qrng(std::random_device{}());
  std::vector<double> cellar_ms, raw_ms;
  uint64_t cellar_hits = 0, mismatches = 0, query_errors = 0;
  std::string first_error;
  const int warmup = std::min(200, o.queries);
  for (int i = 0; i < warmup + o.queries && !StopRequested(); ++i) {
    const size_t d = qrng() % drivers.size();
    const std::string city = kCities[qrng() % std::size(kCities)];
    const MicrosSinceEpoch since = NowMicros() - o.query_days * kDayMicros;
    IndexQuery q;
    q.index = kQueryIndex;
    q.shard_value = drivers[d].ToString();
    q.filters = {IndexFilter{"city", IndexFilter::Op::kEq, {city}},
                 IndexFilter{"requested_at", IndexFilter::Op::kGe, {int64_t{since}}}};
    q.limit = 100;
    const std::string sql = QuerySql(cfg, query_def, query_version, driver_shard[d]);
    const std::vector<SqlParam> params{int64_t{driver_shard[d]}, drivers[d].ToBytes(), city,
                                       int64_t{since}};
    MysqlConnection& conn = *raw[host_of[driver_shard[d]]];
    size_t got_cellar = 0, got_raw = 0;
    double t_cellar = 0, t_raw = 0;
    for (int pass = 0; pass < 2; ++pass) {
      if ((pass == 0) == (i % 2 == 0)) {
        Stopwatch clock;
        auto r = reader.Query(q);
        t_cellar = clock.Millis();
        if (!r.ok()) {
          if (query_errors++ == 0) first_error = r.status().ToString();
        } else {
          got_cellar = r->hits.size();
        }
      } else {
        Stopwatch clock;
        auto r = conn.Query(sql, params);
        t_raw = clock.Millis();
        if (!r.ok()) {
          if (query_errors++ == 0) first_error = r.status().ToString();
        } else {
          got_raw = std::min<size_t>(100, r->size());
        }
      }
    }
    if (i < warmup) continue;
    cellar_ms.push_back(t_cellar);
    raw_ms.push_back(t_raw);
    cellar_hits += got_cellar;
    if (got_cellar != got_raw) ++mismatches;
  }
  if (StopRequested()) return 130;
  out->q_p50 = Percentile(cellar_ms, 50);
  out->q_p99 = Percentile(cellar_ms, 99);
  out->raw_p50 = Percentile(raw_ms, 50);
  out->raw_p99 = Percentile(raw_ms, 99);
  out->ratio = out->raw_p50 / out->q_p50;
  out->mean_hits = cellar_ms.empty() ? 0 : static_cast<double>(cellar_hits) / cellar_ms.size();
  out->server_memory = server_memory;
  out->load_seconds = load.seconds;
  out->load_rows = load.rows;
  out->load_client_cpu = load_client_cpu;
  out->load_server_before = load_server_before;
  out->load_server_after = load_server_after;
  out->warmup = warmup;
  out->timed = cellar_ms.size();
  out->mismatches = mismatches;
  out->query_errors = query_errors;
  return 0;
}

}  // namespace cellar::bench::index_phases
