// The group committer's write path against a real MariaDB: each shard's
// INSERT takes the shard's commit lock itself (INSERT ... SELECT ... FOR
// UPDATE, NOWAIT when a transaction spans several shards), several rows of a
// shard come from one derived table, and a shard another transaction holds is
// committed on its own once free (cells/internal/batch_transaction.h).
#include <chrono>
#include <future>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/time.h"
#include "cells/body_codec.h"
#include "cells/cell_store.h"
#include "cells/internal/batch_transaction.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/private_mariadb.h"
#include "tests/support/status_printing.h"
#include "tests/support/store_environment.h"
#include "tests/support/test_cluster.h"

namespace cellar {

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kShards = 8;
const std::string kDs = "trips";

testing::StoreEnvironment* const env = static_cast<testing::StoreEnvironment*>(
    ::testing::AddGlobalTestEnvironment(new testing::StoreEnvironment({"group-commit"}, kShards)));

Uuid RowOnShard(uint32_t shard) {
  for (;;) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) == shard) return u;
  }
}

std::unique_ptr<MysqlConnection> Connect(uint32_t shard) {
  auto c = MysqlConnection::Connect(EndpointFor(env->config, env->config.HostForShard(shard)));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

// A body with arbitrary bytes in its strings: what the derived table of a
// multi-row INSERT must pass through unchanged.
json BinaryBody(std::mt19937& rng, int i) {
  std::string bytes(64 + rng() % 64, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return {{"i", i}, {"bytes", bytes}, {"x", 0.25 * i}};
}

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(nullptr, env->store) << "the shared MariaDB did not start"; }
  CellStore& store() { return *env->store; }
};

TEST_F(GroupCommitTest, ManyRowsOfOneShardInOneBatchKeepTheirBytes) {
  // One put_batch, 40 rows on shard 3: one transaction, one multi-row INSERT
  // whose rows come from a derived table.
  std::mt19937 rng(3);
  std::vector<CellWrite> writes;
  for (int i = 0; i < 40; ++i) writes.push_back({RowOnShard(3), "BASE", i, BinaryBody(rng, i)});
  std::vector<Result<PutResult>> results = store().PutBatch(kDs, writes);
  ASSERT_EQ(writes.size(), results.size());
  std::set<uint64_t> ids;
  for (size_t i = 0; i < writes.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_TRUE(results[i]->created);
    EXPECT_EQ(3u, results[i]->shard);
    ids.insert(results[i]->added_id);
    Result<Cell> back = store().Get(kDs, writes[i].row_key, "BASE", writes[i].ref_key);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(writes[i].body, back->body) << "cell " << i << " changed on the way";
    EXPECT_EQ(results[i]->added_id, back->added_id);
  }
  EXPECT_EQ(writes.size(), ids.size()) << "every cell has its own added_id";

  // The same batch again is an idempotent retry: same ids, nothing created.
  std::vector<Result<PutResult>> again = store().PutBatch(kDs, writes);
  for (size_t i = 0; i < writes.size(); ++i) {
    ASSERT_TRUE(again[i].ok()) << again[i].status().ToString();
    EXPECT_FALSE(again[i]->created);
    EXPECT_EQ(results[i]->added_id, again[i]->added_id);
  }
}

TEST_F(GroupCommitTest, HeldShardWaitsWhileOtherShardsCommit) {
  // Another transaction holds shard 5's commit lock, as a writer in another
  // process would while it commits.
  auto holder = Connect(5);
  ASSERT_NE(nullptr, holder);
  ASSERT_TRUE(holder->Begin().ok());
  auto locked = holder->Query("SELECT datastore FROM " +
                                  QualifiedTable(env->config.ShardDatabase(5), "commit_order") +
                                  " WHERE datastore = ? FOR UPDATE",
                              {kDs});
  ASSERT_TRUE(locked.ok() && locked->size() == 1) << locked.status().ToString();

  const CellWrite held{RowOnShard(5), "BASE", 0, {{"held", true}}};
  auto held_put = std::async(std::launch::async, [&] { return store().Put(kDs, held); });

  // Puts to every other shard, alone and batched with shard 5, go through.
  const auto start = Clock::now();
  std::vector<CellWrite> others;
  for (uint32_t s = 0; s < kShards; ++s)
    if (s != 5) others.push_back({RowOnShard(s), "BASE", 0, {{"shard", s}}});
  std::vector<std::future<Result<PutResult>>> puts;
  for (const CellWrite& w : others)
    puts.push_back(
        std::async(std::launch::async, [&store = store(), w] { return store.Put(kDs, w); }));
  for (auto& p : puts) {
    Result<PutResult> r = p.get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3))
      << "puts to free shards waited for the held one";
  EXPECT_EQ(std::future_status::timeout, held_put.wait_for(std::chrono::milliseconds(0)))
      << "the put to the held shard must wait for the lock";

  // Released: the waiting put commits, after the holder.
  ASSERT_TRUE(holder->Commit().ok());
  ASSERT_EQ(std::future_status::ready, held_put.wait_for(std::chrono::seconds(10)));
  Result<PutResult> r = held_put.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<Cell> back = store().Get(kDs, held.row_key, "BASE", 0);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(held.body, back->body);
}

TEST_F(GroupCommitTest, GroupTransactionLeavesAHeldShardOutAndCommitsTheRest) {
  // The committer's transaction over shards 1, 4 and 7 while another
  // transaction holds shard 4: NOWAIT reports shard 4 busy at once, and 1 and
  // 7 commit without it.
  auto holder = Connect(4);
  ASSERT_NE(nullptr, holder);
  ASSERT_TRUE(holder->Begin().ok());
  ASSERT_TRUE(holder
                  ->Query("SELECT datastore FROM " +
                              QualifiedTable(env->config.ShardDatabase(4), "commit_order") +
                              " WHERE datastore = ? FOR UPDATE",
                          {kDs})
                  .ok());

  auto writer = Connect(1);
  ASSERT_NE(nullptr, writer);
  ASSERT_TRUE(writer->UseImplicitTransactions().ok());
  std::vector<std::unique_ptr<internal::WriteUnit>> units;
  std::vector<internal::ShardBatch> batches;
  for (uint32_t shard : {7u, 4u, 1u}) {  // any order: the transaction sorts them
    auto u = std::make_unique<internal::WriteUnit>();
    u->datastore = kDs;
    u->shard = shard;
    internal::PendingCell c;
    c.row_key = RowOnShard(shard);
    c.column = "BASE";
    c.encoded_body = EncodeBody({{"shard", shard}});
    u->cells.push_back(c);
    batches.push_back({shard, kDs, {u.get()}});
    units.push_back(std::move(u));
  }
  std::vector<internal::ShardBatch*> run, busy;
  for (auto& b : batches) run.push_back(&b);
  const auto start = Clock::now();
  Status st = internal::RunGroupTransaction(*writer, env->config.mysql.database_prefix, run, &busy);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2)) << "NOWAIT must not wait";
  ASSERT_EQ(1u, busy.size());
  EXPECT_EQ(4u, busy[0]->shard);
  ASSERT_EQ(2u, run.size());
  EXPECT_EQ(1u, run[0]->shard);
  EXPECT_EQ(7u, run[1]->shard);
  for (const auto& u : units) {
    const Result<Cell> stored = store().Get(kDs, u->cells[0].row_key, "BASE", 0);
    if (u->shard == 4) {
      EXPECT_TRUE(u->results.empty()) << "a busy shard's units are left for the caller";
      EXPECT_EQ(StatusCode::kNotFound, stored.status().code());
    } else {
      ASSERT_EQ(1u, u->results.size());
      ASSERT_TRUE(u->results[0].ok()) << u->results[0].status().ToString();
      EXPECT_TRUE(u->results[0]->created);
      ASSERT_TRUE(stored.ok()) << stored.status().ToString();
      EXPECT_EQ(u->results[0]->added_id, stored->added_id);
    }
  }
  holder->Rollback();
}

TEST_F(GroupCommitTest, MissingCommitOrderRowNamesCellarInitAndWritesNothing) {
  // A shard database whose commit_order row is gone (a half-done manual
  // restore): its writes fail with a message saying what to run; other
  // shards still work; `cellar init` repairs it.
  auto admin = Connect(6);
  ASSERT_NE(nullptr, admin);
  const std::string commit_order = QualifiedTable(env->config.ShardDatabase(6), "commit_order");
  ASSERT_TRUE(admin->Execute("DELETE FROM " + commit_order + " WHERE datastore = ?", {kDs}).ok());

  const CellWrite single{RowOnShard(6), "BASE", 0, {{"n", 1}}};
  Result<PutResult> r = store().Put(kDs, single);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("has no commit_order row for 'trips'"));
  EXPECT_THAT(r.status().message(), HasSubstr("run `cellar init`"));
  // Two rows of the shard: the multi-row form fails the same way.
  std::vector<CellWrite> two = {{RowOnShard(6), "BASE", 0, {{"n", 2}}},
                                {RowOnShard(6), "BASE", 0, {{"n", 3}}}};
  for (const Result<PutResult>& each : store().PutBatch(kDs, two)) {
    ASSERT_FALSE(each.ok());
    EXPECT_THAT(each.status().message(), HasSubstr("run `cellar init`"));
  }
  EXPECT_EQ(StatusCode::kNotFound, store().Get(kDs, single.row_key, "BASE", 0).status().code());
  for (const CellWrite& w : two)
    EXPECT_EQ(StatusCode::kNotFound, store().Get(kDs, w.row_key, "BASE", 0).status().code());
  EXPECT_TRUE(store().Put(kDs, {RowOnShard(2), "BASE", 0, {{"other", 1}}}).ok());

  ASSERT_TRUE(store().Init().ok());
  Result<PutResult> after = store().Put(kDs, single);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->created);
}

}  // namespace
}  // namespace cellar
