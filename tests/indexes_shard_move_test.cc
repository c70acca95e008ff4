// An index under `cellar shards move` (cells/shard_move.h): the relay and the
// index worker keep running while a shard holding cells, index entries and
// pointers moves to the other host; the worker's writes meet the source's
// freeze until its view names the target, and the index ends equal to the
// brute-force model with nothing of the shard left on the source.
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cells/host_topology.h"
#include "cells/shard_move.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

using std::chrono::seconds;

// Index rows (entries and pointers) of `shard` in host `host`'s database.
uint64_t IndexRowsOnHost(const Cluster& c, size_t host, uint32_t shard) {
  auto conn = ConnectCurrentPrimary(c.config, host);
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  if (!conn.ok()) return 0;
  const std::string db = c.config.HostDatabase(c.config.mysql.hosts[host]);
  auto tables = (*conn)->Query(
      "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?"
      " AND TABLE_NAME LIKE 'idx\\\\_%'",
      {db});
  EXPECT_TRUE(tables.ok()) << tables.status().ToString();
  uint64_t n = 0;
  if (tables.ok())
    for (const auto& t : *tables) {
      auto rows = (*conn)->Query(
          "SELECT COUNT(*) FROM " + QualifiedTable(db, t.Bytes(0)) + " WHERE shard = ?",
          {uint64_t{shard}});
      EXPECT_TRUE(rows.ok()) << rows.status().ToString();
      if (rows.ok()) n += (*rows)[0].Uint(0);
    }
  return n;
}

TEST(IndexesShardMoveTest, IndexStaysRightWhileItsShardMovesUnderLoad) {
  auto c = MakeCluster("idx_move", /*hosts=*/2);
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});
  constexpr uint32_t kMoved = 1;  // on db1 (shards 0-3)
  const std::vector<Uuid> drivers = RandomUuids(16);
  const std::vector<Uuid> cities = RandomUuids(3);

  std::atomic<bool> stop{false};
  std::atomic<int> puts{0}, errors{0};
  std::thread writer([&] {
    std::mt19937_64 rng(49);
    std::vector<std::pair<Uuid, int64_t>> rows;  // row, last ref_key
    while (!stop) {
      CellWrite w;
      w.column = "BASE";
      // Every third put is the next version of an earlier row (its entry may
      // move to another driver's shard).
      if (!rows.empty() && rng() % 3 == 0) {
        auto& [row, ref] = rows[rng() % rows.size()];
        w.row_key = row;
        w.ref_key = ++ref;
      } else {
        w.row_key = Uuid::Random();
        w.ref_key = 1;
        rows.emplace_back(w.row_key, 1);
      }
      w.body = TripBody(RandomTrip(rng, drivers, cities));
      while (!stop) {
        Result<PutResult> r = c->store->Put("trips", w);
        if (r.ok()) break;
        // The moving shard refuses writes for a moment: a caller retries.
        if (r.status().code() == StatusCode::kUnavailable) continue;
        if (errors++ < 5) ADD_FAILURE() << r.status().ToString();
        break;
      }
      ++puts;
    }
  });
  // Stops the writer also when an assertion ends the test early.
  struct Join {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Join() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } join{stop, writer};
  ASSERT_TRUE(WaitFor([&] { return puts >= 600; }, seconds(60)));
  ASSERT_TRUE(WaitFor([&] { return IndexRowsOnHost(*c, 0, kMoved) > 0; }, seconds(60)))
      << "the shard has no index rows to move";
  Result<ShardMoveReport> moved = MoveShard(c->config, kMoved, c->config.mysql.hosts[1].name);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_GT(moved->index_rows_copied, 0u);
  const int at_move = puts;
  ASSERT_TRUE(WaitFor([&] { return puts >= at_move + 600; }, seconds(60)));
  stop = true;
  writer.join();
  EXPECT_EQ(0, errors.load());

  for (const Uuid& d : drivers) EXPECT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(d)), "");
  EXPECT_EQ(CheckProblems(*c->store, def), "");
  EXPECT_EQ(0u, IndexRowsOnHost(*c, 0, kMoved)) << "a stale index write reached the source";
  EXPECT_GT(IndexRowsOnHost(*c, 1, kMoved), 0u);
  std::cout << "[ move ] " << puts.load() << " puts; " << moved->cells_copied << " cells and "
            << moved->index_rows_copied << " index rows copied; writes refused for "
            << moved->frozen_ms << " ms\n";
}

}  // namespace
}  // namespace cellar::idxtest
