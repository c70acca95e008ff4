#include "workers/bench/bench_put_raw.h"

#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <set>
#include <thread>

#include "base/time.h"
#include "base/uuid.h"
#include "cells/body_codec.h"
#include "cells/shard_map.h"
#include "workers/bench/bench_common.h"

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

// One row's six parameters; created_at (0 here) is set when the statement runs.
void AddRowParams(std::vector<SqlParam>& params, const Uuid& row, const std::string& column,
                  std::string encoded_body) {
  params.emplace_back(row.ToBytes());
  params.emplace_back(column);
  params.emplace_back(int64_t{0});
  params.emplace_back(std::move(encoded_body));
  params.emplace_back(int64_t{0});
  params.emplace_back(int64_t{0});
}

std::string InsertPrefix(const ClusterConfig& cfg, uint32_t shard, const std::string& datastore) {
  return "INSERT INTO " + QualifiedTable(cfg.ShardDatabase(shard), "cells_" + datastore) +
         " (row_key, column_name, ref_key, body, tombstone, created_at) VALUES ";
}

}  // namespace

RawWork PlanRawStatements(const ClusterConfig& cfg, const std::vector<uint32_t>& host_of_shard,
                          const std::string& datastore, const std::string& column, int rows,
                          int rows_per_insert, int body_bytes, std::mt19937_64& rng) {
  RawWork by_host(cfg.mysql.hosts.size());
  std::vector<std::vector<std::pair<Uuid, std::string>>> buckets(cfg.shards);
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
    st.sql = InsertPrefix(cfg, shard, datastore);
    st.params.reserve(bucket.size() * 6);
    for (size_t i = 0; i < bucket.size(); ++i) {
      st.sql += i ? ",(?,?,?,?,?,?)" : "(?,?,?,?,?,?)";
      AddRowParams(st.params, bucket[i].first, column, std::move(bucket[i].second));
    }
    emitted += static_cast<int>(bucket.size());
    bucket.clear();
    by_host[host_of_shard[shard]].push_back(RawTransaction{{std::move(st)}});
  }
  return by_host;
}

RawWork PlanShardRowTransactions(const ClusterConfig& cfg,
                                 const std::vector<uint32_t>& host_of_shard,
                                 const std::string& datastore, const std::string& column, int rows,
                                 int rows_per_transaction, int body_bytes, std::mt19937_64& rng) {
  RawWork by_host(cfg.mysql.hosts.size());
  std::vector<RawTransaction> open(cfg.mysql.hosts.size());
  std::vector<std::set<uint32_t>> open_shards(cfg.mysql.hosts.size());
  std::vector<size_t> shards_on_host(cfg.mysql.hosts.size(), 0);
  for (uint32_t host : host_of_shard) ++shards_on_host[host];
  for (int emitted = 0; emitted < rows && !StopRequested();) {
    const Uuid row = Uuid::Random();
    const uint32_t shard = ShardForRow(row, cfg.shards);
    const uint32_t host = host_of_shard[shard];
    if (!open_shards[host].insert(shard).second) continue;  // one row per shard and transaction
    RawStatement st;
    st.shard = shard;
    st.sql = InsertPrefix(cfg, shard, datastore) + "(?,?,?,?,?,?)";
    AddRowParams(st.params, row, column, EncodeBody(MakeTripBody(rng, body_bytes)));
    open[host].statements.push_back(std::move(st));
    ++emitted;
    const bool full = static_cast<int>(open[host].statements.size()) >= rows_per_transaction ||
                      open_shards[host].size() >= shards_on_host[host];
    if (full || emitted == rows) {
      by_host[host].push_back(std::move(open[host]));
      open[host] = RawTransaction{};
      open_shards[host].clear();
    }
  }
  for (size_t h = 0; h < open.size(); ++h)
    if (!open[h].statements.empty()) by_host[h].push_back(std::move(open[h]));
  return by_host;
}

PhaseResult RunRawPhase(const ClusterConfig& cfg, RawWork& work, int connections_per_host) {
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
    if (work[h].empty()) continue;
    for (int i = 0; i < connections_per_host; ++i) {
      auto conn = MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts[h]));
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
      MysqlConnection& conn = *wp->conn;
      start.arrive_and_wait();
      while (!StopRequested()) {
        const size_t i = next[wp->host].fetch_add(1);
        if (i >= transactions.size()) break;
        RawTransaction& tx = transactions[i];
        const bool explicit_tx = tx.statements.size() > 1;
        Status st = explicit_tx ? conn.Begin() : Status::Ok();
        uint64_t written = 0;
        const int64_t now = NowMicros();
        for (RawStatement& statement : tx.statements) {
          if (!st.ok()) break;
          for (size_t p = 5; p < statement.params.size(); p += 6) statement.params[p] = now;
          auto r = conn.Execute(statement.sql, statement.params);
          if (r.ok())
            written += *r;
          else
            st = r.status();
        }
        if (st.ok() && explicit_tx) st = conn.Commit();
        if (!st.ok()) {
          if (explicit_tx) conn.Rollback();
          record_error(st);
          continue;
        }
        rows.fetch_add(written);
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

}  // namespace cellar::bench
