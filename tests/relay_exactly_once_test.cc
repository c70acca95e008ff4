// The exactly-once change log (relay.exactly_once, changelog/internal/
// stream_claim.h): a relay that lost its stream without noticing is fenced,
// and a consumer sees every committed cell once, per row in order. SIGKILLs
// and two relays sharing streams: relay_process_test.cc.
#include <algorithm>
#include <iostream>

#include "changelog/relay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/relay_test_util.h"

namespace cellar::relaytest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

bool Owns(const Relay& relay, const std::string& stream) {
  const auto owned = relay.stats().owned_streams;
  return std::find(owned.begin(), owned.end(), stream) != owned.end();
}

// The zombie relay never checks its locks again (lock_retry_ms of ten
// minutes); its lock connection on host 0 is killed on the server, so another
// relay takes host 0's streams while the zombie still believes it owns them
// and keeps reading and producing. The zombie must publish nothing more of
// them: its next batch finds the new owner's epoch.
TEST(RelayExactlyOnceTest, RelayThatLostItsStreamUnnoticedIsFencedAndNothingIsDoubled) {
  auto c = MakeCluster("rt_fence", Broker());
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->config.relay.exactly_once);
  Collector collector(c->config);
  Writers writers(c->store.get(), 4, 0, 3, "fence");

  ClusterConfig zombie_config = c->config;
  zombie_config.relay.lock_retry_ms = 600000;
  auto zombie_store = CellStore::Open(zombie_config);
  Relay zombie(zombie_store.get(), "zombie");
  ASSERT_TRUE(zombie.Start().ok());
  const std::string stream = StreamName(c->config, 0, kDatastore);
  ASSERT_TRUE(WaitFor([&] { return Owns(zombie, stream); }, 30s));
  ASSERT_TRUE(WaitFor([&] { return collector.HostMaxAddedId(0) > 0; }, 30s));

  const auto holders = StreamLockHolders(c->config);
  ASSERT_TRUE(holders.count(stream) && holders.at(stream)) << "nobody holds " << stream;
  {
    auto admin = MysqlConnection::Connect(EndpointFor(c->config, c->config.mysql.hosts[0]));
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    ASSERT_TRUE(
        (*admin)->ExecuteDdl("KILL CONNECTION " + std::to_string(*holders.at(stream))).ok());
  }
  Relay owner(c->store.get(), "owner");
  ASSERT_TRUE(owner.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return Owns(owner, stream); }, 30s)) << "no relay took " << stream;
  EXPECT_TRUE(WaitFor([&] { return zombie.stats().fenced >= 1; }, 30s))
      << "the zombie was never fenced off " << stream;
  EXPECT_FALSE(Owns(zombie, stream));

  // Writes keep going through the hand-over; then everything must arrive once.
  const size_t after_fence = writers.count();
  ASSERT_TRUE(WaitFor([&] { return writers.count() > after_fence + 200; }, 30s));
  writers.Stop();
  writers.Join();
  EXPECT_EQ(writers.failures(), 0u) << writers.first_error();
  const std::vector<CellId> written = writers.Written();
  const std::vector<CellId> missing = WaitForAll(collector, written, 60s);
  EXPECT_THAT(missing, IsEmpty()) << "never published: " << Describe(missing);
  const auto violations = OrderViolations(collector.Events());
  EXPECT_THAT(violations, IsEmpty())
      << violations.size()
      << " out-of-order versions, first: " << (violations.empty() ? "" : violations.front());
  EXPECT_TRUE(WaitFor([&] { return AllCheckpointsAtHead(*c->store); }, 20s));
  const size_t dups = collector.total() - collector.distinct();
  std::cout << "[ relay ] fenced hand-over: " << written.size() << " cells, "
            << collector.distinct() << " distinct events, " << dups << " duplicates; zombie "
            << "fenced " << zombie.stats().fenced << " stream(s), owner skipped "
            << owner.stats().skipped_already_published << " already published\n";
  EXPECT_EQ(dups, 0u);
  RecordProperty("duplicates", std::to_string(dups));
  owner.Stop();
  zombie.Stop();
}

}  // namespace
}  // namespace cellar::relaytest
