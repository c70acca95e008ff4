// What Kafka transactions do with Debian's librdkafka 2.0.2, on Apache Kafka
// (the broker users run) and on librdkafka's mock cluster (MockBroker, which
// only `cellar-bench --mock-broker` still uses).
//
// On Apache Kafka (3.9): a read_committed consumer never sees the records of
// an aborted transaction, and a second producer with the same
// transactional.id fences the first: the zombie's commit fails with a fatal
// error and nothing it produced becomes visible. The relay's exactly-once
// mode rests on this (changelog/relay.h).
//
// On the mock cluster:
//  - records of an aborted transaction are delivered to read_committed
//    consumers (the mock writes no transaction markers and reports the last
//    stable offset as the partition end);
//  - a second producer with the same transactional.id does not fence the
//    first (InitProducerId gives it a new producer id instead of bumping the
//    epoch of the existing one), so a zombie keeps committing.
// If a newer librdkafka gives the mock these semantics, its test fails.
#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "testing/kafka_broker.h"
#include "testing/mock_broker.h"

namespace cellar::testing {
namespace {

std::unique_ptr<RdKafka::Conf> Conf(const std::map<std::string, std::string>& kv) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  for (const auto& [k, v] : kv)
    EXPECT_EQ(conf->set(k, v, err), RdKafka::Conf::CONF_OK) << k << "=" << v << ": " << err;
  return conf;
}

std::unique_ptr<RdKafka::Producer> TransactionalProducer(const std::string& bootstrap) {
  std::string err;
  auto conf = Conf({{"bootstrap.servers", bootstrap}, {"transactional.id", "probe-stream"}});
  std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf.get(), err));
  EXPECT_NE(p, nullptr) << err;
  if (!p) return p;
  std::unique_ptr<RdKafka::Error> e(p->init_transactions(10000));
  EXPECT_EQ(e, nullptr) << e->str();
  return p;
}

// Produces `value` in one transaction, committed or aborted. The error of
// commit (fencing), or nullptr.
std::unique_ptr<RdKafka::Error> Transaction(RdKafka::Producer& p, const std::string& value,
                                            bool commit) {
  std::unique_ptr<RdKafka::Error> e(p.begin_transaction());
  if (e) return e;
  EXPECT_EQ(p.produce("probe.txn", 0, RdKafka::Producer::RK_MSG_COPY,
                      const_cast<char*>(value.data()), value.size(), nullptr, 0, 0, nullptr),
            RdKafka::ERR_NO_ERROR);
  // On the broker before the transaction ends (abort would purge a queued record).
  EXPECT_EQ(p.flush(10000), RdKafka::ERR_NO_ERROR);
  if (commit) return std::unique_ptr<RdKafka::Error>(p.commit_transaction(10000));
  return std::unique_ptr<RdKafka::Error>(p.abort_transaction(10000));
}

std::set<std::string> ReadCommitted(const std::string& bootstrap) {
  std::string err;
  auto conf = Conf({{"bootstrap.servers", bootstrap},
                    {"group.id", "probe-reader"},
                    {"isolation.level", "read_committed"},
                    {"enable.partition.eof", "true"}});
  std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
  EXPECT_NE(c, nullptr) << err;
  std::set<std::string> values;
  if (!c) return values;
  std::vector<RdKafka::TopicPartition*> parts{
      RdKafka::TopicPartition::create("probe.txn", 0, RdKafka::Topic::OFFSET_BEGINNING)};
  EXPECT_EQ(c->assign(parts), RdKafka::ERR_NO_ERROR);
  RdKafka::TopicPartition::destroy(parts);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> m(c->consume(200));
    if (m->err() == RdKafka::ERR__PARTITION_EOF) break;
    if (m->err() == RdKafka::ERR_NO_ERROR)
      values.insert(std::string(static_cast<const char*>(m->payload()), m->len()));
  }
  c->close();
  return values;
}

TEST(KafkaTransactionsProbe, ApacheKafkaHidesAbortedRecordsAndFencesAZombie) {
  auto broker = KafkaBroker::Start();
  const Status created = broker->CreateTopic("probe.txn", 1);
  ASSERT_TRUE(created.ok()) << created.ToString();
  auto first = TransactionalProducer(broker->bootstrap());
  ASSERT_TRUE(first);
  ASSERT_EQ(Transaction(*first, "committed", true), nullptr);
  ASSERT_EQ(Transaction(*first, "aborted", false), nullptr);

  auto second = TransactionalProducer(broker->bootstrap());
  ASSERT_TRUE(second);
  ASSERT_EQ(Transaction(*second, "new owner", true), nullptr);
  std::unique_ptr<RdKafka::Error> zombie = Transaction(*first, "zombie", true);
  ASSERT_NE(zombie, nullptr) << "Apache Kafka let a zombie producer commit";
  std::printf("zombie's commit: %s (fatal %d)\n", zombie->str().c_str(), zombie->is_fatal());

  const std::set<std::string> seen = ReadCommitted(broker->bootstrap());
  EXPECT_TRUE(seen.count("committed"));
  EXPECT_TRUE(seen.count("new owner"));
  EXPECT_FALSE(seen.count("aborted")) << "a read_committed consumer saw an aborted record";
  EXPECT_FALSE(seen.count("zombie")) << "a read_committed consumer saw the zombie's record";
}

TEST(KafkaTransactionsProbe, MockBrokerNeitherHidesAbortedRecordsNorFencesAZombie) {
  auto broker = MockBroker::Start(1);
  ASSERT_TRUE(broker->CreateTopic("probe.txn", 1).ok());
  auto first = TransactionalProducer(broker->bootstrap());
  ASSERT_TRUE(first);
  ASSERT_EQ(Transaction(*first, "committed", true), nullptr);
  ASSERT_EQ(Transaction(*first, "aborted", false), nullptr);

  // A new owner of the same transactional.id: on Kafka, `first` is now fenced.
  auto second = TransactionalProducer(broker->bootstrap());
  ASSERT_TRUE(second);
  ASSERT_EQ(Transaction(*second, "new owner", true), nullptr);
  std::unique_ptr<RdKafka::Error> zombie = Transaction(*first, "zombie", true);

  const std::set<std::string> seen = ReadCommitted(broker->bootstrap());
  EXPECT_TRUE(seen.count("committed"));
  EXPECT_TRUE(seen.count("new owner"));
  EXPECT_TRUE(seen.count("aborted"))
      << "the local broker now hides aborted records from read_committed consumers";
  EXPECT_EQ(zombie, nullptr) << "the local broker now fences a zombie producer: " << zombie->str();
  EXPECT_TRUE(seen.count("zombie"));
}

}  // namespace
}  // namespace cellar::testing
