// The private Kafka broker of a benchmark run: Apache Kafka (the default: the
// broker users run, testing/kafka_broker.h, with the JVM settings of Kafka's
// start script, warmed up before Start returns: bench_broker_warm_up.h) or, with
// --mock-broker, librdkafka's in-memory mock cluster in this process (the
// broker of the figures before Cellar met a real Kafka; kept for comparison).
// Threading: one thread; CpuSeconds() from any.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "bench/bench_broker_warm_up.h"
#include "config/cluster_config.h"
#include "nlohmann/json.hpp"

namespace cellar::testing {
class KafkaBroker;
class MockBroker;
}  // namespace cellar::testing

namespace cellar::bench {

struct BenchBrokerOptions {
  bool mock = false;  // librdkafka's mock cluster instead of Apache Kafka
  // Apache Kafka's transaction.partition.verification.enable (Kafka's
  // default true; Cellar's private brokers run false, testing/kafka_broker.cc).
  bool transaction_verification = false;
};

class BenchBroker {
 public:
  // Unavailable naming the cause when the broker cannot start.
  static Result<std::unique_ptr<BenchBroker>> Start(const BenchBrokerOptions& options);
  ~BenchBroker();

  const std::string& bootstrap() const;
  // Creates `topic` with `partitions` partitions and waits for its leaders.
  Status CreateTopic(const std::string& topic, int partitions);
  // A trigger's dead-letter and retry topics, made before the trigger
  // starts when the broker is the mock: librdkafka 2.0.2's mock cluster does
  // not answer CreateTopics (it names no controller), which the trigger
  // runner sends for them. Nothing for Apache Kafka (the runner makes them).
  Status CreateTriggerTopics(const KafkaConfig& kafka, const std::string& datastore,
                             const std::string& trigger) const;
  // "apache-kafka-3.9.1" or "mock": the JSON key `broker`.
  const std::string& name() const { return name_; }
  // The warm-up Start ran on Apache Kafka (zeros for the mock).
  const BrokerWarmUp& warm_up() const { return warm_up_; }
  // Whether Apache Kafka verifies transactional partitions (false for the mock).
  bool transaction_verification() const { return transaction_verification_; }
  // True for the mock: its CPU is part of this process's (ProcessCpuSeconds).
  bool in_process() const { return mock_ != nullptr; }
  // CPU seconds the broker has used so far: the JVM's, or the mock's thread's.
  double CpuSeconds() const;
  // Of those, the JVM's JIT compiler threads' (0 for the mock).
  double JitCpuSeconds() const;
  // Wake-ups (voluntary context switches) of the JVM's threads, or the
  // mock's thread's, so far; nullopt when they cannot be read.
  std::optional<uint64_t> WakeUps() const;
  // The requests Apache Kafka has handled so far by type
  // (testing::KafkaBroker::RequestCounts: a JVM of its own runs for 1-2 s);
  // FailedPrecondition for the mock.
  Result<std::map<std::string, uint64_t>> RequestCounts() const;

 private:
  BenchBroker() = default;
  std::unique_ptr<testing::KafkaBroker> kafka_;
  std::unique_ptr<testing::MockBroker> mock_;
  std::string name_;
  bool transaction_verification_ = false;
  BrokerWarmUp warm_up_;
};

// The JSON `broker` of a run: the private broker's name, or "external"
// (--config: whatever kafka.brokers names).
std::string BrokerName(const BenchBroker* broker);

// Sets the JSON keys `broker` (BrokerName), `broker_transaction_verification`
// (null for an external broker: not known) and `broker_warm_up_s` (0: none).
void AddBrokerKeys(nlohmann::ordered_json& j, const BenchBroker* broker);

// The table's "kafka" row: "private apache-kafka-3.9.1 (single-node KRaft)
// 127.0.0.1:PORT", "private mock (librdkafka's in-memory mock cluster) ...",
// or `brokers` (--config).
std::string DescribeKafka(const BenchBroker* broker, const std::string& brokers);

// The current run's private broker, registered by Start and forgotten by
// its destructor (the pipeline's CPU split reads it); null when none.
const BenchBroker* CurrentBenchBroker();

}  // namespace cellar::bench
