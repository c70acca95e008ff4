// The worker processes of a cluster (cellar-relay, cellar-indexer,
// cellar-trigger) on a private MariaDB and a private Apache Kafka broker that
// has a SASL_SSL listener (SCRAM-SHA-512, a certificate for IP 127.0.0.1
// signed by a test CA) besides its PLAINTEXT one: shared by the tests of
// Kafka's security (kafka_security_test.cc) and of a broker outage
// (broker_outage_test.cc), which run in one binary with one broker.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cells/cell_store.h"
#include "config/cluster_config.h"
#include "nlohmann/json.hpp"
#include "testing/child_process.h"
#include "testing/kafka_broker.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"

#ifndef CELLAR_RELAY_BIN
#error \
    "CELLAR_RELAY_BIN, CELLAR_INDEXER_BIN, CELLAR_TRIGGER_BIN and CELLAR_SOURCE_DIR come from tests/CMakeLists.txt"
#endif

namespace cellar::kafkaproc {

inline constexpr uint32_t kShards = 8;
inline constexpr int kPartitions = 4;
inline constexpr const char* kUser = "cellar-pipeline";
inline constexpr const char* kPassword = "s3cret-pipeline-pw";

// The binary's servers and certificates, started once on the main thread
// (a gtest Environment). dir holds ca.pem, other-ca.pem and the broker's keystore.
struct KafkaProcessesEnv {
  std::unique_ptr<testing::TempDir> dir;
  std::unique_ptr<testing::PrivateMariaDb> db;
  std::unique_ptr<testing::KafkaBroker> broker;
};
KafkaProcessesEnv& Env();

std::string ReadFile(const std::string& path);
std::string Quote(const std::string& s);

// kafka.properties for the SASL_SSL listener, trusting `ca_file`.
std::map<std::string, std::string> SaslSslProperties(const std::string& password,
                                                     const std::string& ca_file);

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
                                     bool create_topics = true);

// A trigger file with one webhook trigger on trips BASE posting to `url`.
std::string TriggersFile(const std::string& prefix, const std::string& url);

// The index definitions cellar-indexer runs (driver_partner_index on trips BASE).
extern const std::string kIndexFile;

// The three worker processes of a cluster, started at once.
struct Workers {
  std::unique_ptr<testing::ChildProcess> relay, indexer, trigger;
  std::string relay_log, indexer_log, trigger_log;

  Workers(const Cluster& c, const std::string& triggers_path);
  std::vector<std::pair<std::string, testing::ChildProcess*>> All();
  // Every process's output, for failure messages.
  std::string Logs();
};

// The end offset of every partition of the cluster's change-log topics, read
// through the broker's PLAINTEXT listener; empty after a test failure.
std::vector<int64_t> EndOffsets(const Cluster& c);
int64_t Sum(const std::vector<int64_t>& v);

// Waits up to `timeout` until driver_partner_index answers exactly `rows`
// (row keys) for `driver`; a test failure naming the difference otherwise.
void ExpectIndexedTrips(const Cluster& c, Workers& w, const std::string& driver,
                        const std::set<std::string>& rows, std::chrono::milliseconds timeout);

// A BASE body the driver_partner_index indexes.
nlohmann::json TripBody(const Uuid& driver, int i);

}  // namespace cellar::kafkaproc
