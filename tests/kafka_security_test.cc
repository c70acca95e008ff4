// Kafka over TLS and SASL for real: a private Apache Kafka broker with a
// SASL_SSL listener (SCRAM-SHA-512, a certificate for IP 127.0.0.1 signed by a
// CA the test makes with the openssl CLI) besides its PLAINTEXT one.
//
// Proves that:
//  - the whole pipeline runs through the SASL_SSL listener alone, configured
//    only by the cluster YAML's kafka.brokers and kafka.properties: cells
//    written to the store are published by cellar-relay, delivered to a
//    webhook by cellar-trigger and indexed by cellar-indexer (queried back);
//  - a wrong password, a broker certificate signed by an untrusted CA, and a
//    kafka.brokers address nobody listens on each stop cellar-relay,
//    cellar-indexer and cellar-trigger at start: every process exits non-zero
//    within a bounded time with an error naming the bootstrap address and
//    the cause, and nothing is published (the change-log topics' end
//    offsets, read through the PLAINTEXT listener, stay 0).
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "changelog/cell_event.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/free_port.h"
#include "testing/wait_for.h"
#include "testing/webhook_sink.h"
#include "tests/kafka_processes.h"

namespace cellar::kafkaproc {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::WaitFor;

// How long a process may take to give up at start (its start-up check waits
// up to 10 s for a broker that does not answer).
constexpr auto kExitBound = 30s;

// Starts relay, indexer and trigger on a cluster whose Kafka cannot be used
// and expects each to exit non-zero within kExitBound, its output naming
// `bootstrap` and every one of `causes` (any one of a group of spellings
// when a cause has several). A cell is written first, so that a relay that
// did connect would publish it; nothing may be published.
void ExpectEveryWorkerStopsAtStart(const std::string& prefix, const std::string& brokers,
                                   const std::map<std::string, std::string>& properties,
                                   const std::vector<std::string>& causes,
                                   bool topics_on_test_broker = true) {
  auto c = MakeCluster(prefix, brokers, properties, topics_on_test_broker);
  ASSERT_TRUE(c);
  auto put =
      c->store->Put("trips", CellWrite{Uuid::Random(), "BASE", 1, TripBody(Uuid::Random(), 1)});
  ASSERT_TRUE(put.ok()) << put.status().ToString();

  const auto start = std::chrono::steady_clock::now();
  Workers w(*c, TriggersFile(prefix, "http://127.0.0.1:9/hook"));
  for (auto& [name, p] : w.All()) ASSERT_TRUE(p->running()) << name;
  std::map<std::string, long long> exit_ms;
  const bool all_exited = WaitFor(
      [&] {
        for (auto& [name, p] : w.All())
          if (!exit_ms.count(name) && p->Exited())
            exit_ms[name] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
        return exit_ms.size() == 3;
      },
      kExitBound, 50ms);
  for (auto& [name, p] : w.All()) {
    const std::string log = p->Log();
    EXPECT_TRUE(exit_ms.count(name))
        << name << " still runs after " << kExitBound.count() << " s:\n"
        << log;
    if (!exit_ms.count(name)) continue;
    EXPECT_NE(p->exit_code(), 0) << name << ":\n" << log;
    EXPECT_THAT(log, HasSubstr("kafka.brokers")) << name;
    EXPECT_THAT(log, HasSubstr(brokers)) << name;
    for (const std::string& cause : causes) EXPECT_THAT(log, HasSubstr(cause)) << name;
    // The line that names the cause, for the record.
    std::istringstream lines(log);
    std::string line, cause_line;
    while (std::getline(lines, line))
      if (line.find("kafka.brokers=") != std::string::npos) cause_line = line;
    std::cout << "[ kafka-security ] " << prefix << ": " << name << " exited " << p->exit_code()
              << " after " << exit_ms[name] << " ms: " << cause_line << "\n";
  }
  ASSERT_TRUE(all_exited);
  if (topics_on_test_broker) {
    const std::vector<int64_t> ends = EndOffsets(*c);
    ASSERT_FALSE(ends.empty());
    EXPECT_EQ(Sum(ends), 0) << "something was published";
  }
}

// ---------------------------------------------------------------------------

TEST(KafkaSecurityTest, PipelineRunsEndToEndThroughSaslSslOnly) {
  auto c = MakeCluster("ks_e2e", Env().broker->sasl_ssl_bootstrap(),
                       SaslSslProperties(kPassword, Env().dir->File("ca.pem")));
  ASSERT_TRUE(c);
  ASSERT_EQ(c->config.kafka.brokers, Env().broker->sasl_ssl_bootstrap());

  std::mutex mu;
  std::set<std::string> delivered;  // row keys
  auto sink = testing::WebhookSink::Start([&](const std::string&, const std::string& body) {
    auto ev = DecodeCellEvent(body);
    if (!ev.ok()) return 422;
    std::lock_guard<std::mutex> lock(mu);
    delivered.insert(ev->cell.row_key.ToString());
    return 200;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  Workers w(*c, TriggersFile(c->prefix, (*sink)->Url("/hook")));
  for (auto& [name, p] : w.All()) ASSERT_TRUE(p->running()) << name;

  const Uuid driver = Uuid::Random();
  constexpr int kTrips = 20;
  std::set<std::string> rows;
  for (int i = 0; i < kTrips; ++i) {
    const Uuid row = Uuid::Random();
    auto put = c->store->Put("trips", CellWrite{row, "BASE", 1, TripBody(driver, i)});
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    rows.insert(row.ToString());
  }

  // The webhook got every trip (relay -> Kafka -> cellar-trigger).
  size_t got = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        got = std::count_if(rows.begin(), rows.end(),
                            [&](const std::string& r) { return delivered.count(r) > 0; });
        return got == rows.size();
      },
      60s, 50ms))
      << "webhook got " << got << " of " << rows.size() << "\n"
      << w.Logs();

  // The index has every trip (relay -> Kafka -> cellar-indexer).
  ExpectIndexedTrips(*c, w, driver.ToString(), rows, 60s);

  // What the relay published is in the topic, read through PLAINTEXT.
  EXPECT_GE(Sum(EndOffsets(*c)), kTrips);
  for (auto& [name, p] : w.All()) EXPECT_EQ(p->Terminate(20s), 0) << name << ":\n" << p->Log();
}

TEST(KafkaSecurityTest, WrongPasswordStopsEveryWorkerAtStart) {
  ExpectEveryWorkerStopsAtStart("ks_pw", Env().broker->sasl_ssl_bootstrap(),
                                SaslSslProperties("not-the-password", Env().dir->File("ca.pem")),
                                {"authentication failed"});
}

TEST(KafkaSecurityTest, UntrustedBrokerCertificateStopsEveryWorkerAtStart) {
  ExpectEveryWorkerStopsAtStart("ks_ca", Env().broker->sasl_ssl_bootstrap(),
                                SaslSslProperties(kPassword, Env().dir->File("other-ca.pem")),
                                {"certificate verify failed"});
}

TEST(KafkaSecurityTest, NoBrokerAtTheAddressStopsEveryWorkerAtStart) {
  const std::string nobody = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  ExpectEveryWorkerStopsAtStart("ks_none", nobody, {}, {"did not answer", "Connection refused"},
                                /*topics_on_test_broker=*/false);
}

}  // namespace
}  // namespace cellar::kafkaproc
