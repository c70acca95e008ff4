// Moving a logical shard between two MariaDB hosts while writers keep
// writing, without restarting anything (cells/shard_move.h): every process
// learns the new placement while it runs, a writer with a stale view is
// rerouted by the source's freeze, nothing acknowledged is lost, the shard is
// gone from the source, and the host logs (what the relay publishes) hold
// every acknowledged cell.
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
#include "cells/host_topology.h"
#include "cells/shard_map.h"
#include "cells/shard_move.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
constexpr uint32_t kShards = 8, kMoved = 2;

// Host a owns shards 0-3, host b 4-7.
testing::StoreEnvironment* const env =
    static_cast<testing::StoreEnvironment*>(::testing::AddGlobalTestEnvironment(
        new testing::StoreEnvironment({"move-a", "move-b"}, kShards)));

Uuid RowOnShard(uint32_t shard) {
  for (;;) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) == shard) return u;
  }
}

// Rows of `shard` in host `host`'s trips cells table, counted on its primary.
uint64_t RowsOnHost(size_t host, uint32_t shard) {
  auto conn = ConnectCurrentPrimary(env->config, host);
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  if (!conn.ok()) return 0;
  auto rows = (*conn)->Query(
      "SELECT COUNT(*) FROM " +
          QualifiedTable(env->config.HostDatabase(env->config.mysql.hosts[host]), "cells_trips") +
          " WHERE shard = ?",
      {uint64_t{shard}});
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  return rows.ok() ? (*rows)[0].Uint(0) : 0;
}

// A store whose view is refreshed only when a host refuses it (at Open and by
// the group committer's reroute): a process with a stale view.
std::unique_ptr<CellStore> StaleStore() {
  ClusterConfig c = env->config;
  c.mysql.topology_refresh_ms = 3600 * 1000;
  return CellStore::Open(c);
}

TEST(ShardMoveTest, BadRequestsAreRefusedAndChangeNothing) {
  ASSERT_NE(nullptr, env->store);
  const std::string a = env->config.mysql.hosts[0].name, b = env->config.mysql.hosts[1].name;
  auto same = MoveShard(env->config, 1, a);
  EXPECT_EQ(StatusCode::kInvalidArgument, same.status().code()) << same.status().ToString();
  EXPECT_THAT(same.status().message(), HasSubstr("already on host"));
  auto range = MoveShard(env->config, 99, b);
  EXPECT_EQ(StatusCode::kInvalidArgument, range.status().code());
  EXPECT_THAT(range.status().message(), HasSubstr("out of range"));
  EXPECT_THAT(MoveShard(env->config, 1, "nope").status().message(),
              HasSubstr("unknown host 'nope'"));
  auto hosts = CurrentShardHosts(env->config);
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ((std::vector<uint32_t>{0, 0, 0, 0, 1, 1, 1, 1}), *hosts);
}

TEST(ShardMoveTest, MoveUnderWriteLoadWithoutRestart) {
  ASSERT_NE(nullptr, env->store);
  const std::string b = env->config.mysql.hosts[1].name;
  // The writers' store runs through the move: no restart, no config roll.
  std::unique_ptr<CellStore> store = CellStore::Open(env->config);
  std::unique_ptr<CellStore> stale = StaleStore();
  const Uuid before_row = RowOnShard(kMoved);
  Result<PutResult> before = store->Put("trips", {before_row, "BASE", 0, {{"before", 1}}});
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  using Address = std::tuple<Uuid, std::string, int64_t>;
  std::mutex mu;
  std::map<Address, nlohmann::json> acked;
  acked[{before_row, "BASE", 0}] = {{"before", 1}};
  std::atomic<bool> stop{false};
  std::atomic<int> frozen_refusals{0}, errors{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        // Half the writes go to the moving shard.
        const Uuid row = RowOnShard(i % 2 ? kMoved : static_cast<uint32_t>(i % kShards));
        const nlohmann::json body = {{"t", t}, {"i", i}};
        while (true) {
          Result<PutResult> r = store->Put("trips", {row, "BASE", 0, body});
          if (r.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            acked[{row, "BASE", 0}] = body;
            break;
          }
          if (r.status().code() == StatusCode::kUnavailable &&
              r.status().message().find("frozen") != std::string::npos) {
            ++frozen_refusals;  // while the move holds the shard: retry
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
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
  ASSERT_TRUE(testing::WaitFor([&] { return acked_count() >= 1500; }, std::chrono::seconds(60)));

  std::vector<std::string> lines;
  std::vector<Result<PutResult>> while_frozen;
  Result<ShardMoveReport> moved = MoveShard(env->config, kMoved, b, [&](const std::string& l) {
    lines.push_back(l);
    if (l.rfind("frozen:", 0) != 0) return;
    // One batch over the frozen shard and a free one: the frozen shard's row
    // is refused alone (the placement does not name a new host yet).
    while_frozen = stale->PutBatch("trips", {{RowOnShard(kMoved), "BASE", 0, {{"n", 1}}},
                                             {RowOnShard(0), "BASE", 0, {{"n", 2}}}});
  });
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_GT(moved->cells_copied, 0u);
  EXPECT_EQ(moved->cells_verified, moved->cells_copied);
  EXPECT_GE(moved->source_rows_deleted, moved->cells_verified);
  EXPECT_EQ(1u, moved->move_seq);
  ASSERT_EQ(2u, while_frozen.size());
  EXPECT_EQ(StatusCode::kUnavailable, while_frozen[0].status().code())
      << while_frozen[0].status().ToString();
  EXPECT_THAT(while_frozen[0].status().message(),
              HasSubstr("shard 2 is frozen while it moves to host " + b));
  EXPECT_TRUE(while_frozen[1].ok()) << while_frozen[1].status().ToString();
  // The writers keep going on the target, through the same store.
  const size_t at_move = acked_count();
  ASSERT_TRUE(
      testing::WaitFor([&] { return acked_count() >= at_move + 1000; }, std::chrono::seconds(60)));
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_EQ(0, errors.load());
  EXPECT_EQ(1u, store->HostOfShard(kMoved)) << "the running store did not learn the move";

  // A writer with a stale view is refused by the source and rerouted.
  EXPECT_EQ(0u, stale->HostOfShard(kMoved));
  const Uuid late_row = RowOnShard(kMoved);
  Result<PutResult> late = stale->Put("trips", {late_row, "BASE", 0, {{"late", 1}}});
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(1u, stale->HostOfShard(kMoved));
  acked[{late_row, "BASE", 0}] = {{"late", 1}};

  // Every acknowledged write reads back, through the running store and a new one.
  std::unique_ptr<CellStore> fresh = CellStore::Open(env->config);
  size_t on_moved = 0;
  for (const auto& [addr, body] : acked) {
    for (CellStore* s : {store.get(), fresh.get()}) {
      Result<Cell> c = s->Get("trips", std::get<0>(addr), "BASE", 0);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_EQ(body, c->body);
    }
    on_moved += ShardForRow(std::get<0>(addr), kShards) == kMoved;
  }
  EXPECT_GT(on_moved, 1000u);
  // Gone from the source; the placement says where it went.
  EXPECT_EQ(0u, RowsOnHost(0, kMoved));
  EXPECT_EQ(on_moved, RowsOnHost(1, kMoved));
  auto hosts = CurrentShardHosts(env->config);
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ(1u, (*hosts)[kMoved]);
  // A position token of the source's log means nothing on the target.
  ReadOptions after;
  after.after = before->position;
  Result<Cell> with_old_token = store->Get("trips", before_row, "BASE", 0, after);
  EXPECT_EQ(StatusCode::kInvalidArgument, with_old_token.status().code());
  EXPECT_THAT(with_old_token.status().message(), HasSubstr("moved"));
  // The host logs (what the relay publishes) hold every acknowledged cell.
  std::set<Address> logged;
  for (size_t h = 0; h < 2; ++h) {
    uint64_t after_id = 0;
    while (true) {
      Result<HostLogPage> page = store->HostLog("trips", h, after_id, 5000);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      if (page->cells.empty() && !page->held_by_open_writer) break;
      after_id = page->next_after;
      for (const auto& c : page->cells)
        if (c.ref_key == 0 && c.column == "BASE") logged.insert({c.row_key, c.column, 0});
    }
  }
  for (const auto& [addr, body] : acked)
    EXPECT_TRUE(logged.count(addr)) << "not in any host log: " << std::get<0>(addr).ToString();
  std::cout << "[ move ] " << acked.size() << " acknowledged writes, " << on_moved
            << " on the moved shard; " << moved->cells_copied << " copied in "
            << moved->catch_up_passes << " passes; writes refused for " << moved->frozen_ms
            << " ms (" << frozen_refusals.load() << " refusals)\n";
  for (const auto& l : lines) std::cout << "[ move ] " << l << "\n";
}

TEST(ShardMoveTest, AShardMovesBackToAHostThatFrozeIt) {
  ASSERT_NE(nullptr, env->store);
  constexpr uint32_t kShard = 6;
  const std::string a = env->config.mysql.hosts[0].name, b = env->config.mysql.hosts[1].name;
  std::unique_ptr<CellStore> store = CellStore::Open(env->config);
  const uint64_t earlier = RowsOnHost(1, kShard);  // other tests' cells
  std::map<Uuid, int> written;
  auto put_some = [&](int round) {
    for (int i = 0; i < 20; ++i) {
      const Uuid row = RowOnShard(kShard);
      Result<PutResult> r = store->Put("trips", {row, "BASE", 0, {{"round", round}}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      written[row] = round;
    }
  };
  put_some(0);
  Result<ShardMoveReport> there = MoveShard(env->config, kShard, a);
  ASSERT_TRUE(there.ok()) << there.status().ToString();
  EXPECT_EQ(0u, store->HostOfShard(kShard));
  put_some(1);
  Result<ShardMoveReport> back = MoveShard(env->config, kShard, b);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(there->move_seq + 1, back->move_seq);
  EXPECT_EQ(earlier + 40, back->cells_verified);
  EXPECT_EQ(1u, store->HostOfShard(kShard));
  put_some(2);  // b no longer refuses the shard it froze when it moved away
  for (const auto& [row, round] : written) {
    Result<Cell> c = store->Get("trips", row, "BASE", 0);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(round, c->body["round"]);
  }
  EXPECT_EQ(0u, RowsOnHost(0, kShard));
  EXPECT_EQ(earlier + 60, RowsOnHost(1, kShard));
}

// A move that placed its shard but could not delete it from the source (a
// long transaction there holds the rows past the lock wait) is finished by
// running the command again.
TEST(ShardMoveTest, AMoveThatCouldNotDeleteTheSourceIsFinishedByARerun) {
  ASSERT_NE(nullptr, env->store);
  constexpr uint32_t kShard = 7;  // on b
  const std::string a = env->config.mysql.hosts[0].name;
  std::unique_ptr<CellStore> store = CellStore::Open(env->config);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(store->Put("trips", {RowOnShard(kShard), "BASE", 0, {{"i", i}}}).ok());
  const uint64_t rows = RowsOnHost(1, kShard);
  std::unique_ptr<MysqlConnection> holder;
  Result<ShardMoveReport> failed = MoveShard(env->config, kShard, a, [&](const std::string& l) {
    if (l.rfind("placed:", 0) != 0) return;
    auto conn = ConnectCurrentPrimary(env->config, 1);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    holder = std::move(conn).value();
    ASSERT_TRUE(holder->Begin().ok());
    auto locked = holder->Query(
        "SELECT added_id FROM " +
            QualifiedTable(env->config.HostDatabase(env->config.mysql.hosts[1]), "cells_trips") +
            " WHERE shard = ? FOR UPDATE",
        {uint64_t{kShard}});
    ASSERT_TRUE(locked.ok()) << locked.status().ToString();
  });
  ASSERT_FALSE(failed.ok()) << "the source's rows were deleted through a lock";
  ASSERT_NE(nullptr, holder);
  holder->Rollback();
  EXPECT_EQ(rows, RowsOnHost(1, kShard)) << "a failed delete removed rows";
  EXPECT_EQ(0u, store->HostOfShard(kShard)) << "placed on a before the delete";

  Result<ShardMoveReport> rerun = MoveShard(env->config, kShard, a);
  ASSERT_TRUE(rerun.ok()) << rerun.status().ToString();
  EXPECT_EQ(rows, rerun->source_rows_deleted);
  EXPECT_EQ(0u, RowsOnHost(1, kShard));
  EXPECT_EQ(rows, RowsOnHost(0, kShard));
  auto again = MoveShard(env->config, kShard, a);
  EXPECT_EQ(StatusCode::kInvalidArgument, again.status().code()) << again.status().ToString();
}

}  // namespace
}  // namespace cellar
