#include "bench/bench_broker.h"

#include <atomic>
#include <exception>

#include "bench/bench_broker_warm_up.h"
#include "bench/bench_common.h"
#include "testing/kafka_broker.h"
#include "testing/mock_broker.h"
#include "triggers/dead_letter.h"

namespace cellar::bench {
namespace {
std::atomic<const BenchBroker*> g_current{nullptr};
// Until the JIT settles (bench_broker_warm_up.h); short runs still get the minimum.
constexpr double kWarmUpMinSeconds = 20;
constexpr double kWarmUpMaxSeconds = 90;
constexpr int kWarmUpPartitions = 8;
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
                           options.transaction_verification ? "true" : "false"}},
           .jmx = true});
      b->name_ = b->kafka_->version();
      b->transaction_verification_ = options.transaction_verification;
    }
  } catch (const std::exception& e) {
    return Unavailable(std::string("could not start the private broker: ") + e.what());
  }
  if (b->kafka_) {
    // The broker's first JMX connection loads and compiles its JMX and RMI
    // code: here, before the warm-up, rather than in a measured step.
    CELLAR_RETURN_IF_ERROR(b->kafka_->RequestCounts().status());
    const std::string topic = "bench.broker-warm-up";
    CELLAR_RETURN_IF_ERROR(b->kafka_->CreateTopic(topic, kWarmUpPartitions));
    Progress("broker warm-up: transactions and a read_committed group on " + topic +
             " until the JVM's JIT compiler settles (" + FormatNumber(kWarmUpMinSeconds, 0) + "-" +
             FormatNumber(kWarmUpMaxSeconds, 0) + " s)");
    CELLAR_ASSIGN_OR_RETURN(b->warm_up_,
                            WarmUpBroker(b->kafka_->bootstrap(), topic, kWarmUpPartitions,
                                         b->kafka_->pid(), kWarmUpMinSeconds, kWarmUpMaxSeconds));
    Progress("broker warm-up: " + FormatNumber(b->warm_up_.seconds, 1) + " s, " +
             std::to_string(b->warm_up_.transactions) + " transactions, " +
             std::to_string(b->warm_up_.records) + " records produced, " +
             std::to_string(b->warm_up_.consumed) + " consumed; JIT compiler threads " +
             FormatNumber(b->warm_up_.compiler_cpu_s, 1) + " s of CPU");
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

Status BenchBroker::CreateTriggerTopics(const KafkaConfig& kafka, const std::string& datastore,
                                        const std::string& trigger) const {
  if (!mock_) return Status::Ok();
  // One partition each, as the trigger runner makes them.
  CELLAR_RETURN_IF_ERROR(mock_->CreateTopic(DeadLetterTopic(kafka, datastore, trigger), 1));
  return mock_->CreateTopic(RetryTopic(kafka, datastore, trigger), 1);
}

double BenchBroker::CpuSeconds() const {
  if (mock_) return ThreadsCpuSeconds("rdk:mock");
  return OtherProcessCpuSeconds(kafka_->pid()).value_or(0);
}

double BenchBroker::JitCpuSeconds() const {
  return kafka_ ? JvmCompilerCpuSeconds(kafka_->pid()) : 0;
}

std::optional<uint64_t> BenchBroker::WakeUps() const {
  if (mock_) return ThreadsWakeUps("rdk:mock");
  return OtherProcessWakeUps(kafka_->pid());
}

Result<std::map<std::string, uint64_t>> BenchBroker::RequestCounts() const {
  if (mock_) return FailedPrecondition("the mock broker does not count its requests");
  return kafka_->RequestCounts();
}

std::string BrokerName(const BenchBroker* broker) { return broker ? broker->name() : "external"; }

void AddBrokerKeys(nlohmann::ordered_json& j, const BenchBroker* broker) {
  j["broker"] = BrokerName(broker);
  j["broker_transaction_verification"] =
      broker ? nlohmann::ordered_json(broker->transaction_verification())
             : nlohmann::ordered_json(nullptr);
  j["broker_warm_up_s"] = broker ? Round(broker->warm_up().seconds, 1) : 0.0;
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
