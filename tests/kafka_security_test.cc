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
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "changelog/cell_event.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"
#include "testing/child_process.h"
#include "testing/free_port.h"
#include "testing/kafka_broker.h"
#include "testing/private_mariadb.h"
#include "testing/test_certificates.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"
#include "testing/webhook_sink.h"

#ifndef CELLAR_RELAY_BIN
#error \
    "CELLAR_RELAY_BIN, CELLAR_INDEXER_BIN, CELLAR_TRIGGER_BIN and CELLAR_SOURCE_DIR come from tests/CMakeLists.txt"
#endif

namespace cellar {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::WaitFor;

constexpr uint32_t kShards = 8;
constexpr int kPartitions = 4;
constexpr const char* kUser = "cellar-pipeline";
constexpr const char* kPassword = "s3cret-pipeline-pw";
// How long a process may take to give up at start (its start-up check waits
// up to 10 s for a broker that does not answer).
constexpr auto kExitBound = 30s;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The certificates, one MariaDB and one broker with a SASL_SSL listener, for
// every test of the binary (started on the main thread).
class SecureKafkaEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dir = std::make_unique<testing::TempDir>("kafka-security");
    for (const Status& made :
         {testing::MakeTestCa(*dir, "ca"), testing::MakeTestCa(*dir, "other-ca"),
          testing::MakeTestCertificate(*dir, "broker", "ca", "IP:127.0.0.1")})
      ASSERT_TRUE(made.ok()) << made.ToString();
    // Kafka's PEM keystore: the PKCS#8 key, then the certificate chain.
    const std::string keystore = dir->File("broker-keystore.pem");
    {
      std::ofstream out(keystore, std::ios::binary);
      out << ReadFile(dir->File("broker-key.pem")) << ReadFile(dir->File("broker.pem"))
          << ReadFile(dir->File("ca.pem"));
      ASSERT_TRUE(out.good()) << "cannot write " << keystore;
    }
    try {
      db = testing::PrivateMariaDb::Start("ksec");
      testing::KafkaBrokerOptions o;
      o.label = "kafka-sasl-ssl";
      o.sasl_ssl = testing::KafkaBrokerOptions::SaslSsl{keystore, kUser, kPassword};
      broker = testing::KafkaBroker::Start(std::move(o));
    } catch (const std::exception& e) {
      FAIL() << "cannot start the test's servers: " << e.what();
    }
    ASSERT_FALSE(broker->sasl_ssl_bootstrap().empty());
    ASSERT_NE(broker->sasl_ssl_bootstrap(), broker->bootstrap());
  }
  void TearDown() override {
    broker.reset();
    db.reset();
    dir.reset();
  }

  std::unique_ptr<testing::TempDir> dir;
  std::unique_ptr<testing::PrivateMariaDb> db;
  std::unique_ptr<testing::KafkaBroker> broker;
};

SecureKafkaEnv* const env =
    static_cast<SecureKafkaEnv*>(::testing::AddGlobalTestEnvironment(new SecureKafkaEnv));

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// kafka.properties for the SASL_SSL listener, trusting `ca_file`.
std::map<std::string, std::string> SaslSslProperties(const std::string& password,
                                                     const std::string& ca_file) {
  return {{"security.protocol", "SASL_SSL"},
          {"sasl.mechanisms", "SCRAM-SHA-512"},
          {"sasl.username", kUser},
          {"sasl.password", password},
          {"ssl.ca.location", ca_file}};
}

// One test's cluster: host database <prefix>_ksec on the binary's MariaDB,
// kafka.brokers = `brokers` with `properties`, topics <prefix>.{trips,users}.cells.
struct Cluster {
  std::string prefix;
  std::string config_path;
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
};

// Writes the cluster YAML, creates the topics (through the PLAINTEXT
// listener, as an operator's tooling would) when `create_topics`, and
// initialises the store. Null after a test failure.
std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, const std::string& brokers,
                                     const std::map<std::string, std::string>& properties,
                                     bool create_topics = true) {
  auto c = std::make_unique<Cluster>();
  c->prefix = prefix;
  std::string yaml =
      testing::MakeKafkaClusterYaml({env->db.get()}, kShards, brokers, prefix, kPartitions);
  std::string props;
  for (const auto& [k, v] : properties) props += "    " + k + ": " + Quote(v) + "\n";
  if (!props.empty()) {
    const size_t at = yaml.find('\n', yaml.find("  partitions:", yaml.find("kafka:\n")));
    yaml.insert(at + 1, "  properties:\n" + props);
  }
  yaml += "relay:\n  lock_retry_ms: 200\n  poll_max_ms: 20\n";
  c->config_path = env->dir->File(prefix + ".yaml");
  {
    std::ofstream out(c->config_path, std::ios::binary);
    out << yaml;
  }
  auto cfg = LoadClusterConfig(c->config_path);
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << yaml;
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  EXPECT_EQ(c->config.kafka.properties, properties);
  if (create_topics)
    for (const char* ds : {"trips", "users"}) {
      const Status s = env->broker->CreateTopic(ChangeLogTopic(c->config.kafka, ds), kPartitions);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return nullptr;
    }
  c->store = CellStore::Open(c->config);
  const Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? std::move(c) : nullptr;
}

// A trigger file with one webhook trigger on trips BASE posting to `url`.
std::string TriggersFile(const std::string& prefix, const std::string& url) {
  const std::string path = env->dir->File(prefix + "-triggers.yaml");
  std::ofstream out(path, std::ios::binary);
  out << "triggers:\n"
         "  - name: hook\n"
         "    datastore: trips\n"
         "    column: BASE\n"
         "    webhook: { url: "
      << Quote(url)
      << ", timeout_ms: 5000 }\n"
         "    retry: { max_attempts: 10, initial_backoff_ms: 20, max_backoff_ms: 200 }\n";
  return path;
}

const std::string kIndexFile =
    std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes/driver_partner_index.yaml";

// The three worker processes of a cluster, started at once.
struct Workers {
  std::unique_ptr<ChildProcess> relay, indexer, trigger;
  std::string relay_log, indexer_log, trigger_log;

  Workers(const Cluster& c, const std::string& triggers_path) {
    relay_log = env->dir->File(c.prefix + "-relay.log");
    indexer_log = env->dir->File(c.prefix + "-indexer.log");
    trigger_log = env->dir->File(c.prefix + "-trigger.log");
    relay = std::make_unique<ChildProcess>(
        std::vector<std::string>{CELLAR_RELAY_BIN, "--config", c.config_path, "--id",
                                 c.prefix + "-relay"},
        relay_log);
    indexer = std::make_unique<ChildProcess>(
        std::vector<std::string>{CELLAR_INDEXER_BIN, "--config", c.config_path, "--indexes",
                                 kIndexFile},
        indexer_log);
    trigger = std::make_unique<ChildProcess>(
        std::vector<std::string>{CELLAR_TRIGGER_BIN, "--config", c.config_path, "--triggers",
                                 triggers_path},
        trigger_log);
  }
  std::vector<std::pair<std::string, ChildProcess*>> All() {
    return {{"cellar-relay", relay.get()},
            {"cellar-indexer", indexer.get()},
            {"cellar-trigger", trigger.get()}};
  }
};

// The end offset of every partition of the cluster's change-log topics, read
// through the broker's PLAINTEXT listener; empty after a test failure.
std::vector<int64_t> EndOffsets(const Cluster& c) {
  ClusterConfig plain = c.config;
  plain.kafka.brokers = env->broker->bootstrap();
  plain.kafka.properties.clear();
  plain.kafka.property_origins.clear();
  const std::vector<std::string> topics = {ChangeLogTopic(c.config.kafka, "trips"),
                                           ChangeLogTopic(c.config.kafka, "users")};
  auto lag = ReadGroupLag(plain, c.prefix + ".offsets-probe", topics);
  EXPECT_TRUE(lag.ok()) << lag.status().ToString();
  if (!lag.ok()) return {};
  std::vector<int64_t> ends;
  for (const PartitionLag& p : lag->partitions) ends.push_back(p.end);
  EXPECT_EQ(ends.size(), topics.size() * kPartitions);
  return ends;
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// A BASE body the driver_partner_index indexes.
nlohmann::json TripBody(const Uuid& driver, int i) {
  return {{"driver_partner_uuid", driver.ToString()},
          {"city_uuid", "5c4e0c1a-8a0e-4c2a-9d64-0c6a3f1b2e01"},
          {"trip_created_at",
           "2026-01-01T00:00:" + std::string(i < 10 ? "0" : "") + std::to_string(i) + "Z"},
          {"fare", {{"total", 10.5 + i}}},
          {"status", "completed"}};
}

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
  auto c = MakeCluster("ks_e2e", env->broker->sasl_ssl_bootstrap(),
                       SaslSslProperties(kPassword, env->dir->File("ca.pem")));
  ASSERT_TRUE(c);
  ASSERT_EQ(c->config.kafka.brokers, env->broker->sasl_ssl_bootstrap());

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

  auto logs = [&] {
    std::string out;
    for (auto& [name, p] : w.All()) out += "--- " + name + ":\n" + p->Log() + "\n";
    return out;
  };
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
      << logs();

  // The index has every trip (relay -> Kafka -> cellar-indexer).
  auto defs = LoadIndexDefinitions(kIndexFile, c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  IndexReader reader(c->store.get(), *defs, 0);
  IndexQuery q;
  q.index = "driver_partner_index";
  q.shard_value = driver.ToString();
  q.limit = 100;
  std::set<std::string> indexed;
  std::string last_error;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto r = reader.Query(q);
        if (!r.ok()) {
          last_error = r.status().ToString();
          return false;
        }
        indexed.clear();
        for (const IndexHit& h : r->hits) indexed.insert(h.row_key.ToString());
        return indexed == rows;
      },
      60s, 100ms))
      << "index has " << indexed.size() << " of " << rows.size() << " trips; last error "
      << last_error << "\n"
      << logs();

  // What the relay published is in the topic, read through PLAINTEXT.
  EXPECT_GE(Sum(EndOffsets(*c)), kTrips);
  for (auto& [name, p] : w.All()) EXPECT_EQ(p->Terminate(20s), 0) << name << ":\n" << p->Log();
}

TEST(KafkaSecurityTest, WrongPasswordStopsEveryWorkerAtStart) {
  ExpectEveryWorkerStopsAtStart("ks_pw", env->broker->sasl_ssl_bootstrap(),
                                SaslSslProperties("not-the-password", env->dir->File("ca.pem")),
                                {"authentication failed"});
}

TEST(KafkaSecurityTest, UntrustedBrokerCertificateStopsEveryWorkerAtStart) {
  ExpectEveryWorkerStopsAtStart("ks_ca", env->broker->sasl_ssl_bootstrap(),
                                SaslSslProperties(kPassword, env->dir->File("other-ca.pem")),
                                {"certificate verify failed"});
}

TEST(KafkaSecurityTest, NoBrokerAtTheAddressStopsEveryWorkerAtStart) {
  const std::string nobody = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  ExpectEveryWorkerStopsAtStart("ks_none", nobody, {}, {"did not answer", "Connection refused"},
                                /*topics_on_test_broker=*/false);
}

}  // namespace
}  // namespace cellar
