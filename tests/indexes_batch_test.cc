// IndexWriter::ApplyBatch against a two-host cluster (no worker: the test
// hands the batches over itself): each row's versions apply in order within
// one batch, an entry that moves between hosts leaves no copy, a replayed
// batch changes nothing, positions are recorded and never lowered, and a batch
// spanning two hosts is refused with nothing written.
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "cells/shard_map.h"
#include "gtest/gtest.h"
#include "indexes/index_positions.h"
#include "indexes/index_writer.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

// A driver whose entries live on host `host` (the shard of a UUID field is
// ShardForRow of it).
Uuid DriverOnHost(const ClusterConfig& cfg, size_t host) {
  while (true) {
    Uuid d = Uuid::Random();
    if (cfg.HostIndexForShard(ShardForRow(d, cfg.shards)) == host) return d;
  }
}

// A row whose shard lives on host `host`.
Uuid RowOnHost(const ClusterConfig& cfg, size_t host) { return DriverOnHost(cfg, host); }

// Every cell of `rows` from the shard logs, each row's in log order.
std::vector<Cell> CellsOf(CellStore& store, const std::vector<Uuid>& rows) {
  std::set<Uuid> wanted(rows.begin(), rows.end());
  std::set<uint32_t> shards;
  for (const Uuid& r : rows) shards.insert(ShardForRow(r, store.config().shards));
  std::vector<Cell> out;
  for (uint32_t s : shards) {
    auto page = store.ShardLog("trips", s, 0, 1000);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) continue;
    for (Cell& c : page->cells)
      if (wanted.count(c.row_key)) out.push_back(std::move(c));
  }
  return out;
}

std::vector<const Cell*> Pointers(const std::vector<Cell>& cells) {
  std::vector<const Cell*> out;
  for (const Cell& c : cells) out.push_back(&c);
  return out;
}

TEST(IndexBatchTest, ABatchAppliesEachRowsVersionsInOrderAndMovedEntriesLeaveNoCopy) {
  auto c = MakeCluster("idx_batch", /*hosts=*/2);
  ASSERT_TRUE(c);
  const ClusterConfig& cfg = c->config;
  const IndexDefinition def = DriverPartnerDef(cfg);
  const int version = ApplyIndex(*c->store, def).version;
  IndexWriter writer(c->store.get(), nullptr);
  IndexReader reader(c->store.get(), {def});
  const std::vector<IndexVersionRef> versions{{&def, version}};
  auto has = [&](const Uuid& driver, const Uuid& row, int64_t ref_key) {
    for (const auto& h : QueryAll(reader, ByDriver(driver)))
      if (h.row_key == row) return h.ref_key == ref_key;
    return false;
  };

  // A row of host 0 whose driver moves between hosts 0 and 1 four times, and
  // neighbours of host 0.
  const Uuid row = RowOnHost(cfg, 0);
  const Uuid here = DriverOnHost(cfg, 0), there = DriverOnHost(cfg, 1);
  Trip t{here, Uuid::Random(), *ParseRfc3339("2026-03-01T08:00:00Z"), 9.5, "open", Uuid::Random()};
  for (int64_t v = 1; v <= 4; ++v) {
    t.driver = v % 2 ? here : there;
    PutTrip(*c->store, row, v, TripBody(t));
  }
  std::vector<Uuid> rows{row};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 12; ++i) {
    rows.push_back(RowOnHost(cfg, 0));
    PutTrip(*c->store, rows.back(), 1, TripBody(RandomTrip(rng, {here, there}, {t.city})));
  }
  const std::vector<Cell> cells = CellsOf(*c->store, rows);
  ASSERT_EQ(cells.size(), 4u + 12u);
  const Cell& row_v1 = *std::find_if(cells.begin(), cells.end(), [&](const Cell& x) {
    return x.row_key == row && x.ref_key == 1;
  });

  auto first = writer.ApplyBatch("trips", versions, Pointers(cells), /*record_positions=*/true);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<IndexApply> row_outcomes;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].row_key == row)
      row_outcomes.push_back((*first)[i][0].outcome);
    else
      EXPECT_EQ((*first)[i][0].outcome, IndexApply::kUpserted);
  }
  EXPECT_EQ(row_outcomes, std::vector<IndexApply>(4, IndexApply::kUpserted));
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 1) << "a moved entry left a copy";
  EXPECT_TRUE(has(there, row, 4));
  EXPECT_FALSE(has(here, row, 3)) << "the entry of version 3 stayed on host 0";

  // Positions: the highest added_id of each shard in the batch.
  std::map<uint32_t, uint64_t> highest;
  for (const Cell& cell : cells) {
    uint64_t& h = highest[ShardForRow(cell.row_key, cfg.shards)];
    h = std::max(h, cell.added_id);
  }
  for (const auto& [shard, added_id] : highest) {
    auto applied = AppliedIndexPosition(c->store.get(), "trips", shard);
    ASSERT_TRUE(applied.ok()) << applied.status().ToString();
    EXPECT_EQ(*applied, added_id) << "shard " << shard;
  }

  // The same batch again (a replay): everything stale, nothing moves.
  auto again = writer.ApplyBatch("trips", versions, Pointers(cells), true);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (size_t i = 0; i < cells.size(); ++i) EXPECT_EQ((*again)[i][0].outcome, IndexApply::kStale);
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 1);
  EXPECT_TRUE(has(there, row, 4));
  // An older part of the log replayed later does not lower a position.
  std::vector<const Cell*> older{&row_v1};
  ASSERT_TRUE(writer.ApplyBatch("trips", versions, older, true).ok());
  const uint32_t row_shard = ShardForRow(row, cfg.shards);
  EXPECT_EQ(*AppliedIndexPosition(c->store.get(), "trips", row_shard), highest[row_shard]);

  // Versions out of ref_key order in one batch: each applies only if newer.
  const Uuid row2 = RowOnHost(cfg, 0);
  for (int64_t v : {3, 1, 2}) {
    t.driver = v == 3 ? there : here;
    PutTrip(*c->store, row2, v, TripBody(t));
  }
  const std::vector<Cell> cells2 = CellsOf(*c->store, {row2});
  ASSERT_EQ(cells2.size(), 3u);
  auto mixed = writer.ApplyBatch("trips", versions, Pointers(cells2), true);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ((*mixed)[0][0].outcome, IndexApply::kUpserted);
  EXPECT_EQ((*mixed)[1][0].outcome, IndexApply::kStale);
  EXPECT_EQ((*mixed)[2][0].outcome, IndexApply::kStale);
  EXPECT_TRUE(has(there, row2, 3));
  EXPECT_EQ(EntryCount(*c, def.table, version, row2), 1);

  // A tombstone and a new version after it, in one batch with a replay of an
  // old version: the entry ends on host 0 with version 6 only.
  auto erased = c->store->Erase("trips", row, "BASE");
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  t.driver = here;
  PutTrip(*c->store, row, 6, TripBody(t));
  std::vector<Cell> tail;
  for (Cell& cell : CellsOf(*c->store, {row}))
    if (cell.ref_key >= 5) tail.push_back(std::move(cell));
  ASSERT_EQ(tail.size(), 2u);
  tail.insert(tail.begin(), row_v1);  // replayed
  auto ended = writer.ApplyBatch("trips", versions, Pointers(tail), true);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ((*ended)[0][0].outcome, IndexApply::kStale);
  EXPECT_EQ((*ended)[1][0].outcome, IndexApply::kRemoved);
  EXPECT_EQ((*ended)[2][0].outcome, IndexApply::kUpserted);
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 1);
  EXPECT_TRUE(has(here, row, 6));
  EXPECT_FALSE(has(there, row, 4));
  EXPECT_EQ(CheckProblems(*c->store, def), "");

  // Cells of two hosts in one batch (a shard moved since the batch was
  // formed): applied per host, each outcome as alone.
  const Uuid far = RowOnHost(cfg, 1);
  PutTrip(*c->store, far, 1, TripBody(t));
  std::vector<Cell> two = CellsOf(*c->store, {far});
  two.push_back(row_v1);
  auto split = writer.ApplyBatch("trips", versions, Pointers(two), true);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ((*split)[0][0].outcome, IndexApply::kUpserted);
  EXPECT_EQ((*split)[1][0].outcome, IndexApply::kStale);
  EXPECT_EQ(EntryCount(*c, def.table, version, far), 1);
  EXPECT_EQ(CheckProblems(*c->store, def), "");
}

// Rows the index has never seen (most of a trip log): step 1 creates each
// pointer in its end state, so applying them updates no row at all (it once
// inserted every pointer at -1 and updated it again). Pointers the index has
// seen are marked while locked and written back: a replay leaves every
// pointer as it was and reports every cell stale.
TEST(IndexBatchTest, FreshRowsWriteTheirPointersOnceAndAReplayLeavesThemAsTheyWere) {
  auto c = MakeCluster("idx_batch_fresh", /*hosts=*/2);
  ASSERT_TRUE(c);
  const ClusterConfig& cfg = c->config;
  const IndexDefinition def = DriverPartnerDef(cfg);
  const int version = ApplyIndex(*c->store, def).version;
  IndexWriter writer(c->store.get(), nullptr);
  const std::vector<IndexVersionRef> versions{{&def, version}};
  const std::string pointers =
      QualifiedTable(cfg.HostDatabase(cfg.mysql.hosts[0]), PointerTableName(def.table, version));
  auto rows_updated = [] { return Db().GlobalStatus("Handler_update"); };
  auto pointer_rows = [&] {
    std::string out;
    EXPECT_TRUE(Db().Execute("SELECT HEX(row_key), ref_key, IFNULL(target_shard, -1) FROM " +
                                 pointers + " ORDER BY row_key",
                             &out));
    return out;
  };

  // 30 fresh rows of host 0 with drivers on both hosts; one of them with
  // versions 2, 3, 1 in one batch (its end state: version 3, the rest stale).
  std::mt19937_64 rng(5);
  const std::vector<Uuid> drivers{DriverOnHost(cfg, 0), DriverOnHost(cfg, 1)};
  const std::vector<Uuid> cities{Uuid::Random()};
  std::vector<Uuid> rows;
  for (int i = 0; i < 30; ++i) {
    rows.push_back(RowOnHost(cfg, 0));
    PutTrip(*c->store, rows.back(), 1, TripBody(RandomTrip(rng, drivers, cities)));
  }
  const Uuid multi = RowOnHost(cfg, 0);
  for (int64_t v : {2, 3, 1})
    PutTrip(*c->store, multi, v, TripBody(RandomTrip(rng, drivers, cities)));
  rows.push_back(multi);
  const std::vector<Cell> cells = CellsOf(*c->store, rows);
  ASSERT_EQ(cells.size(), 33u);

  const long long updated_before = rows_updated();
  auto first = writer.ApplyBatch("trips", versions, Pointers(cells), /*record_positions=*/false);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(rows_updated() - updated_before, 0)
      << "applying rows the index never saw updated rows (a pointer written twice?)";
  for (size_t i = 0; i < cells.size(); ++i) {
    const bool stale = cells[i].row_key == multi && cells[i].ref_key == 1;
    EXPECT_EQ((*first)[i][0].outcome, stale ? IndexApply::kStale : IndexApply::kUpserted)
        << "cell " << i << " ref_key " << cells[i].ref_key;
  }
  const std::string stored = pointer_rows();
  std::string out;
  ASSERT_TRUE(Db().Execute(
      "SELECT COUNT(*), SUM(ref_key = 3), SUM(target_shard IS NULL) FROM " + pointers, &out));
  EXPECT_EQ(out, "31\t1\t0\n") << "pointers: (count, at version 3, without a target)";
  EXPECT_EQ(CheckProblems(*c->store, def), "");

  // The same batch again: everything stale, every pointer as it was.
  auto again = writer.ApplyBatch("trips", versions, Pointers(cells), false);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (size_t i = 0; i < cells.size(); ++i) EXPECT_EQ((*again)[i][0].outcome, IndexApply::kStale);
  EXPECT_EQ(pointer_rows(), stored);
  // Half seen, half new: the seen ones stale and as they were, the new ones applied.
  std::vector<Cell> mixed(cells.begin(), cells.begin() + 10);
  std::vector<Uuid> more;
  for (int i = 0; i < 10; ++i) {
    more.push_back(RowOnHost(cfg, 0));
    PutTrip(*c->store, more.back(), 1, TripBody(RandomTrip(rng, drivers, cities)));
  }
  for (Cell& cell : CellsOf(*c->store, more)) mixed.push_back(std::move(cell));
  auto half = writer.ApplyBatch("trips", versions, Pointers(mixed), false);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  for (size_t i = 0; i < mixed.size(); ++i)
    EXPECT_EQ((*half)[i][0].outcome, i < 10 ? IndexApply::kStale : IndexApply::kUpserted) << i;
  ASSERT_TRUE(Db().Execute("SELECT COUNT(*), SUM(ref_key < 0) FROM " + pointers, &out));
  EXPECT_EQ(out, "41\t0\n");
  EXPECT_EQ(CheckProblems(*c->store, def), "");

  // A negative ref_key (the store never writes one; step 1 relies on it):
  // refused, nothing written.
  Cell negative = cells[0];
  negative.row_key = RowOnHost(cfg, 0);
  negative.ref_key = -1;
  auto refused = writer.ApplyBatch("trips", versions, {&negative}, false);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  ASSERT_TRUE(Db().Execute("SELECT COUNT(*) FROM " + pointers, &out));
  EXPECT_EQ(out, "41\n");
}

// Two lanes of one host (the worker's shard mod 2 split) apply batches at the
// same time from an empty index on. The pointer lookup once scanned the whole
// (small) pointer table FOR UPDATE, waiting for the other lane's rows, and
// most batches died in deadlocks; no batch may fail now, and every row has
// its entry.
// A batch whose row-host transaction failed after its entries on another host
// committed (step 4 before step 5 of ApplyBatch: a crash, a lost connection)
// leaves that entry with the row's pointer unchanged. The retry holds the
// same first event and maybe more of the row (a batch groups what waits), so
// its end state can lie elsewhere: the entry the failed attempt wrote must go
// too, not only the one the pointer names. (The history check found such a
// leftover hit: "want 170 hits, got 171".)
TEST(IndexBatchTest, ARetriedBatchRemovesTheEntryItsFailedAttemptWroteOnAnotherHost) {
  auto c = MakeCluster("idx_batch_retry", /*hosts=*/2);
  ASSERT_TRUE(c);
  const ClusterConfig& cfg = c->config;
  const IndexDefinition def = DriverPartnerDef(cfg);
  const int version = ApplyIndex(*c->store, def).version;
  IndexWriter writer(c->store.get(), nullptr);
  IndexReader reader(c->store.get(), {def});
  const std::vector<IndexVersionRef> versions{{&def, version}};
  auto hits = [&](const Uuid& driver, const Uuid& row) {
    int n = 0;
    for (const auto& h : QueryAll(reader, ByDriver(driver))) n += h.row_key == row;
    return n;
  };

  // Version 1's entry lives on host 1, version 2's on host 0 (the row's).
  const Uuid row = RowOnHost(cfg, 0);
  const Uuid there = DriverOnHost(cfg, 1), here = DriverOnHost(cfg, 0);
  Trip t{there, Uuid::Random(), *ParseRfc3339("2026-03-01T08:00:00Z"), 9.5, "open", Uuid::Random()};
  PutTrip(*c->store, row, 1, TripBody(t));
  t.driver = here;
  PutTrip(*c->store, row, 2, TripBody(t));
  const std::vector<Cell> cells = CellsOf(*c->store, {row});
  ASSERT_EQ(cells.size(), 2u);

  // The failed attempt of [v1]: its entry on host 1 committed, its pointer
  // (on host 0) did not.
  ASSERT_TRUE(writer.ApplyBatch("trips", versions, {&cells[0]}, true).ok());
  ASSERT_EQ(hits(there, row), 1);
  ASSERT_TRUE(Db().Execute(
      "DELETE FROM " +
      QualifiedTable(cfg.HostDatabase(cfg.mysql.hosts[0]), PointerTableName(def.table, version)) +
      " WHERE row_key = UNHEX(REPLACE('" + row.ToString() + "', '-', ''))"));

  // The retry, now with version 2 as well.
  auto retried = writer.ApplyBatch("trips", versions, Pointers(cells), true);
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ(hits(here, row), 1);
  EXPECT_EQ(hits(there, row), 0) << "the failed attempt's entry on host 1 stayed";
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 1);
}

TEST(IndexBatchTest, TwoLanesOfOneHostApplyConcurrentlyWithoutDeadlocks) {
  auto c = MakeCluster("idx_lanes", /*hosts=*/1);
  ASSERT_TRUE(c);
  const ClusterConfig& cfg = c->config;
  const IndexDefinition def = DriverPartnerDef(cfg);
  const int version = ApplyIndex(*c->store, def).version;
  const std::vector<IndexVersionRef> versions{{&def, version}};
  std::mt19937_64 rng(7);
  const std::vector<Uuid> drivers = RandomUuids(50), cities = RandomUuids(3);
  constexpr int kCells = 2400;
  constexpr size_t kBatch = 200;
  std::vector<Cell> cells(kCells);
  std::vector<std::vector<const Cell*>> lanes(2);
  uint64_t added_id = 1;
  for (Cell& cell : cells) {
    cell.row_key = Uuid::Random();
    cell.column = "BASE";
    cell.ref_key = 1;
    cell.created_at = NowMicros();
    cell.shard = ShardForRow(cell.row_key, cfg.shards);
    cell.added_id = added_id++;
    cell.body = TripBody(RandomTrip(rng, drivers, cities));
    lanes[cell.shard % 2].push_back(&cell);
  }
  IndexWriter writer(c->store.get(), nullptr);
  std::vector<std::string> failures[2];
  {
    std::vector<std::jthread> threads;
    for (size_t lane = 0; lane < 2; ++lane)
      threads.emplace_back([&, lane] {
        const auto& mine = lanes[lane];
        for (size_t start = 0; start < mine.size(); start += kBatch) {
          std::vector<const Cell*> batch(
              mine.begin() + static_cast<std::ptrdiff_t>(start),
              mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), start + kBatch)));
          auto r = writer.ApplyBatch("trips", versions, batch, /*record_positions=*/true);
          if (!r.ok()) failures[lane].push_back(r.status().ToString());
        }
      });
  }
  for (const auto& f : failures)
    EXPECT_TRUE(f.empty()) << f.size() << " batches failed, the first: " << f.front();
  IndexReader reader(c->store.get(), {def});
  size_t entries = 0;
  for (const Uuid& d : drivers) entries += QueryAll(reader, ByDriver(d)).size();
  EXPECT_EQ(entries, static_cast<size_t>(kCells));
}

}  // namespace
}  // namespace cellar::idxtest
