#include "tests/kafka_processes.h"

#include <fstream>
#include <sstream>

#include "changelog/cell_event.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "gtest/gtest.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"
#include "testing/test_certificates.h"
#include "testing/wait_for.h"

namespace cellar::kafkaproc {

KafkaProcessesEnv& Env() {
  static KafkaProcessesEnv env;
  return env;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {

class KafkaProcessesEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    KafkaProcessesEnv& e = Env();
    e.dir = std::make_unique<testing::TempDir>("kafka-security");
    for (const Status& made :
         {testing::MakeTestCa(*e.dir, "ca"), testing::MakeTestCa(*e.dir, "other-ca"),
          testing::MakeTestCertificate(*e.dir, "broker", "ca", "IP:127.0.0.1")})
      ASSERT_TRUE(made.ok()) << made.ToString();
    // Kafka's PEM keystore: the PKCS#8 key, then the certificate chain.
    const std::string keystore = e.dir->File("broker-keystore.pem");
    {
      std::ofstream out(keystore, std::ios::binary);
      out << ReadFile(e.dir->File("broker-key.pem")) << ReadFile(e.dir->File("broker.pem"))
          << ReadFile(e.dir->File("ca.pem"));
      ASSERT_TRUE(out.good()) << "cannot write " << keystore;
    }
    try {
      e.db = testing::PrivateMariaDb::Start("ksec");
      testing::KafkaBrokerOptions o;
      o.label = "kafka-sasl-ssl";
      o.sasl_ssl = testing::KafkaBrokerOptions::SaslSsl{keystore, kUser, kPassword};
      e.broker = testing::KafkaBroker::Start(std::move(o));
    } catch (const std::exception& ex) {
      FAIL() << "cannot start the test's servers: " << ex.what();
    }
    ASSERT_FALSE(e.broker->sasl_ssl_bootstrap().empty());
    ASSERT_NE(e.broker->sasl_ssl_bootstrap(), e.broker->bootstrap());
  }
  void TearDown() override {
    Env().broker.reset();
    Env().db.reset();
    Env().dir.reset();
  }
};

[[maybe_unused]] ::testing::Environment* const registered =
    ::testing::AddGlobalTestEnvironment(new KafkaProcessesEnvironment);

}  // namespace

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::map<std::string, std::string> SaslSslProperties(const std::string& password,
                                                     const std::string& ca_file) {
  return {{"security.protocol", "SASL_SSL"},
          {"sasl.mechanisms", "SCRAM-SHA-512"},
          {"sasl.username", kUser},
          {"sasl.password", password},
          {"ssl.ca.location", ca_file}};
}

std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, const std::string& brokers,
                                     const std::map<std::string, std::string>& properties,
                                     bool create_topics) {
  auto c = std::make_unique<Cluster>();
  c->prefix = prefix;
  std::string yaml =
      testing::MakeKafkaClusterYaml({Env().db.get()}, kShards, brokers, prefix, kPartitions);
  std::string props;
  for (const auto& [k, v] : properties) props += "    " + k + ": " + Quote(v) + "\n";
  if (!props.empty()) {
    const size_t at = yaml.find('\n', yaml.find("  partitions:", yaml.find("kafka:\n")));
    yaml.insert(at + 1, "  properties:\n" + props);
  }
  yaml += "relay:\n  lock_retry_ms: 200\n  poll_min_ms: 1\n  poll_max_ms: 20\n";
  c->config_path = Env().dir->File(prefix + ".yaml");
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
      const Status s = Env().broker->CreateTopic(ChangeLogTopic(c->config.kafka, ds), kPartitions);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return nullptr;
    }
  c->store = CellStore::Open(c->config);
  const Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? std::move(c) : nullptr;
}

std::string TriggersFile(const std::string& prefix, const std::string& url) {
  const std::string path = Env().dir->File(prefix + "-triggers.yaml");
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

Workers::Workers(const Cluster& c, const std::string& triggers_path) {
  relay_log = Env().dir->File(c.prefix + "-relay.log");
  indexer_log = Env().dir->File(c.prefix + "-indexer.log");
  trigger_log = Env().dir->File(c.prefix + "-trigger.log");
  relay = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{CELLAR_RELAY_BIN, "--config", c.config_path, "--id",
                               c.prefix + "-relay"},
      relay_log);
  indexer = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{CELLAR_INDEXER_BIN, "--config", c.config_path, "--indexes",
                               kIndexFile},
      indexer_log);
  trigger = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{CELLAR_TRIGGER_BIN, "--config", c.config_path, "--triggers",
                               triggers_path},
      trigger_log);
}

std::vector<std::pair<std::string, testing::ChildProcess*>> Workers::All() {
  return {{"cellar-relay", relay.get()},
          {"cellar-indexer", indexer.get()},
          {"cellar-trigger", trigger.get()}};
}

std::string Workers::Logs() {
  std::string out;
  for (auto& [name, p] : All()) out += "--- " + name + ":\n" + p->Log() + "\n";
  return out;
}

std::vector<int64_t> EndOffsets(const Cluster& c) {
  ClusterConfig plain = c.config;
  plain.kafka.brokers = Env().broker->bootstrap();
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

void ExpectIndexedTrips(const Cluster& c, Workers& w, const std::string& driver,
                        const std::set<std::string>& rows, std::chrono::milliseconds timeout) {
  auto defs = LoadIndexDefinitions(kIndexFile, c.config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  IndexReader reader(c.store.get(), *defs, 0);
  IndexQuery q;
  q.index = "driver_partner_index";
  q.shard_value = driver;
  q.limit = 1000;
  std::set<std::string> indexed;
  std::string last_error;
  EXPECT_TRUE(testing::WaitFor(
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
      timeout, std::chrono::milliseconds(100)))
      << "driver " << driver << ": index has " << indexed.size() << " of " << rows.size()
      << " trips; last error " << last_error << "\n"
      << w.Logs();
}

nlohmann::json TripBody(const Uuid& driver, int i) {
  return {{"driver_partner_uuid", driver.ToString()},
          {"city_uuid", "5c4e0c1a-8a0e-4c2a-9d64-0c6a3f1b2e01"},
          {"trip_created_at",
           "2026-01-01T00:00:" + std::string(i < 10 ? "0" : "") + std::to_string(i) + "Z"},
          {"fare", {{"total", 10.5 + i}}},
          {"status", "completed"}};
}

}  // namespace cellar::kafkaproc
