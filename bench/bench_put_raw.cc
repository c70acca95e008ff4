#include "bench/bench_put_raw.h"

#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <thread>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_common.h"
#include "cells/body_codec.h"
#include "cells/internal/write_fence.h"
#include "cells/shard_map.h"

namespace cellar::bench {
namespace {

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

}  // namespace

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

// ---- Raw phases ---------------------------------------------------------------

namespace {

struct RawRow {
  uint32_t shard = 0;
  Uuid row_key;
  std::string encoded_body;
};

// One row's seven parameters; created_at (0 here) is set when the statement runs.
void AddRowParams(std::vector<SqlParam>& params, const RawRow& row, const std::string& column) {
  params.emplace_back(uint64_t{row.shard});
  params.emplace_back(row.row_key.ToBytes());
  params.emplace_back(column);
  params.emplace_back(int64_t{0});
  params.emplace_back(row.encoded_body);
  params.emplace_back(int64_t{0});
  params.emplace_back(int64_t{0});
}

// A multi-row INSERT of `rows` into the cells table of host `host`.
RawStatement HostInsert(const ClusterConfig& cfg, size_t host, const std::string& datastore,
                        const std::string& column, const std::vector<RawRow>& rows, bool returning,
                        const std::string& fused_fence_database = "") {
  RawStatement st;
  st.sql = "INSERT INTO " +
           QualifiedTable(cfg.HostDatabase(cfg.mysql.hosts[host]), "cells_" + datastore) +
           " (shard, row_key, column_name, ref_key, body, tombstone, created_at) VALUES ";
  st.params.reserve(rows.size() * kRawParamsPerRow);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 0 && !fused_fence_database.empty())
      // The fence lock inside the INSERT, as the group commit sends it.
      st.sql += "(?,?,?,?,?,?," + internal::FencedCreatedAt(fused_fence_database) + ")";
    else
      st.sql += i ? ",(?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?)";
    AddRowParams(st.params, rows[i], column);
  }
  if (returning) st.sql += " RETURNING row_key, column_name, ref_key, added_id";
  st.returning = returning;
  return st;
}

std::string FenceTable(const ClusterConfig& cfg, size_t host) {
  return QualifiedTable(cfg.HostDatabase(cfg.mysql.hosts[host]), "write_fence");
}

// `rows` random rows grouped per host into groups of `group_rows` (the last
// group of a host may be shorter); emit(host, rows) gets each group.
template <typename Emit>
void PlanHostGroups(const ClusterConfig& cfg, int rows, int group_rows, int body_bytes,
                    std::mt19937_64& rng, Emit emit) {
  std::vector<std::vector<RawRow>> buckets(cfg.mysql.hosts.size());
  for (int emitted = 0; emitted < rows && !StopRequested(); ++emitted) {
    RawRow r;
    r.row_key = Uuid::Random();
    r.shard = ShardForRow(r.row_key, cfg.shards);
    r.encoded_body = EncodeBody(MakeTripBody(rng, body_bytes));
    const size_t host = cfg.HostIndexForShard(r.shard);
    buckets[host].push_back(std::move(r));
    if (static_cast<int>(buckets[host].size()) >= group_rows) {
      emit(host, buckets[host]);
      buckets[host].clear();
    }
  }
  for (size_t h = 0; h < buckets.size(); ++h)
    if (!buckets[h].empty()) emit(h, buckets[h]);
}

}  // namespace

namespace {

// `rows` rows in groups of `rows_per_transaction` per host, one transaction
// per group made by make(host, group).
template <typename Make>
RawWork PlanTransactions(const ClusterConfig& cfg, int rows, int rows_per_transaction,
                         int body_bytes, std::mt19937_64& rng, Make make) {
  RawWork by_host(cfg.mysql.hosts.size());
  PlanHostGroups(cfg, rows, rows_per_transaction, body_bytes, rng,
                 [&](size_t host, const std::vector<RawRow>& group) {
                   by_host[host].push_back(make(host, group));
                 });
  return by_host;
}

}  // namespace

RawWork PlanRawStatements(const ClusterConfig& cfg, const std::string& datastore,
                          const std::string& column, int rows, int rows_per_insert, int body_bytes,
                          std::mt19937_64& rng) {
  return PlanTransactions(
      cfg, rows, rows_per_insert, body_bytes, rng,
      [&](size_t host, const std::vector<RawRow>& group) {
        RawTransaction tx;
        tx.statements.push_back(HostInsert(cfg, host, datastore, column, group, false));
        return tx;
      });
}

RawWork PlanFencedTransactions(const ClusterConfig& cfg, const std::string& datastore,
                               const std::string& column, int rows, int rows_per_transaction,
                               int body_bytes, std::mt19937_64& rng) {
  return PlanTransactions(
      cfg, rows, rows_per_transaction, body_bytes, rng,
      [&](size_t host, const std::vector<RawRow>& group) {
        RawTransaction tx;
        tx.fence_sql = "SELECT conn_id FROM " + FenceTable(cfg, host) +
                       " WHERE conn_id = CONNECTION_ID() FOR UPDATE";
        tx.statements.push_back(HostInsert(cfg, host, datastore, column, group, true));
        return tx;
      });
}

RawWork PlanFusedFenceStatements(const ClusterConfig& cfg, const std::string& datastore,
                                 const std::string& column, int rows, int rows_per_transaction,
                                 int body_bytes, std::mt19937_64& rng) {
  return PlanTransactions(
      cfg, rows, rows_per_transaction, body_bytes, rng,
      [&](size_t host, const std::vector<RawRow>& group) {
        RawTransaction tx;
        tx.statements.push_back(HostInsert(cfg, host, datastore, column, group, true,
                                           cfg.HostDatabase(cfg.mysql.hosts[host])));
        return tx;
      });
}

Result<std::unique_ptr<MysqlConnection>> ConnectRawConnection(const ClusterConfig& cfg, size_t host,
                                                              const RawPhaseOptions& options) {
  CELLAR_ASSIGN_OR_RETURN(auto conn,
                          MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts[host])));
  if (!options.register_writers) return conn;
  CELLAR_RETURN_IF_ERROR(conn->Execute("INSERT IGNORE INTO " + FenceTable(cfg, host) +
                                       " (conn_id) VALUES (CONNECTION_ID())")
                             .status());
  if (!options.keep_autocommit) CELLAR_RETURN_IF_ERROR(conn->UseImplicitTransactions());
  return conn;
}

void UnregisterRawWriter(const ClusterConfig& cfg, size_t host, MysqlConnection& conn) {
  // Best effort: leave no fence row of a closed connection behind.
  if (conn.broken()) return;
  if (conn.Execute("DELETE FROM " + FenceTable(cfg, host) + " WHERE conn_id = CONNECTION_ID()")
          .ok())
    conn.Commit().IgnoreError();
}

namespace {

// One transaction of `tx` on `conn`; the rows written, or the first error (rolled back).
Result<uint64_t> RunRawTransaction(MysqlConnection& conn, RawTransaction& tx) {
  const bool explicit_tx = tx.statements.size() > 1 || !tx.fence_sql.empty();
  Status st = explicit_tx ? conn.Begin() : Status::Ok();
  if (st.ok() && !tx.fence_sql.empty()) {
    auto fence = conn.Query(tx.fence_sql);
    if (!fence.ok())
      st = fence.status();
    else if (fence->size() != 1)
      st = FailedPrecondition("this connection's write_fence row is missing");
  }
  uint64_t written = 0;
  const int64_t now = NowMicros();
  for (RawStatement& statement : tx.statements) {
    if (!st.ok()) break;
    if (statement.cell_rows)
      for (size_t p = kRawCreatedAtParam; p < statement.params.size(); p += kRawParamsPerRow)
        statement.params[p] = now;
    uint64_t rows = 0;
    if (statement.returning) {
      auto r = conn.Query(statement.sql, statement.params);
      if (r.ok())
        rows = r->size();
      else
        st = r.status();
    } else {
      auto r = conn.Execute(statement.sql, statement.params);
      if (r.ok())
        rows = *r;
      else
        st = r.status();
    }
    if (statement.cell_rows) written += rows;
  }
  if (st.ok() && explicit_tx) st = conn.Commit();
  if (!st.ok()) {
    if (explicit_tx) conn.Rollback();
    return st;
  }
  return written;
}

}  // namespace

PhaseResult RunRawPhase(const ClusterConfig& cfg, RawWork& work, const RawPhaseOptions& options) {
  PhaseResult result;
  std::mutex mu;
  auto record_error = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (result.errors++ == 0) result.first_error = s.ToString();
  };
  // Connect (and register) everything before the clock starts.
  struct Worker {
    size_t host;
    std::unique_ptr<MysqlConnection> conn;
  };
  std::vector<Worker> workers;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    if (work[h].empty()) continue;
    for (int i = 0; i < options.connections_per_host; ++i) {
      auto conn = ConnectRawConnection(cfg, h, options);
      if (!conn.ok()) {
        record_error(conn.status());
        return result;
      }
      workers.push_back({h, std::move(conn).value()});
    }
  }
  std::vector<std::atomic<size_t>> next(work.size());
  for (auto& n : next) n.store(0);
  std::atomic<uint64_t> rows{0};
  std::latch start(static_cast<std::ptrdiff_t>(workers.size()) + 1);
  std::vector<std::thread> threads;
  for (auto& w : workers) {
    threads.emplace_back([&, wp = &w] {
      auto& transactions = work[wp->host];
      start.arrive_and_wait();
      while (!StopRequested()) {
        const size_t i = next[wp->host].fetch_add(1);
        if (i >= transactions.size()) break;
        auto written = RunRawTransaction(*wp->conn, transactions[i]);
        if (written.ok())
          rows.fetch_add(*written);
        else
          record_error(written.status());
      }
    });
  }
  start.arrive_and_wait();
  Stopwatch clock;
  for (auto& t : threads) t.join();
  result.seconds = clock.Seconds();
  result.rows = rows.load();
  result.interrupted = StopRequested();
  if (options.register_writers)
    for (auto& w : workers) UnregisterRawWriter(cfg, w.host, *w.conn);
  return result;
}

}  // namespace cellar::bench
