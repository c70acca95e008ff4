#include "bench/bench_load.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "base/thread_name.h"
#include "base/time.h"
#include "base/uuid.h"
#include "changelog/cell_event.h"
#include "config/number_options.h"

namespace cellar::bench {

void AddPipelineOptions(CLI::App* cmd, PipelineOptions* o) {
  AddClusterOptions(cmd, &o->cluster);
  cmd->add_option("--cells", o->cells, "cells N written before the throughput is measured")
      ->transform(DecimalInRange(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--body-bytes", o->body_bytes, "approximate JSON size of a cell body")
      ->transform(DecimalInRange(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--partitions", o->partitions, "kafka.partitions of the private broker")
      ->transform(DecimalInRange(1, 1024))
      ->capture_default_str();
  cmd->add_option("--prefill-threads", o->prefill_threads, "threads calling PutBatch")
      ->transform(DecimalInRange(1, 256))
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "phase B writes per second")
      ->transform(DecimalInRange(1.0, 100000.0))
      ->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "phase B duration")
      ->transform(DecimalInRange(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--paced-threads", o->paced_threads,
                  "threads of the paced writer (puts in flight at most)")
      ->transform(DecimalInRange(1, 1024))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "seconds to wait for each throughput step")
      ->transform(DecimalInRange(1, 86400))
      ->capture_default_str();
}

Result<PipelineCluster> OpenPipelineCluster(const ClusterOptions& options, int partitions) {
  PipelineCluster out;
  CELLAR_ASSIGN_OR_RETURN(out.cluster, OpenBenchCluster(options));
  CELLAR_ASSIGN_OR_RETURN(out.broker, AttachKafka(out.cluster, partitions,
                                                  {.mock = options.mock_broker,
                                                   .transaction_verification =
                                                       options.broker_transaction_verification}));
  return out;
}

Result<std::unique_ptr<BenchBroker>> AttachKafka(BenchCluster& cluster, int partitions,
                                                 const BenchBrokerOptions& broker_options) {
  ClusterConfig& cfg = cluster.config;
  if (!cluster.db) {
    if (cfg.kafka.brokers.empty())
      return InvalidArgument(cluster.description + ": kafka.brokers is not set");
    return std::unique_ptr<BenchBroker>();
  }
  CELLAR_ASSIGN_OR_RETURN(std::unique_ptr<BenchBroker> broker, BenchBroker::Start(broker_options));
  cfg.kafka.brokers = broker->bootstrap();
  cfg.kafka.topic_prefix = "bench";
  cfg.kafka.partitions = partitions;
  for (const auto& ds : cfg.datastores)
    CELLAR_RETURN_IF_ERROR(broker->CreateTopic(ChangeLogTopic(cfg.kafka, ds.name), partitions));
  return broker;
}

PacedResult RunPaced(int threads, int64_t total, double rate,
                     const std::function<void(int64_t)>& op) {
  using Clock = std::chrono::steady_clock;
  std::atomic<int64_t> next{0};
  std::atomic<uint64_t> late{0};
  std::mutex usage_mu;
  ThreadUsage usage;
  const auto start = Clock::now() + std::chrono::milliseconds(5);
  const auto period = std::chrono::duration<double>(1.0 / rate);
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        NameThisThread("bench-writer");
        while (!StopRequested()) {
          const int64_t k = next.fetch_add(1);
          if (k >= total) break;
          const auto slot = start + std::chrono::duration_cast<Clock::duration>(period * k);
          std::this_thread::sleep_until(slot);
          if (Clock::now() - slot > std::chrono::milliseconds(10)) late.fetch_add(1);
          op(k);
        }
        const ThreadUsage mine = ThisThreadUsage();
        std::lock_guard<std::mutex> lock(usage_mu);
        usage.cpu_seconds += mine.cpu_seconds;
        usage.wake_ups += mine.wake_ups;
      });
  }
  return {std::chrono::duration<double>(Clock::now() - start).count(), late.load(), usage};
}

namespace {

constexpr const char* kCities[] = {"san_francisco", "new_york", "london",    "sao_paulo",
                                   "mumbai",        "paris",    "amsterdam", "mexico_city"};

}  // namespace

nlohmann::json MakeBody(std::mt19937_64& rng, int target_bytes, const std::string& run,
                        const char* phase) {
  nlohmann::json body = {
      {"bench_run", run},
      {"bench_phase", phase},
      {"rider_uuid", Uuid::Random().ToString()},
      {"driver_uuid", Uuid::Random().ToString()},
      {"city", kCities[rng() % std::size(kCities)]},
      {"status", "completed"},
      {"requested_at", FormatRfc3339(NowMicros() - static_cast<int64_t>(rng() % 86400) * 1000000)},
      {"duration_s", 300 + static_cast<int64_t>(rng() % 3000)},
      {"fare", {{"currency", "USD"}, {"total", Round(5 + (rng() % 10000) / 100.0, 2)}}},
  };
  const int pad = target_bytes - static_cast<int>(body.dump().size()) - 11;  // ,"route":""
  if (pad > 0) {
    std::string route(static_cast<size_t>(pad), '?');
    for (char& c : route) c = static_cast<char>('?' + rng() % 64);
    body["route"] = route;
  }
  return body;
}

}  // namespace cellar::bench
