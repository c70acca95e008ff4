#include "bench/bench_broker.h"

#include <atomic>
#include <exception>

#include "bench/bench_common.h"
#include "testing/kafka_broker.h"
#include "testing/mock_broker.h"

namespace cellar::bench {
namespace {
std::atomic<const BenchBroker*> g_current{nullptr};
}  // namespace

Result<std::unique_ptr<BenchBroker>> BenchBroker::Start(const BenchBrokerOptions& options) {
  std::unique_ptr<BenchBroker> b(new BenchBroker());
  try {
    if (options.mock) {
      b->mock_ = testing::MockBroker::Start();
      b->name_ = "mock";
    } else {
      b->kafka_ = testing::KafkaBroker::Start(
          {.label = "bench-kafka",
           .heap_mb = 512,
           .light_jvm = false,
           .properties = {{"transaction.partition.verification.enable",
                           options.transaction_verification ? "true" : "false"}}});
      b->name_ = b->kafka_->version();
      b->transaction_verification_ = options.transaction_verification;
    }
  } catch (const std::exception& e) {
    return Unavailable(std::string("could not start the private broker: ") + e.what());
  }
  g_current = b.get();
  return b;
}

BenchBroker::~BenchBroker() {
  const BenchBroker* self = this;
  g_current.compare_exchange_strong(self, nullptr);
}

const std::string& BenchBroker::bootstrap() const {
  return mock_ ? mock_->bootstrap() : kafka_->bootstrap();
}

Status BenchBroker::CreateTopic(const std::string& topic, int partitions) {
  return mock_ ? mock_->CreateTopic(topic, partitions) : kafka_->CreateTopic(topic, partitions);
}

double BenchBroker::CpuSeconds() const {
  if (mock_) return ThreadsCpuSeconds("rdk:mock");
  return OtherProcessCpuSeconds(kafka_->pid()).value_or(0);
}

std::string BrokerName(const BenchBroker* broker) { return broker ? broker->name() : "external"; }

void AddBrokerKeys(nlohmann::ordered_json& j, const BenchBroker* broker) {
  j["broker"] = BrokerName(broker);
  j["broker_transaction_verification"] =
      broker ? nlohmann::ordered_json(broker->transaction_verification())
             : nlohmann::ordered_json(nullptr);
}

std::string DescribeKafka(const BenchBroker* broker, const std::string& brokers) {
  if (!broker) return brokers;
  return "private " + broker->name() +
         (broker->in_process() ? " (librdkafka's in-memory mock cluster) "
                               : " (single-node KRaft, its own JVM) ") +
         brokers;
}

const BenchBroker* CurrentBenchBroker() { return g_current; }

}  // namespace cellar::bench
