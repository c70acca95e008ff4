// Moving a logical shard between two MariaDB hosts while writers keep
// writing (cells/shard_move.h): nothing acknowledged is lost, reads are right
// after the switch, the shard is gone from the source, and the host logs (what
// the relay publishes) hold every acknowledged cell.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "cells/shard_move.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"
#include "testing/test_cluster.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
constexpr uint32_t kShards = 8, kMoved = 2;

// Host a owns shards 0-3, host b 4-7.
testing::StoreEnvironment* const env =
    static_cast<testing::StoreEnvironment*>(::testing::AddGlobalTestEnvironment(
        new testing::StoreEnvironment({"move-a", "move-b"}, kShards)));

ClusterConfig Rolled() {
  ClusterConfig c = env->config;
  auto& a = c.mysql.hosts[0].shards;
  a.erase(std::find(a.begin(), a.end(), kMoved));
  auto& b = c.mysql.hosts[1].shards;
  b.insert(b.begin(), kMoved);
  return c;
}

Uuid RowOnShard(uint32_t shard) {
  for (;;) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) == shard) return u;
  }
}

TEST(ShardMoveTest, BadRequestsAreRefusedAndChangeNothing) {
  ASSERT_NE(nullptr, env->store);
  const std::string a = env->config.mysql.hosts[0].name, b = env->config.mysql.hosts[1].name;
  auto same = CopyAndFreezeShard(env->config, 1, a);
  EXPECT_EQ(StatusCode::kInvalidArgument, same.status().code()) << same.status().ToString();
  EXPECT_THAT(same.status().message(), HasSubstr("already on host"));
  EXPECT_EQ(StatusCode::kInvalidArgument, CopyAndFreezeShard(env->config, 99, b).status().code());
  EXPECT_THAT(CopyAndFreezeShard(env->config, 1, "nope").status().message(),
              HasSubstr("unknown host 'nope'"));
  auto not_rolled = FinishShardMove(env->config, 1, a);
  EXPECT_EQ(StatusCode::kFailedPrecondition, not_rolled.status().code());
  EXPECT_THAT(not_rolled.status().message(), HasSubstr("roll the config"));
  auto not_frozen = FinishShardMove(Rolled(), kMoved, a);
  EXPECT_EQ(StatusCode::kFailedPrecondition, not_frozen.status().code());
  EXPECT_THAT(not_frozen.status().message(), HasSubstr("is not frozen"));
}

TEST(ShardMoveTest, FrozenShardFailsAloneInAGroupTransaction) {
  // One put_batch over a frozen shard and a free one: the group committer
  // answers the frozen shard's row Unavailable and commits the other.
  ASSERT_NE(nullptr, env->store);
  constexpr uint32_t kFrozen = 3, kFree = 0;
  const std::string a = env->config.mysql.hosts[0].name, b = env->config.mysql.hosts[1].name;
  Result<ShardMoveReport> step1 = CopyAndFreezeShard(env->config, kFrozen, b);
  ASSERT_TRUE(step1.ok()) << step1.status().ToString();
  std::unique_ptr<CellStore> old_store = CellStore::Open(env->config);
  const std::vector<CellWrite> batch = {{RowOnShard(kFrozen), "BASE", 0, {{"n", 1}}},
                                        {RowOnShard(kFree), "BASE", 0, {{"n", 2}}}};
  std::vector<Result<PutResult>> r = old_store->PutBatch("trips", batch);
  ASSERT_EQ(2u, r.size());
  EXPECT_EQ(StatusCode::kUnavailable, r[0].status().code()) << r[0].status().ToString();
  EXPECT_THAT(r[0].status().message(), HasSubstr("shard 3 is frozen while it moves to host " + b));
  ASSERT_TRUE(r[1].ok()) << r[1].status().ToString();
  EXPECT_TRUE(old_store->Get("trips", batch[1].row_key, "BASE", 0).ok());
  EXPECT_EQ(StatusCode::kNotFound,
            old_store->Get("trips", batch[0].row_key, "BASE", 0).status().code());
  // Finish the move so the other tests see a normal cluster again: shard 3
  // ends up on host b, as the rolled config says.
  ClusterConfig rolled = env->config;
  auto& from = rolled.mysql.hosts[0].shards;
  from.erase(std::find(from.begin(), from.end(), kFrozen));
  rolled.mysql.hosts[1].shards.push_back(kFrozen);
  std::sort(rolled.mysql.hosts[1].shards.begin(), rolled.mysql.hosts[1].shards.end());
  Result<ShardMoveReport> step2 = FinishShardMove(rolled, kFrozen, a);
  ASSERT_TRUE(step2.ok()) << step2.status().ToString();
  std::unique_ptr<CellStore> new_store = CellStore::Open(rolled);
  EXPECT_TRUE(new_store->Put("trips", batch[0]).ok()) << "writes through the rolled config";
}

TEST(ShardMoveTest, MoveUnderWriteLoadLosesNothing) {
  ASSERT_NE(nullptr, env->store);
  const std::string a = env->config.mysql.hosts[0].name, b = env->config.mysql.hosts[1].name;
  std::unique_ptr<CellStore> old_store = CellStore::Open(env->config);
  const ClusterConfig rolled = Rolled();
  std::unique_ptr<CellStore> new_store = CellStore::Open(rolled);
  std::atomic<CellStore*> current{old_store.get()};

  using Address = std::tuple<Uuid, std::string, int64_t>;
  std::mutex mu;
  std::map<Address, nlohmann::json> acked;
  std::atomic<bool> stop{false};
  std::atomic<int> frozen_refusals{0}, errors{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        // Half the writes go to the moving shard.
        const Uuid row = RowOnShard(i % 2 ? kMoved : static_cast<uint32_t>(i % kShards));
        const nlohmann::json body = {{"t", t}, {"i", i}};
        while (!stop) {
          Result<PutResult> r = current.load()->Put("trips", {row, "BASE", 0, body});
          if (r.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            acked[{row, "BASE", 0}] = body;
            break;
          }
          if (r.status().code() == StatusCode::kUnavailable &&
              r.status().message().find("frozen") != std::string::npos) {
            ++frozen_refusals;  // until the config roll: retry
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            continue;
          }
          if (errors++ < 5) ADD_FAILURE() << r.status().ToString();
          break;
        }
      }
    });
  auto acked_count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return acked.size();
  };
  while (acked_count() < 1500) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  std::vector<std::string> lines;
  Result<ShardMoveReport> step1 =
      CopyAndFreezeShard(env->config, kMoved, b, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(step1.ok()) << step1.status().ToString();
  EXPECT_GT(step1->cells_copied, 0u);
  EXPECT_EQ(step1->cells_verified, step1->cells_copied);
  EXPECT_EQ("0-1,3", step1->from_shards_after);
  EXPECT_EQ("2,4-7", step1->to_shards_after);
  // Frozen: the old config's writes to the shard are refused, other shards go on.
  Result<PutResult> refused = old_store->Put("trips", {RowOnShard(kMoved), "BASE", 0, {{"x", 1}}});
  EXPECT_EQ(StatusCode::kUnavailable, refused.status().code()) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("frozen while it moves to host " + b));
  EXPECT_TRUE(old_store->Put("trips", {RowOnShard(1), "BASE", 0, {{"x", 2}}}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let refusals happen
  const size_t at_freeze = acked_count();

  current = new_store.get();  // the config roll
  const auto roll_deadline = Clock::now() + std::chrono::seconds(20);
  while (acked_count() < at_freeze + 1000 && Clock::now() < roll_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Result<ShardMoveReport> step2 = FinishShardMove(rolled, kMoved, a);
  ASSERT_TRUE(step2.ok()) << step2.status().ToString();
  EXPECT_EQ(step1->cells_verified, step2->cells_verified);
  EXPECT_EQ(step1->digest, step2->digest);
  EXPECT_GE(step2->source_rows_deleted, step1->cells_verified);
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_EQ(0, errors.load());
  EXPECT_GT(frozen_refusals.load(), 0) << "no write met the frozen shard";

  // Every acknowledged write reads back through the new config.
  std::map<Address, nlohmann::json> want;
  {
    std::lock_guard<std::mutex> lock(mu);
    want = acked;
  }
  size_t on_moved = 0;
  for (const auto& [addr, body] : want) {
    Result<Cell> c = new_store->Get("trips", std::get<0>(addr), "BASE", 0);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(body, c->body);
    on_moved += ShardForRow(std::get<0>(addr), kShards) == kMoved;
  }
  EXPECT_GT(on_moved, 1000u);
  // Gone from the source.
  Result<ShardLogPage> source = old_store->ShardLog("trips", kMoved, 0, 10);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_TRUE(source->cells.empty()) << "shard still on the source";
  // The host logs (what the relay publishes) hold every acknowledged cell.
  std::set<Address> logged;
  for (size_t h = 0; h < 2; ++h) {
    uint64_t after = 0;
    while (true) {
      Result<HostLogPage> page = new_store->HostLog("trips", h, after, 5000);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      if (page->cells.empty() && !page->held_by_open_writer) break;
      after = page->next_after;
      for (const auto& c : page->cells)
        if (c.ref_key == 0 && c.column == "BASE") logged.insert({c.row_key, c.column, 0});
    }
  }
  for (const auto& [addr, body] : want)
    EXPECT_TRUE(logged.count(addr)) << "not in any host log: " << std::get<0>(addr).ToString();
  std::cout << "[ move ] " << want.size() << " acknowledged writes, " << on_moved
            << " on the moved shard; " << step1->cells_copied << " copied in "
            << step1->catch_up_passes << " passes; " << frozen_refusals.load()
            << " refusals while frozen\n";
}

}  // namespace
}  // namespace cellar
