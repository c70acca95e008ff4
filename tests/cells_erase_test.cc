// Idempotent erase (cells/cell_store.h, "Erase"): erasing a column whose
// latest version is a tombstone writes nothing and answers created=false with
// that tombstone; an expected latest ref_key erases exactly one version; a
// group commit whose COMMIT landed but whose acknowledgement was lost retries
// without writing a second tombstone.
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/fault_proxy.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr uint32_t kShards = 8;

testing::StoreEnvironment* const env = static_cast<testing::StoreEnvironment*>(
    ::testing::AddGlobalTestEnvironment(new testing::StoreEnvironment({"erase"}, kShards)));

class EraseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(nullptr, env->store) << "the MariaDB server did not start";
    store_ = env->store.get();
  }

  void MustPut(CellStore* store, const Uuid& row, const std::string& column, int64_t ref) {
    Result<PutResult> r = store->Put("trips", CellWrite{row, column, ref, {{"v", ref}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // (ref_key, tombstone) of every unexpired version, newest first.
  std::vector<std::pair<int64_t, bool>> Versions(const Uuid& row, const std::string& column) {
    Result<std::vector<Cell>> v = store_->Versions("trips", row, column, VersionQuery{});
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    std::vector<std::pair<int64_t, bool>> out;
    if (v.ok())
      for (const Cell& c : *v) out.emplace_back(c.ref_key, c.tombstone);
    return out;
  }

  CellStore* store_ = nullptr;
};

TEST_F(EraseTest, ErasingTwiceWritesOneTombstone) {
  const Uuid row = Uuid::Random();
  MustPut(store_, row, "BASE", 0);
  MustPut(store_, row, "BASE", 4);
  Result<PutResult> first = store_->Erase("trips", row, "BASE");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(5, first->ref_key);

  Result<PutResult> second = store_->Erase("trips", row, "BASE");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->created) << "the latest version is already a tombstone";
  EXPECT_EQ(5, second->ref_key);
  EXPECT_EQ(first->added_id, second->added_id);
  EXPECT_EQ(first->created_at, second->created_at);
  EXPECT_EQ(first->shard, second->shard);
  EXPECT_EQ((std::vector<std::pair<int64_t, bool>>{{5, true}, {4, false}, {0, false}}),
            Versions(row, "BASE"));

  // A live version above the tombstone makes the next erase write again.
  MustPut(store_, row, "BASE", 6);
  Result<PutResult> third = store_->Erase("trips", row, "BASE");
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_TRUE(third->created);
  EXPECT_EQ(7, third->ref_key);
}

TEST_F(EraseTest, ErasingAColumnNeverWrittenTwiceWritesOneTombstone) {
  const Uuid row = Uuid::Random();
  Result<PutResult> first = store_->Erase("users", row, "PROFILE");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(0, first->ref_key);
  Result<PutResult> second = store_->Erase("users", row, "PROFILE");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->created);
  EXPECT_EQ(0, second->ref_key);
  EXPECT_EQ(first->added_id, second->added_id);
}

TEST_F(EraseTest, ExpectedRefKeyErasesExactlyThatVersion) {
  const Uuid row = Uuid::Random();
  for (int64_t ref : {0, 1, 2}) MustPut(store_, row, "BASE", ref);
  using V = std::vector<std::pair<int64_t, bool>>;
  const V before{{2, false}, {1, false}, {0, false}};

  // Not the latest: Conflict naming the latest, nothing written.
  Result<PutResult> stale = store_->Erase("trips", row, "BASE", 1);
  ASSERT_EQ(StatusCode::kConflict, stale.status().code()) << stale.status().ToString();
  EXPECT_THAT(stale.status().message(), HasSubstr("expected latest ref_key 1"));
  EXPECT_THAT(stale.status().message(), HasSubstr("the latest is ref_key 2 (live)"));
  EXPECT_THAT(stale.status().message(), HasSubstr(row.ToString()));
  EXPECT_EQ(before, Versions(row, "BASE"));
  Result<PutResult> ahead = store_->Erase("trips", row, "BASE", 9);
  ASSERT_EQ(StatusCode::kConflict, ahead.status().code()) << ahead.status().ToString();
  EXPECT_EQ(before, Versions(row, "BASE"));

  // The latest: a tombstone at K + 1.
  Result<PutResult> erased = store_->Erase("trips", row, "BASE", 2);
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_TRUE(erased->created);
  EXPECT_EQ(3, erased->ref_key);
  // The same erase again (a retry): its tombstone, created=false.
  Result<PutResult> retry = store_->Erase("trips", row, "BASE", 2);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_FALSE(retry->created);
  EXPECT_EQ(3, retry->ref_key);
  EXPECT_EQ(erased->added_id, retry->added_id);
  // Expecting the tombstone itself, or nothing: the same tombstone.
  Result<PutResult> on_tomb = store_->Erase("trips", row, "BASE", 3);
  ASSERT_TRUE(on_tomb.ok()) << on_tomb.status().ToString();
  EXPECT_FALSE(on_tomb->created);
  EXPECT_EQ(3, on_tomb->ref_key);
  Result<PutResult> plain = store_->Erase("trips", row, "BASE");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->created);
  EXPECT_EQ(3, plain->ref_key);
  // An older version under the tombstone is not "this erase retried".
  Result<PutResult> older = store_->Erase("trips", row, "BASE", 1);
  ASSERT_EQ(StatusCode::kConflict, older.status().code()) << older.status().ToString();
  EXPECT_THAT(older.status().message(), HasSubstr("ref_key 3 (a tombstone)"));
  EXPECT_EQ((V{{3, true}, {2, false}, {1, false}, {0, false}}), Versions(row, "BASE"));

  // A live version written after the erase: the retry of the old erase is now stale.
  MustPut(store_, row, "BASE", 4);
  Result<PutResult> late = store_->Erase("trips", row, "BASE", 2);
  ASSERT_EQ(StatusCode::kConflict, late.status().code()) << late.status().ToString();
  EXPECT_THAT(late.status().message(), HasSubstr("the latest is ref_key 4 (live)"));

  // A column with no version at all.
  const Uuid never = Uuid::Random();
  Result<PutResult> none = store_->Erase("trips", never, "BASE", 0);
  ASSERT_EQ(StatusCode::kConflict, none.status().code()) << none.status().ToString();
  EXPECT_THAT(none.status().message(), HasSubstr("no version"));
  EXPECT_TRUE(Versions(never, "BASE").empty());

  Result<PutResult> negative = store_->Erase("trips", row, "BASE", -1);
  ASSERT_EQ(StatusCode::kInvalidArgument, negative.status().code());
  EXPECT_THAT(negative.status().message(), HasSubstr("expected_ref_key"));
}

// "Latest" is Latest()'s: expired versions do not count, so a tombstone that
// expired does not make a later erase a no-op, and a new tombstone goes above
// the expired versions still stored (their addresses are taken until purged).
TEST_F(EraseTest, ExpiredVersionsAreNotTheLatestButKeepTheirRefKeys) {
  const Uuid row = Uuid::Random();
  MustPut(store_, row, "EPHEMERAL", 0);  // ttl 2s (test_cluster.h)
  Result<PutResult> first = store_->Erase("trips", row, "EPHEMERAL");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(1, first->ref_key);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!Versions(row, "EPHEMERAL").empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the versions never expired";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // An expired version is not the expected latest.
  Result<PutResult> stale = store_->Erase("trips", row, "EPHEMERAL", 1);
  ASSERT_EQ(StatusCode::kConflict, stale.status().code()) << stale.status().ToString();
  EXPECT_THAT(stale.status().message(), HasSubstr("no version"));
  Result<PutResult> again = store_->Erase("trips", row, "EPHEMERAL");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->created) << "an expired tombstone is not the latest version";
  EXPECT_EQ(2, again->ref_key);
}

// A store whose only host is reached through `proxy`, with one writer
// connection, so that the first COMMIT after a warm-up put is the next write's.
std::unique_ptr<CellStore> StoreThrough(const testing::FaultProxy& proxy) {
  ClusterConfig config = env->config;
  config.mysql.hosts[0].port = proxy.port();
  config.group_commit.writer_threads_per_host = 1;
  return CellStore::Open(config);
}

TEST_F(EraseTest, LostCommitAcknowledgementWritesOneTombstone) {
  testing::FaultProxy proxy(env->dbs[0]->port());
  std::unique_ptr<CellStore> store = StoreThrough(proxy);
  const Uuid row = Uuid::Random();
  MustPut(store.get(), row, "BASE", 3);  // the writer connection is now registered

  proxy.DropNextAnswer(testing::FaultProxy::IsMysqlQuery("COMMIT"));
  Result<PutResult> erased = store->Erase("trips", row, "BASE");
  ASSERT_EQ(1, proxy.answers_dropped()) << "the erase's COMMIT was not intercepted";
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(4, erased->ref_key);
  EXPECT_EQ((std::vector<std::pair<int64_t, bool>>{{4, true}, {3, false}}), Versions(row, "BASE"))
      << "the retry after the lost acknowledgement wrote a second tombstone";
  Result<Cell> tomb = store_->Get("trips", row, "BASE", 4);
  ASSERT_TRUE(tomb.ok()) << tomb.status().ToString();
  EXPECT_EQ(tomb->added_id, erased->added_id);
}

TEST_F(EraseTest, LostCommitAcknowledgementOfAnExpectedErase) {
  testing::FaultProxy proxy(env->dbs[0]->port());
  std::unique_ptr<CellStore> store = StoreThrough(proxy);
  const Uuid row = Uuid::Random();
  MustPut(store.get(), row, "STATUS", 0);
  MustPut(store.get(), row, "STATUS", 1);

  proxy.DropNextAnswer(testing::FaultProxy::IsMysqlQuery("COMMIT"));
  Result<PutResult> erased = store->Erase("trips", row, "STATUS", 1);
  ASSERT_EQ(1, proxy.answers_dropped()) << "the erase's COMMIT was not intercepted";
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(2, erased->ref_key);
  EXPECT_EQ((std::vector<std::pair<int64_t, bool>>{{2, true}, {1, false}, {0, false}}),
            Versions(row, "STATUS"));
}

}  // namespace
}  // namespace cellar
