// CellStore against a real MariaDB: the contract of each operation (concurrent
// callers: cells_store_concurrency_test). One private server is shared by
// every test of this binary (tests/cells_store_fixture.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/private_mariadb.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"
#include "testing/test_cluster.h"
#include "tests/cells_store_fixture.h"

namespace cellar {

testing::StoreEnvironment* const store_env =
    static_cast<testing::StoreEnvironment*>(::testing::AddGlobalTestEnvironment(
        new testing::StoreEnvironment({"store"}, kStoreTestShards)));

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kShards = kStoreTestShards;

TEST_F(StoreTest, InitIsIdempotentAndCreatesOneDatabasePerHost) {
  const Uuid row = Uuid::Random();
  const PutResult put = MustPut("trips", W(row, "BASE", 0, {{"v", 1}}));
  Status again = store_->Init();
  ASSERT_TRUE(again.ok()) << again.ToString();
  Result<Cell> got = store_->Get("trips", row, "BASE", 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(put.added_id, got->added_id);
  // Every server holds exactly its host's database with the two cells tables,
  // the write fence, the topology and the semi-sync heartbeat
  // (cells/host_topology.h), and no per-shard databases.
  for (size_t h = 0; h < store_env->dbs.size(); ++h) {
    std::string out;
    ASSERT_TRUE(store_env->dbs[h]->Execute(
        "SELECT GROUP_CONCAT(CONCAT(table_schema, '.', table_name) ORDER BY table_name)"
        " FROM information_schema.tables WHERE table_schema LIKE 'cellar\\_%'",
        &out));
    const std::string db = store_env->config.HostDatabase(store_env->config.mysql.hosts[h]);
    EXPECT_EQ(db + ".cells_trips," + db + ".cells_users," + db + ".semi_sync_heartbeat," + db +
                  ".topology," + db + ".write_fence\n",
              out);
  }
}

TEST_F(StoreTest, PutIsIdempotentAndConflictNamesTheAddress) {
  const Uuid row = Uuid::Random();
  const json body = {{"fare", 12.5}, {"city", "Zürich"}, {"stops", {1, 2, 3}}};
  Result<PutResult> first = store_->Put("trips", W(row, "BASE", 7, body));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(ShardForRow(row, kShards), first->shard);
  EXPECT_EQ(7, first->ref_key);
  EXPECT_GT(first->added_id, 0u);
  EXPECT_LE(std::llabs(NowMicros() - first->created_at), 60 * 1000000LL);

  // The same cell again (keys in another order) is a successful retry.
  json same = json::object();
  same["stops"] = {1, 2, 3};
  same["city"] = "Zürich";
  same["fare"] = 12.5;
  Result<PutResult> retry = store_->Put("trips", W(row, "BASE", 7, same));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_FALSE(retry->created);
  EXPECT_EQ(first->added_id, retry->added_id);
  EXPECT_EQ(first->created_at, retry->created_at);
  EXPECT_EQ(first->shard, retry->shard);

  // A different body at the same address is a Conflict naming the address.
  for (const json& other :
       {json{{"fare", 12}, {"city", "Zürich"}, {"stops", {1, 2, 3}}},
        json{{"fare", 12.5}, {"city", "Zürich"}, {"stops", {1, 2}}}, json::object()}) {
    Result<PutResult> conflict = store_->Put("trips", W(row, "BASE", 7, other));
    ASSERT_FALSE(conflict.ok()) << other.dump();
    EXPECT_EQ(StatusCode::kConflict, conflict.status().code()) << conflict.status().ToString();
    EXPECT_THAT(conflict.status().message(), HasSubstr(CellAddress("trips", row, "BASE", 7)));
  }

  // Nothing but the first version is stored.
  Result<Cell> got = store_->Get("trips", row, "BASE", 7);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(body, got->body);
  EXPECT_FALSE(got->tombstone);
  EXPECT_EQ(first->added_id, got->added_id);
  EXPECT_EQ(first->created_at, got->created_at);
  EXPECT_EQ(row, got->row_key);
  EXPECT_EQ("BASE", got->column);
  EXPECT_EQ(7, got->ref_key);
  EXPECT_EQ(1u, RowInLog("trips", row, first->added_id - 1).size());

  // The same address in another column, ref_key or datastore is a different cell.
  EXPECT_TRUE(MustPut("trips", W(row, "STATUS", 7, {{"x", 1}})).created);
  EXPECT_TRUE(MustPut("trips", W(row, "BASE", 8, {{"x", 1}})).created);
  EXPECT_TRUE(MustPut("users", W(row, "PROFILE", 7, body)).created);
  Result<Cell> missing = store_->Get("trips", row, "BASE", 6);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(StatusCode::kNotFound, missing.status().code());
  EXPECT_THAT(missing.status().message(), HasSubstr(CellAddress("trips", row, "BASE", 6)));
}

TEST_F(StoreTest, PutBatchRowsAreAtomicAndIndependent) {
  const uint32_t shard = 3;
  const Uuid a = RowOnShard(shard);  // gets a conflicting cell
  const Uuid b = RowOnShard(shard);  // same shard, so in the same transaction as a
  const Uuid c = RowOnShard(shard + 1);
  const json original = {{"v", "original"}};
  const PutResult pre = MustPut("trips", W(a, "BASE", 1, original));
  const std::vector<uint64_t> before = Heads("trips");

  const std::vector<CellWrite> batch = {
      W(a, "STATUS", 1, {{"s", "a-status"}}),  // 0: row-mate of the conflict
      W(b, "BASE", 1, {{"b", 1}}),             // 1
      W(a, "BASE", 1, {{"v", "changed"}}),     // 2: conflict
      W(c, "BASE", 1, {{"c", 1}}),             // 3
      W(b, "STATUS", 2, {{"b", 2}}),           // 4
      W(a, "BASE", 2, {{"v", "newer"}}),       // 5: row-mate of the conflict
  };
  std::vector<Result<PutResult>> results = store_->PutBatch("trips", batch);
  ASSERT_EQ(batch.size(), results.size());
  ASSERT_FALSE(results[2].ok());
  EXPECT_EQ(StatusCode::kConflict, results[2].status().code()) << results[2].status().ToString();
  EXPECT_THAT(results[2].status().message(), HasSubstr(CellAddress("trips", a, "BASE", 1)));
  for (int i : {0, 5}) {
    ASSERT_FALSE(results[i].ok()) << i;
    EXPECT_EQ(StatusCode::kAborted, results[i].status().code()) << results[i].status().ToString();
    EXPECT_THAT(results[i].status().message(), HasSubstr(a.ToString()));
  }
  for (int i : {1, 3, 4}) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_TRUE(results[i]->created);
    EXPECT_EQ(batch[i].ref_key, results[i]->ref_key);
    EXPECT_EQ(ShardForRow(batch[i].row_key, kShards), results[i]->shard);
  }
  // Row b's cells committed together: one transaction, one created_at.
  EXPECT_EQ(results[1]->created_at, results[4]->created_at);

  // Row a is unchanged.
  std::vector<Cell> a_cells = RowInLog("trips", a, pre.added_id - 1);
  ASSERT_EQ(1u, a_cells.size());
  EXPECT_EQ(original, a_cells[0].body);
  EXPECT_EQ(StatusCode::kNotFound, store_->Get("trips", a, "STATUS", 1).status().code());
  EXPECT_EQ(StatusCode::kNotFound, store_->Get("trips", a, "BASE", 2).status().code());
  Result<Cell> latest_a = store_->Latest("trips", a, "BASE");
  ASSERT_TRUE(latest_a.ok());
  EXPECT_EQ(original, latest_a->body);
  // Rows b and c are written, each cell readable at the reported added_id.
  for (int i : {1, 3, 4}) {
    Result<Cell> got = store_->Get("trips", batch[i].row_key, batch[i].column, batch[i].ref_key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(batch[i].body, got->body);
    EXPECT_EQ(results[i]->added_id, got->added_id);
  }
  // Exactly three new cells in the log: two on `shard`, one on the next.
  const std::vector<uint64_t> after = Heads("trips");
  size_t new_cells = 0;
  for (uint32_t s = 0; s < kShards; ++s) new_cells += WalkLog("trips", s, before[s], 10).size();
  EXPECT_EQ(3u, new_cells);

  // Retrying the whole batch: the written rows are idempotent, row a conflicts again.
  std::vector<Result<PutResult>> again = store_->PutBatch("trips", batch);
  EXPECT_EQ(StatusCode::kConflict, again[2].status().code());
  for (int i : {1, 3, 4}) {
    ASSERT_TRUE(again[i].ok()) << again[i].status().ToString();
    EXPECT_FALSE(again[i]->created);
    EXPECT_EQ(results[i]->added_id, again[i]->added_id);
  }
  EXPECT_EQ(after, Heads("trips"));
}

// A writer connection prepares each distinct INSERT text it runs, and the
// server keeps each one (about 3.6 KB per row of placeholders: one text per
// batch size up to 256 held 120 MB per connection). Batches of every size are
// written in statements of a few fixed sizes, still all or nothing per row.
TEST_F(StoreTest, PutBatchOfEverySizeUsesFewStatementTextsAndStaysAtomic) {
  auto prepared = [] { return store_env->dbs[0]->GlobalStatus("Prepared_stmt_count"); };
  const long before = prepared();
  ASSERT_GE(before, 0);
  const std::vector<uint64_t> heads = Heads("trips");
  constexpr int kLargest = 200;
  std::vector<std::pair<Uuid, std::vector<PutResult>>> written;
  for (int n = 1; n <= kLargest; ++n) {
    const Uuid row = Uuid::Random();
    std::vector<CellWrite> batch;
    for (int ref = 1; ref <= n; ++ref)
      batch.push_back(W(row, "BASE", ref, {{"n", n}, {"ref", ref}}));
    std::vector<Result<PutResult>> r = store_->PutBatch("trips", batch);
    ASSERT_EQ(batch.size(), r.size());
    std::vector<PutResult> ok;
    for (auto& x : r) {
      ASSERT_TRUE(x.ok()) << n << ": " << x.status().ToString();
      ok.push_back(*x);
    }
    written.emplace_back(row, std::move(ok));
  }
  // 200 sizes; two writer connections; a few statements of the reads below.
  const long texts = prepared() - before;
  EXPECT_LT(texts, 100) << "prepared statements added by batches of 1.." << kLargest << " cells";

  std::map<std::string, std::vector<Cell>> logged;  // row -> its new cells in log order
  for (uint32_t s = 0; s < kShards; ++s)
    for (Cell& c : WalkLog("trips", s, heads[s], 1000)) logged[c.row_key.ToString()].push_back(c);
  for (const auto& [row, results] : written) {
    const std::vector<Cell>& log = logged[row.ToString()];
    ASSERT_EQ(results.size(), log.size()) << row.ToString();
    std::set<uint64_t> ids;
    for (size_t i = 0; i < results.size(); ++i) {
      EXPECT_TRUE(results[i].created);
      EXPECT_EQ(static_cast<int64_t>(i + 1), results[i].ref_key);
      EXPECT_EQ(results[0].created_at, results[i].created_at) << "one transaction per row";
      ids.insert(results[i].added_id);
    }
    EXPECT_EQ(results.size(), ids.size()) << "distinct added_ids";
    for (const Cell& c : log) {
      EXPECT_TRUE(ids.count(c.added_id)) << c.added_id;
      EXPECT_EQ(c.ref_key, c.body.at("ref").get<int64_t>());
      EXPECT_EQ(results[static_cast<size_t>(c.ref_key - 1)].added_id, c.added_id);
    }
  }

  // A conflict in the last cell of a 45-cell row (past the first statement):
  // none of the row is written.
  const Uuid row = Uuid::Random();
  const PutResult pre = MustPut("trips", W(row, "BASE", 45, {{"v", "original"}}));
  std::vector<CellWrite> batch;
  for (int ref = 1; ref <= 45; ++ref) batch.push_back(W(row, "BASE", ref, {{"v", ref}}));
  std::vector<Result<PutResult>> r = store_->PutBatch("trips", batch);
  ASSERT_EQ(45u, r.size());
  EXPECT_EQ(StatusCode::kConflict, r[44].status().code()) << r[44].status().ToString();
  for (int i = 0; i < 44; ++i)
    EXPECT_EQ(StatusCode::kAborted, r[i].status().code()) << i << ": " << r[i].status().ToString();
  std::vector<Cell> log = RowInLog("trips", row, pre.added_id - 1);
  ASSERT_EQ(1u, log.size());
  EXPECT_EQ(pre.added_id, log[0].added_id);
}

TEST_F(StoreTest, PutBatchDuplicatesInsideOneBatch) {
  const Uuid row = Uuid::Random();
  // The same cell twice is written once; both report its added_id.
  std::vector<Result<PutResult>> r =
      store_->PutBatch("trips", {W(row, "BASE", 1, {{"x", 1}}), W(row, "BASE", 1, {{"x", 1}}),
                                 W(row, "STATUS", 1, {{"y", 1}})});
  ASSERT_EQ(3u, r.size());
  for (const auto& x : r) ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(r[0]->added_id, r[1]->added_id);
  EXPECT_NE(r[0]->created, r[1]->created);
  EXPECT_EQ(2u, RowInLog("trips", row, 0).size());

  // The same address with two bodies is rejected and the row is not written.
  const Uuid row2 = Uuid::Random();
  r = store_->PutBatch("trips", {W(row2, "BASE", 1, {{"x", 1}}), W(row2, "STATUS", 1, {{"y", 1}}),
                                 W(row2, "BASE", 1, {{"x", 2}})});
  ASSERT_EQ(3u, r.size());
  EXPECT_EQ(StatusCode::kInvalidArgument, r[2].status().code()) << r[2].status().ToString();
  EXPECT_THAT(r[2].status().message(), HasSubstr(CellAddress("trips", row2, "BASE", 1)));
  EXPECT_EQ(StatusCode::kAborted, r[0].status().code()) << r[0].status().ToString();
  EXPECT_EQ(StatusCode::kAborted, r[1].status().code()) << r[1].status().ToString();
  EXPECT_TRUE(RowInLog("trips", row2, 0).empty());

  // An empty batch is fine and returns nothing.
  EXPECT_TRUE(store_->PutBatch("trips", {}).empty());
}

TEST_F(StoreTest, VersionsWithAsOfRefRangeAndLimit) {
  const Uuid row = Uuid::Random();
  // Written out of ref order: versions are ordered by ref_key, as_of by commit time.
  const std::vector<int64_t> order = {0, 1, 5, 2, 3, 4};
  std::map<int64_t, PutResult> put;
  for (int64_t ref : order) {
    put[ref] = MustPut("trips", W(row, "BASE", ref, {{"ref", ref}}));
    // Distinct commit times, so that as_of can separate them.
    ASSERT_TRUE(WaitFor([&] { return NowMicros() > put[ref].created_at; },
                        std::chrono::milliseconds(1000)));
  }
  MustPut("trips", W(row, "STATUS", 100, {{"other", "column"}}));
  auto versions = [&](VersionQuery q) {
    Result<std::vector<Cell>> r = store_->Versions("trips", row, "BASE", q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const Cell& c : *r) EXPECT_EQ(json({{"ref", c.ref_key}}), c.body);
    }
    return r.ok() ? Refs(*r) : std::vector<int64_t>{-1};
  };
  VersionQuery all;
  EXPECT_EQ((std::vector<int64_t>{5, 4, 3, 2, 1, 0}), versions(all));

  VersionQuery limit;
  limit.limit = 2;
  EXPECT_EQ((std::vector<int64_t>{5, 4}), versions(limit));
  limit.limit = 1;
  EXPECT_EQ((std::vector<int64_t>{5}), versions(limit));

  VersionQuery range;
  range.min_ref = 1;
  range.max_ref = 3;
  EXPECT_EQ((std::vector<int64_t>{3, 2, 1}), versions(range));
  range.limit = 2;
  EXPECT_EQ((std::vector<int64_t>{3, 2}), versions(range));
  VersionQuery below;
  below.max_ref = 0;
  EXPECT_EQ((std::vector<int64_t>{0}), versions(below));
  VersionQuery above;
  above.min_ref = 4;
  EXPECT_EQ((std::vector<int64_t>{5, 4}), versions(above));
  VersionQuery none;
  none.min_ref = 6;
  EXPECT_EQ((std::vector<int64_t>{}), versions(none));

  // as_of: what existed at the commit of ref 5 (written third).
  VersionQuery as_of;
  as_of.as_of = put[5].created_at;
  EXPECT_EQ((std::vector<int64_t>{5, 1, 0}), versions(as_of));
  as_of.as_of = put[5].created_at - 1;
  EXPECT_EQ((std::vector<int64_t>{1, 0}), versions(as_of));
  as_of.as_of = put[2].created_at;
  as_of.limit = 2;
  EXPECT_EQ((std::vector<int64_t>{5, 2}), versions(as_of));
  as_of.max_ref = 4;
  EXPECT_EQ((std::vector<int64_t>{2, 1}), versions(as_of));
  as_of = VersionQuery{};
  as_of.as_of = put[0].created_at - 1;
  EXPECT_EQ((std::vector<int64_t>{}), versions(as_of));

  // since: not older than the commit of ref 5 (written third), alone and
  // with as_of as a window.
  VersionQuery since;
  since.since = put[5].created_at;
  EXPECT_EQ((std::vector<int64_t>{5, 4, 3, 2}), versions(since));
  since.since = put[5].created_at + 1;
  EXPECT_EQ((std::vector<int64_t>{4, 3, 2}), versions(since));
  since.as_of = put[3].created_at;
  EXPECT_EQ((std::vector<int64_t>{3, 2}), versions(since));
  since.as_of = since.since;
  EXPECT_EQ((std::vector<int64_t>{}), versions(since));
  since = VersionQuery{};
  since.since = put[4].created_at + 1;
  EXPECT_EQ((std::vector<int64_t>{}), versions(since));

  // Bad queries.
  VersionQuery bad;
  bad.limit = 0;
  Result<std::vector<Cell>> r = store_->Versions("trips", row, "BASE", bad);
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
  EXPECT_THAT(r.status().message(), HasSubstr("limit"));
  bad.limit = 10001;
  EXPECT_EQ(StatusCode::kInvalidArgument,
            store_->Versions("trips", row, "BASE", bad).status().code());
  bad = VersionQuery{};
  bad.min_ref = 5;
  bad.max_ref = 4;
  r = store_->Versions("trips", row, "BASE", bad);
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
  EXPECT_THAT(r.status().message(), HasSubstr("min_ref 5"));
  bad = VersionQuery{};
  bad.since = put[2].created_at;
  bad.as_of = put[2].created_at - 1;
  r = store_->Versions("trips", row, "BASE", bad);
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
  EXPECT_THAT(r.status().message(), HasSubstr("since"));

  // A row never written has no versions (not an error).
  Result<std::vector<Cell>> empty = store_->Versions("trips", Uuid::Random(), "BASE", all);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(StoreTest, EraseWritesTombstones) {
  const Uuid row = Uuid::Random();
  MustPut("trips", W(row, "BASE", 0, {{"v", 0}}));
  MustPut("trips", W(row, "BASE", 4, {{"v", 4}}));
  MustPut("trips", W(row, "STATUS", 0, {{"s", "live"}}));

  Result<PutResult> erased = store_->Erase("trips", row, "BASE");
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(5, erased->ref_key) << "tombstone goes at latest ref_key + 1";
  EXPECT_TRUE(erased->created);
  EXPECT_EQ(ShardForRow(row, kShards), erased->shard);

  Result<Cell> latest = store_->Latest("trips", row, "BASE");
  ASSERT_FALSE(latest.ok());
  EXPECT_EQ(StatusCode::kNotFound, latest.status().code());
  EXPECT_THAT(latest.status().message(), HasSubstr(row.ToString()));
  EXPECT_THAT(latest.status().message(), HasSubstr("erased"));

  Result<std::vector<Cell>> versions = store_->Versions("trips", row, "BASE", VersionQuery{});
  ASSERT_TRUE(versions.ok());
  ASSERT_EQ((std::vector<int64_t>{5, 4, 0}), Refs(*versions));
  EXPECT_TRUE((*versions)[0].tombstone);
  EXPECT_TRUE((*versions)[0].body.is_null());
  EXPECT_EQ(erased->added_id, (*versions)[0].added_id);
  EXPECT_FALSE((*versions)[1].tombstone);
  EXPECT_EQ(json({{"v", 4}}), (*versions)[1].body);
  // Older versions stay readable by address.
  Result<Cell> old = store_->Get("trips", row, "BASE", 4);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(json({{"v", 4}}), old->body);
  Result<Cell> tomb = store_->Get("trips", row, "BASE", 5);
  ASSERT_TRUE(tomb.ok());
  EXPECT_TRUE(tomb->tombstone);

  // The erased column is gone from row(); the other column is untouched.
  Result<std::vector<Cell>> r = store_->Row("trips", row);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(1u, r->size());
  EXPECT_EQ("STATUS", (*r)[0].column);

  // A body cannot be written at the tombstone's address.
  Result<PutResult> over = store_->Put("trips", W(row, "BASE", 5, {{"v", 5}}));
  EXPECT_EQ(StatusCode::kConflict, over.status().code()) << over.status().ToString();

  // Writing a higher ref_key makes the column visible again.
  MustPut("trips", W(row, "BASE", 6, {{"v", 6}}));
  latest = store_->Latest("trips", row, "BASE");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(6, latest->ref_key);
  EXPECT_EQ(json({{"v", 6}}), latest->body);

  // Erasing a column never written puts a tombstone at ref_key 0.
  Result<PutResult> fresh = store_->Erase("trips", row, "EPHEMERAL");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(0, fresh->ref_key);
  const Uuid never = Uuid::Random();
  fresh = store_->Erase("users", never, "PROFILE");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(0, fresh->ref_key);
  EXPECT_EQ(StatusCode::kNotFound, store_->Latest("users", never, "PROFILE").status().code());
  versions = store_->Versions("users", never, "PROFILE", VersionQuery{});
  ASSERT_TRUE(versions.ok());
  ASSERT_EQ(1u, versions->size());
  EXPECT_TRUE((*versions)[0].tombstone);
  // Erasing again writes nothing: the latest version already is a tombstone
  // (more in cells_erase_test).
  Result<PutResult> twice = store_->Erase("users", never, "PROFILE");
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(0, twice->ref_key);
  EXPECT_FALSE(twice->created);

  // The log shows the tombstones in order.
  std::vector<Cell> log = RowInLog("trips", row, 0);
  ASSERT_EQ(6u, log.size());
  EXPECT_EQ(5, log[3].ref_key);
  EXPECT_TRUE(log[3].tombstone);
  EXPECT_EQ("EPHEMERAL", log[5].column);
  EXPECT_TRUE(log[5].tombstone);
}

TEST_F(StoreTest, TtlColumnExpiresAndPurgeDeletesIt) {
  const DatastoreConfig* trips = store_env->config.FindDatastore("trips");
  ASSERT_NE(nullptr, trips);
  ASSERT_EQ(2000, trips->FindColumn("EPHEMERAL")->ttl_ms);
  const Uuid row = Uuid::Random();
  const std::vector<uint64_t> heads = Heads("trips");
  const PutResult e0 = MustPut("trips", W(row, "EPHEMERAL", 0, {{"e", 0}}));
  const PutResult e1 = MustPut("trips", W(row, "EPHEMERAL", 1, {{"e", 1}}));
  MustPut("trips", W(row, "BASE", 0, {{"b", 0}}));

  // Visible while young.
  Result<Cell> young = store_->Latest("trips", row, "EPHEMERAL");
  ASSERT_TRUE(young.ok()) << young.status().ToString();
  EXPECT_EQ(1, young->ref_key);
  EXPECT_LT(NowMicros() - e1.created_at, 2000000) << "the test was too slow to see it young";

  // Invisible once older than the TTL: wait for it, with a deadline.
  const auto start = Clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        return store_->Latest("trips", row, "EPHEMERAL").status().code() == StatusCode::kNotFound;
      },
      std::chrono::milliseconds(10000)))
      << "EPHEMERAL cell still visible after 10 s";
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  std::printf("[ttl] expired after %lld ms of waiting (%lld ms after commit)\n",
              static_cast<long long>(waited.count()),
              static_cast<long long>((NowMicros() - e1.created_at) / 1000));
  EXPECT_GE(NowMicros() - e1.created_at, 2000000 - 1000) << "expired before its TTL";
  EXPECT_EQ(StatusCode::kNotFound, store_->Get("trips", row, "EPHEMERAL", 0).status().code());
  EXPECT_EQ(StatusCode::kNotFound, store_->Get("trips", row, "EPHEMERAL", 1).status().code());
  Result<std::vector<Cell>> versions = store_->Versions("trips", row, "EPHEMERAL", VersionQuery{});
  ASSERT_TRUE(versions.ok());
  EXPECT_TRUE(versions->empty());
  Result<std::vector<Cell>> whole = store_->Row("trips", row);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(1u, whole->size());
  EXPECT_EQ("BASE", (*whole)[0].column);
  // The columns without TTL are unaffected.
  EXPECT_TRUE(store_->Latest("trips", row, "BASE").ok());

  // Expired cells are still in the log until purged.
  const uint32_t shard = ShardForRow(row, kShards);
  EXPECT_EQ(3u, RowInLog("trips", row, heads[shard]).size());

  // A young EPHEMERAL cell (another row) must survive the purge.
  const Uuid young_row = RowOnShard(shard);
  const PutResult y = MustPut("trips", W(young_row, "EPHEMERAL", 0, {{"young", true}}));
  Result<PurgeStats> purged = store_->Purge("trips");
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(0u, purged->shards_failed);
  EXPECT_GE(purged->deleted, 2u);
  std::vector<Cell> left = RowInLog("trips", row, heads[shard]);
  ASSERT_EQ(1u, left.size());
  EXPECT_EQ("BASE", left[0].column);
  for (const Cell& c : WalkLog("trips", shard, heads[shard], 50)) {
    EXPECT_NE(e0.added_id, c.added_id);
    EXPECT_NE(e1.added_id, c.added_id);
  }
  if (NowMicros() - y.created_at < 1500000) {
    EXPECT_EQ(1u, RowInLog("trips", young_row, y.added_id - 1).size())
        << "purge deleted a cell younger than its TTL";
  }
  // Purging again finds nothing of ours; purging a datastore without TTL columns is a no-op.
  Result<PurgeStats> users = store_->Purge("users");
  ASSERT_TRUE(users.ok());
  EXPECT_EQ(0u, users->deleted);
}

TEST_F(StoreTest, RowReturnsLatestOfEachColumn) {
  const Uuid row = Uuid::Random();
  Result<std::vector<Cell>> empty = store_->Row("trips", row);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());

  MustPut("trips", W(row, "BASE", 0, {{"b", 0}}));
  MustPut("trips", W(row, "BASE", 2, {{"b", 2}}));
  MustPut("trips", W(row, "BASE", 1, {{"b", 1}}));  // older ref written last
  MustPut("trips", W(row, "STATUS", 5, {{"s", 5}}));
  MustPut("users", W(row, "PROFILE", 9, {{"p", 9}}));  // another datastore
  Result<std::vector<Cell>> r = store_->Row("trips", row);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, Cell> by_column;
  for (const Cell& c : *r) by_column[c.column] = c;
  ASSERT_EQ(2u, by_column.size());
  EXPECT_EQ(2, by_column["BASE"].ref_key);
  EXPECT_EQ(json({{"b", 2}}), by_column["BASE"].body);
  EXPECT_EQ(5, by_column["STATUS"].ref_key);
  EXPECT_EQ(json({{"s", 5}}), by_column["STATUS"].body);
  for (const Cell& c : *r) EXPECT_EQ(row, c.row_key);

  Result<Cell> latest = store_->Latest("trips", row, "BASE");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(2, latest->ref_key);
  Result<Cell> none = store_->Latest("trips", row, "EPHEMERAL");
  EXPECT_EQ(StatusCode::kNotFound, none.status().code());
  EXPECT_THAT(none.status().message(), HasSubstr(row.ToString()));

  Result<std::vector<Cell>> users = store_->Row("users", row);
  ASSERT_TRUE(users.ok());
  ASSERT_EQ(1u, users->size());
  EXPECT_EQ(9, (*users)[0].ref_key);
}

TEST_F(StoreTest, ShardLogAndHeadContract) {
  const uint32_t shard = 5;
  const uint64_t head = *store_->ShardHead("trips", shard);
  std::vector<PutResult> puts;
  for (int i = 0; i < 5; ++i)
    puts.push_back(MustPut("trips", W(RowOnShard(shard), "BASE", i, {{"i", i}})));
  Result<uint64_t> new_head = store_->ShardHead("trips", shard);
  ASSERT_TRUE(new_head.ok());
  EXPECT_EQ(puts.back().added_id, *new_head);

  Result<ShardLogPage> page = store_->ShardLog("trips", shard, head, 2);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(2u, page->cells.size());
  EXPECT_EQ(puts[0].added_id, page->cells[0].added_id);
  EXPECT_EQ(puts[1].added_id, page->cells[1].added_id);
  EXPECT_EQ(puts[1].added_id, page->next_after);
  EXPECT_EQ(json({{"i", 0}}), page->cells[0].body);
  page = store_->ShardLog("trips", shard, page->next_after, 1000);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(3u, page->cells.size());
  EXPECT_EQ(puts[4].added_id, page->next_after);
  page = store_->ShardLog("trips", shard, page->next_after, 1000);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->cells.empty());
  EXPECT_EQ(puts[4].added_id, page->next_after);

  for (int bad : {0, -1, store_env->config.limits.max_log_limit + 1}) {
    Result<ShardLogPage> r = store_->ShardLog("trips", shard, 0, bad);
    EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("limit"));
  }
  Result<ShardLogPage> r = store_->ShardLog("trips", kShards, 0, 10);
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
  EXPECT_THAT(r.status().message(), HasSubstr("shard 8"));
  EXPECT_EQ(StatusCode::kInvalidArgument, store_->ShardHead("trips", kShards).status().code());
}

}  // namespace
}  // namespace cellar
