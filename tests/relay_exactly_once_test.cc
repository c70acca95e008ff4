// The exactly-once change log (relay.exactly_once, changelog/internal/
// stream_claim.h): a relay that lost its stream without noticing is fenced,
// and a consumer sees every committed cell once, per row in order. SIGKILLs
// and two relays sharing streams: relay_process_test.cc.
#include <algorithm>
#include <iostream>

#include "changelog/kafka/kafka_producer.h"
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

// Another producer initialises the transactional.id of a stream the relay
// owns (as an operator's tool or a misconfigured second deployment would):
// the broker fences the relay's producer, whose next commit fails with a
// fatal error. The relay rolls the batch back, builds new producers (whose
// InitTransactions fences the intruders in turn) and goes on; every cell
// arrives once.
TEST(RelayExactlyOnceTest, FencedProducerIsRebuiltAndNothingIsLostOrDoubled) {
  auto c = MakeCluster("rt_txn_fatal", Broker());
  ASSERT_TRUE(c);
  Collector collector(c->config);
  Writers writers(c->store.get(), 4, 0, 3, "fatal");
  Relay relay(c->store.get(), "fatal");
  ASSERT_TRUE(relay.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return collector.distinct() > 300; }, 60s));

  // Both of the stream's producers (they take turns) are fenced.
  std::vector<std::unique_ptr<KafkaProducer>> intruders;
  for (const std::string& txn_id : RelayTransactionalIds(
           c->config, c->config.HostDatabase(c->config.mysql.hosts[0]), kDatastore)) {
    ProducerOptions intruder_options;
    intruder_options.settings = {{"transactional.id", txn_id}, {"client.id", "intruder"}};
    auto intruder = KafkaProducer::Create(c->config.kafka, intruder_options);
    ASSERT_TRUE(intruder.ok()) << intruder.status().ToString();
    const Status fenced = (*intruder)->InitTransactions(30000);
    ASSERT_TRUE(fenced.ok()) << fenced.ToString();
    intruders.push_back(std::move(intruder).value());
  }
  EXPECT_TRUE(WaitFor([&] { return relay.stats().replaced_producers >= 1; }, 30s))
      << "the relay never rebuilt its fenced producer";
  const size_t after = collector.distinct();
  ASSERT_TRUE(WaitFor([&] { return collector.distinct() > after + 300; }, 30s))
      << "nothing published after the producer was rebuilt";
  const OnceFigures f = ExpectEveryWrittenCellOnce(writers, collector, c->config, 60s);
  std::cout << "[ relay ] fenced producer: " << f.written << " cells, "
            << relay.stats().replaced_producers << " producer(s) rebuilt, " << f.dups
            << " duplicates seen by a consumer, " << f.topic_dups << " in the topic\n";
  relay.Stop();
}

// The broker crashes (SIGKILL: no controlled shutdown) while the relay's
// stream transactions are open, and starts again on its data. Open
// transactions are aborted (by the coordinator, or by the relay's new
// producer: librdkafka 2.0.2's idempotent producer may fail fatally with
// OUT_OF_ORDER_SEQUENCE after a restart, and the relay then builds a new
// one); every cell still arrives once, per row in order.
TEST(RelayExactlyOnceTest, BrokerCrashInTheMiddleOfTransactionsLosesAndDoublesNothing) {
  auto c = MakeCluster("rt_txn_crash", Broker());
  ASSERT_TRUE(c);
  Collector collector(c->config);
  Writers writers(c->store.get(), 4, 0, 3, "crash");
  Relay relay(c->store.get(), "crash");
  ASSERT_TRUE(relay.Start().ok());
  struct BrokerUp {  // brings the broker back even if an assertion fails
    ~BrokerUp() { Broker().SetDown(false); }
  } broker_up;
  {
    ASSERT_TRUE(WaitFor([&] { return collector.distinct() > 300; }, 60s))
        << "the relay published nothing before the crash";
    // Mid-publishing: batches of a busy stream follow each other back to back.
    const uint64_t published = relay.stats().published;
    ASSERT_TRUE(WaitFor([&] { return relay.stats().published > published; }, 10s));
    Broker().Kill();
    const size_t while_down = writers.count();
    ASSERT_TRUE(WaitFor([&] { return writers.count() > while_down + 100; }, 30s))
        << "writes stopped while the broker was down";
    Broker().SetDown(false);
  }
  const size_t after = collector.distinct();
  ASSERT_TRUE(WaitFor([&] { return collector.distinct() > after + 300; }, 60s));
  const OnceFigures f = ExpectEveryWrittenCellOnce(writers, collector, c->config, 90s);
  const RelayStats stats = relay.stats();
  std::cout << "[ relay ] broker crash: " << f.written << " cells, " << f.dups
            << " duplicates seen by a consumer, " << f.topic_dups << " in the topic; "
            << stats.failed_fenced_batches << " batches rolled back, " << stats.replaced_producers
            << " producers rebuilt after a fatal error\n";
  relay.Stop();
}

}  // namespace
}  // namespace cellar::relaytest
