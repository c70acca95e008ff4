// Integration tests of cellar-relay processes (workers/cellar_relay_main.cc):
// SIGKILL and restart while writers run, and two relays sharing the shards.
#include <iostream>
#include <random>

#include "changelog/relay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/relay_test_util.h"
#include "tests/support/test_cluster.h"

namespace cellar::relaytest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

long long MillisSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

// Shards held by each MySQL connection id.
std::map<uint64_t, std::set<uint32_t>> OwnersByConnection(const ClusterConfig& config) {
  std::map<uint64_t, std::set<uint32_t>> by_conn;
  for (const auto& [shard, holder] : ShardLockHolders(config))
    if (holder) by_conn[*holder].insert(shard);
  return by_conn;
}

std::set<uint32_t> AllShards() {
  std::set<uint32_t> all;
  for (uint32_t s = 0; s < kShards; ++s) all.insert(s);
  return all;
}

TEST(RelayProcessTest, SigkillAtRandomPointsThreeTimesLosesNothing) {
  auto c = MakeCluster("rt_kill", Broker());
  ASSERT_TRUE(c);
  testing::TempDir logs("relay-kill");
  Collector collector(c->config);
  Writers writers(c->store.get(), 4, 0, 3, "kill");

  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::cout << "[ relay ] kill points seed " << seed << "\n";
  RecordProperty("kill_seed", std::to_string(seed));
  for (int round = 0; round < 3; ++round) {
    RelayProcess relay(c->config_path, "kill-" + std::to_string(round),
                       logs.File("relay-" + std::to_string(round) + ".log"));
    ASSERT_TRUE(relay.running());
    // Kill while it is publishing: once it has published something new, at a random moment.
    const size_t before = collector.distinct();
    ASSERT_TRUE(WaitFor([&] { return collector.distinct() > before + 20; }, 30s))
        << "relay round " << round << " published nothing:\n"
        << relay.Log();
    const auto kill_after = std::chrono::milliseconds(rng() % 800);
    std::this_thread::sleep_for(kill_after);  // the random kill point
    relay.Kill();
    std::cout << "[ relay ] SIGKILL round " << round << " after " << kill_after.count()
              << " ms of publishing; " << collector.distinct() << " events so far\n";
  }

  RelayProcess last(c->config_path, "kill-final", logs.File("relay-final.log"));
  const size_t before = collector.distinct();
  ASSERT_TRUE(WaitFor([&] { return collector.distinct() > before + 20; }, 30s)) << last.Log();
  writers.Stop();
  writers.Join();
  EXPECT_EQ(writers.failures(), 0u) << writers.first_error();
  const std::vector<CellId> written = writers.Written();

  const std::vector<CellId> missing = WaitForAll(collector, written, 60s);
  EXPECT_THAT(missing, IsEmpty()) << "never published: " << Describe(missing) << "\n" << last.Log();
  const auto violations = OrderViolations(collector.Events());
  EXPECT_THAT(violations, IsEmpty())
      << violations.size()
      << " out-of-order versions, first: " << (violations.empty() ? "" : violations.front());
  const size_t dups = collector.total() - collector.distinct();
  std::cout << "[ relay ] " << written.size() << " cells written across 3 SIGKILLs; "
            << collector.distinct() << " distinct events, " << dups << " duplicates ("
            << (collector.distinct() ? 100.0 * dups / collector.distinct() : 0) << "%)\n";
  RecordProperty("cells_written", std::to_string(written.size()));
  RecordProperty("duplicates", std::to_string(dups));
  EXPECT_EQ(last.Terminate(15s), 0) << last.Log();
}

TEST(RelayProcessTest, TwoRelaysSplitTheShardsAndTheSurvivorTakesOver) {
  auto c = MakeCluster("rt_two", Broker());
  ASSERT_TRUE(c);
  testing::TempDir logs("relay-two");
  Collector collector(c->config);
  Writers writers(c->store.get(), 2, 0, 2, "two");

  RelayProcess a(c->config_path, "relay-a", logs.File("a.log"));
  // A alone takes every shard.
  uint64_t conn_a = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto owners = OwnersByConnection(c->config);
        if (owners.size() != 1 || owners.begin()->second != AllShards()) return false;
        conn_a = owners.begin()->first;
        return true;
      },
      20s))
      << a.Log();

  RelayProcess b(c->config_path, "relay-b", logs.File("b.log"));
  // They split the shards: every shard locked by exactly one of them, and each
  // relay's log agrees with the locks it holds.
  std::map<uint64_t, std::set<uint32_t>> owners;
  const bool split = WaitFor(
      [&] {
        owners = OwnersByConnection(c->config);
        if (owners.size() != 2 || !owners.count(conn_a)) return false;
        std::set<uint32_t> locked;
        for (const auto& [conn, shards] : owners) locked.insert(shards.begin(), shards.end());
        if (locked != AllShards()) return false;
        const uint64_t conn_b =
            owners.begin()->first == conn_a ? owners.rbegin()->first : owners.begin()->first;
        return a.OwnedFromLog() == owners[conn_a] && b.OwnedFromLog() == owners[conn_b];
      },
      20s);
  ASSERT_TRUE(split) << "A's log says " << ::testing::PrintToString(a.OwnedFromLog())
                     << ", B's log says " << ::testing::PrintToString(b.OwnedFromLog()) << "\nA:\n"
                     << a.Log() << "\nB:\n"
                     << b.Log();
  const uint64_t conn_b =
      owners.begin()->first == conn_a ? owners.rbegin()->first : owners.begin()->first;
  const std::set<uint32_t> owned_a = a.OwnedFromLog(), owned_b = b.OwnedFromLog();
  std::vector<uint32_t> both;
  std::set_intersection(owned_a.begin(), owned_a.end(), owned_b.begin(), owned_b.end(),
                        std::back_inserter(both));
  EXPECT_THAT(both, IsEmpty()) << "shards owned by both relays";
  EXPECT_EQ(owned_a.size(), kShards / 2) << ::testing::PrintToString(owned_a);
  EXPECT_EQ(owned_b.size(), kShards / 2) << ::testing::PrintToString(owned_b);
  std::cout << "[ relay ] split: A owns " << ::testing::PrintToString(owned_a) << ", B owns "
            << ::testing::PrintToString(owned_b) << "\n";
  for (const auto& st : ReadRelayStatus(*c->store))
    EXPECT_TRUE(st.owned) << "relay status: shard " << st.shard << " " << st.datastore
                          << " not owned";

  // Kill A: B takes every shard over within seconds.
  const size_t written_before_kill = writers.count();
  a.Kill();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        owners = OwnersByConnection(c->config);
        return owners.size() == 1 && owners.count(conn_b) && owners[conn_b] == AllShards();
      },
      10s))
      << "B did not take over A's shards:\n"
      << b.Log();
  const long long takeover_ms = MillisSince(killed_at);
  std::cout << "[ relay ] B owned every shard " << takeover_ms << " ms after A was killed\n";
  RecordProperty("takeover_ms", std::to_string(takeover_ms));
  EXPECT_TRUE(WaitFor([&] { return b.OwnedFromLog() == AllShards(); }, 5s)) << b.Log();

  // Cells written after the kill (and before) all arrive.
  ASSERT_TRUE(WaitFor([&] { return writers.count() > written_before_kill + 200; }, 20s));
  writers.Stop();
  writers.Join();
  EXPECT_EQ(writers.failures(), 0u) << writers.first_error();
  const std::vector<CellId> written = writers.Written();
  const std::vector<CellId> missing = WaitForAll(collector, written, 30s);
  EXPECT_THAT(missing, IsEmpty()) << "never published: " << Describe(missing) << "\nB:\n"
                                  << b.Log();
  const size_t dups = collector.total() - collector.distinct();
  std::cout << "[ relay ] two relays: " << written.size() << " cells, " << dups << " duplicates\n";
  RecordProperty("duplicates", std::to_string(dups));
  EXPECT_EQ(b.Terminate(15s), 0) << b.Log();
}

}  // namespace
}  // namespace cellar::relaytest
