// Integration tests of cellar-relay processes (workers/cellar_relay_main.cc):
// SIGKILL and restart while writers run, and two relays sharing the streams
// (hosts x datastores: 2 x 2 in these clusters, relay_test_util.h).
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <set>

#include "changelog/relay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_cluster.h"
#include "tests/relay_test_util.h"

namespace cellar::relaytest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

long long MillisSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

// A lock holder: (host name, MySQL connection id on that host). One relay
// process holds its streams of each host on one connection per host.
using Holder = std::pair<std::string, uint64_t>;

std::string HostOfStream(const std::string& stream) { return stream.substr(0, stream.find('/')); }

// The holder of every stream, or nullopt when some stream is unowned.
std::optional<std::map<std::string, Holder>> HoldersWhenAllOwned(const ClusterConfig& config) {
  std::map<std::string, Holder> out;
  for (const auto& [stream, conn] : StreamLockHolders(config)) {
    if (!conn) return std::nullopt;
    out[stream] = {HostOfStream(stream), *conn};
  }
  if (out.size() != AllStreams(config).size()) return std::nullopt;
  return out;
}

std::string Print(const std::map<std::string, Holder>& holders) {
  std::string out;
  for (const auto& [stream, h] : holders)
    out += stream + " -> connection " + std::to_string(h.second) + "; ";
  return out;
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
  // relay.exactly_once: each SIGKILLed relay's successor resumes after what
  // Kafka already holds of its streams.
  EXPECT_EQ(dups, 0u) << "exactly-once relay published " << dups << " cells twice";
  // The same, as any read_committed client reads the topic (no group).
  const size_t topic_dups = TopicDuplicates(c->config);
  EXPECT_EQ(topic_dups, 0u) << "read_committed readers of the topic see cells twice";
  if (dups != 0 || topic_dups != 0) {
    for (int round = 0; round < 3; ++round)
      std::cout << "--- relay " << round << " warnings ---\n"
                << testing::WarningLinesOf(logs.File("relay-" + std::to_string(round) + ".log"));
    std::cout << "--- final relay warnings ---\n"
              << testing::WarningLinesOf(logs.File("relay-final.log"));
  }
  EXPECT_EQ(last.Terminate(15s), 0) << last.Log();
}

// A relay stopped (SIGSTOP, as by a long GC pause or a frozen VM) while it
// publishes: the server keeps its connections, so its locks and its open
// batch are released here by killing them (what wait_timeout does later). A
// second relay takes every stream over; then the first is resumed (SIGCONT)
// in the middle of its batch. The broker has fenced its transactional
// producers (the new owner's InitTransactions), so nothing it publishes
// after resuming reaches a read_committed reader: every cell arrives once.
TEST(RelayProcessTest, SigstoppedRelayResumedAfterATakeoverPublishesNothingReadersSee) {
  auto c = MakeCluster("rt_stop", Broker());
  ASSERT_TRUE(c);
  testing::TempDir logs("relay-stop");
  Collector collector(c->config);
  Writers writers(c->store.get(), 4, 0, 3, "stop");
  RelayProcess a(c->config_path, "stop-a", logs.File("a.log"));
  ASSERT_TRUE(WaitFor([&] { return collector.distinct() > 300; }, 30s)) << a.Log();

  ASSERT_EQ(::kill(a.pid(), SIGSTOP), 0);
  const size_t killed = KillMysqlConnectionsOf(a.pid(), c->config);
  EXPECT_GE(killed, 2u) << "the stopped relay held no MySQL connections";
  const size_t at_stop = collector.distinct();
  RelayProcess b(c->config_path, "stop-b", logs.File("b.log"));
  ASSERT_TRUE(WaitFor(
      [&] { return b.OwnedFromLog(c->config).size() == AllStreams(c->config).size(); }, 30s))
      << "the second relay did not take every stream:\n"
      << b.Log();
  ASSERT_TRUE(WaitFor([&] { return collector.distinct() > at_stop + 300; }, 30s)) << b.Log();

  ASSERT_EQ(::kill(a.pid(), SIGCONT), 0);
  // The resumed relay finds out (a fenced transaction, dead connections, lost
  // locks) and gives its streams up.
  EXPECT_TRUE(WaitFor([&] { return a.OwnedFromLog(c->config).empty(); }, 60s))
      << "the resumed relay still believes it owns streams:\n"
      << a.Log();
  const size_t at_resume = collector.distinct();
  ASSERT_TRUE(WaitFor([&] { return collector.distinct() > at_resume + 300; }, 30s)) << b.Log();
  const OnceFigures f = ExpectEveryWrittenCellOnce(writers, collector, c->config, 60s);
  std::cout << "[ relay ] SIGSTOP/SIGCONT: " << f.written << " cells, " << killed
            << " MySQL connections of the stopped relay killed, " << f.dups
            << " duplicates seen by a consumer, " << f.topic_dups << " in the topic\n";
  if (f.dups != 0 || f.topic_dups != 0)
    std::cout << "--- resumed relay warnings ---\n"
              << testing::WarningLinesOf(logs.File("a.log")) << "--- new owner warnings ---\n"
              << testing::WarningLinesOf(logs.File("b.log"));
  EXPECT_EQ(b.Terminate(15s), 0) << b.Log();
  a.Terminate(15s);
}

TEST(RelayProcessTest, TwoRelaysSplitTheStreamsAndTheSurvivorTakesOver) {
  auto c = MakeCluster("rt_two", Broker());
  ASSERT_TRUE(c);
  const ClusterConfig& config = c->config;
  const std::set<std::string> all = AllStreams(config);
  ASSERT_EQ(all.size(), kHosts * 2) << "hosts x datastores (trips, users)";
  testing::TempDir logs("relay-two");
  Collector collector(config);
  Writers writers(c->store.get(), 2, 0, 2, "two");

  RelayProcess a(c->config_path, "relay-a", logs.File("a.log"));
  // A alone takes every stream (on one lock connection per host).
  std::set<Holder> holders_a;
  std::map<std::string, Holder> holders;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto h = HoldersWhenAllOwned(config);
        if (!h || a.OwnedFromLog(config) != all) return false;
        holders = *h;
        holders_a.clear();
        for (const auto& [stream, holder] : holders) holders_a.insert(holder);
        return true;
      },
      20s))
      << a.Log();
  EXPECT_EQ(holders_a.size(), kHosts) << Print(holders);

  RelayProcess b(c->config_path, "relay-b", logs.File("b.log"));
  // They split the streams: each relay owns half, every stream is locked, and
  // each relay's log agrees with the locks (A's streams on A's connections,
  // B's on others).
  std::set<std::string> owned_a, owned_b;
  const bool split = WaitFor(
      [&] {
        auto h = HoldersWhenAllOwned(config);
        if (!h) return false;
        holders = *h;
        owned_a = a.OwnedFromLog(config);
        owned_b = b.OwnedFromLog(config);
        if (owned_a.size() != all.size() / 2 || owned_b.size() != all.size() / 2) return false;
        for (const auto& [stream, holder] : holders) {
          const bool by_a = holders_a.count(holder) > 0;
          if (owned_a.count(stream) != (by_a ? 1u : 0u)) return false;
          if (owned_b.count(stream) != (by_a ? 0u : 1u)) return false;
        }
        return true;
      },
      20s);
  ASSERT_TRUE(split) << "A's log says " << ::testing::PrintToString(owned_a) << ", B's log says "
                     << ::testing::PrintToString(owned_b) << "; locks: " << Print(holders)
                     << "\nA:\n"
                     << a.Log() << "\nB:\n"
                     << b.Log();
  std::vector<std::string> both;
  std::set_intersection(owned_a.begin(), owned_a.end(), owned_b.begin(), owned_b.end(),
                        std::back_inserter(both));
  EXPECT_THAT(both, IsEmpty()) << "streams owned by both relays";
  std::set<std::string> either = owned_a;
  either.insert(owned_b.begin(), owned_b.end());
  EXPECT_EQ(either, all);
  std::cout << "[ relay ] split: A owns " << ::testing::PrintToString(owned_a) << ", B owns "
            << ::testing::PrintToString(owned_b) << "\n";
  const std::vector<RelayStreamStatus> status = ReadRelayStatus(*c->store);
  EXPECT_EQ(status.size(), all.size());
  for (const auto& st : status)
    EXPECT_TRUE(st.owned) << "relay status: stream " << st.host << "/" << st.datastore
                          << " not owned " << st.error;

  // Kill A: B takes every stream over within seconds.
  const size_t written_before_kill = writers.count();
  a.Kill();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto h = HoldersWhenAllOwned(config);
        if (!h) return false;
        holders = *h;
        for (const auto& [stream, holder] : holders)
          if (holders_a.count(holder)) return false;
        return true;
      },
      10s))
      << "B did not take over A's streams; locks: " << Print(holders) << "\nB:\n"
      << b.Log();
  const long long takeover_ms = MillisSince(killed_at);
  std::cout << "[ relay ] B owned every stream " << takeover_ms << " ms after A was killed\n";
  RecordProperty("takeover_ms", std::to_string(takeover_ms));
  EXPECT_TRUE(WaitFor([&] { return b.OwnedFromLog(config) == all; }, 5s)) << b.Log();

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
  EXPECT_EQ(dups, 0u) << "exactly-once relays published " << dups << " cells twice";
  EXPECT_EQ(b.Terminate(15s), 0) << b.Log();
}

}  // namespace
}  // namespace cellar::relaytest
