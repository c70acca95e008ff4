// The consumer of the relay benchmark (`cellar-bench relay`, see
// bench_relay.cc): an ungrouped ChangeLogConsumer read in a background thread,
// keeping what the phases need about this run's events, and the latency
// samples it takes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/time.h"
#include "bench/bench_common.h"
#include "changelog/kafka/change_log_consumer.h"

namespace cellar::bench::relay_parts {

// One latency observation: the cell's created_at (transaction start) and
// arrival - created_at.
struct Sample {
  MicrosSinceEpoch created_at = 0;
  double ms = 0;
};

std::vector<double> Millis(const std::vector<Sample>& samples);

// The p-th percentile of the samples of each whole second after t0, e.g. "12, 14, 95".
std::string PerSecond(const std::vector<Sample>& samples, MicrosSinceEpoch t0, double p);

// Reads the change log (no group, from the beginning) in a background thread
// and keeps what the phases need about this run's events.
class Collector {
 public:
  Collector(std::unique_ptr<ChangeLogConsumer> consumer, std::string run);
  ~Collector();

  uint64_t prefill_seen() const { return prefill_seen_.load(); }
  // When the newest pre-fill event arrived (steady clock).
  Stopwatch::Clock::time_point last_prefill_at() const {
    return Stopwatch::Clock::time_point(Stopwatch::Clock::duration(last_prefill_at_.load()));
  }
  uint64_t latency_seen() const { return latency_seen_.load(); }
  uint64_t duplicates() const { return duplicates_.load(); }
  uint64_t errors() const { return errors_.load(); }
  std::vector<Sample> Latencies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return latencies_;
  }
  // Phase B events' arrival times; the paced writer adds its acks.
  AckLatency& acks() { return acks_; }

 private:
  void Run(std::stop_token st);

  std::unique_ptr<ChangeLogConsumer> consumer_;
  const std::string run_;
  std::unordered_set<uint64_t> seen_;  // consumer thread only
  std::atomic<uint64_t> prefill_seen_{0}, latency_seen_{0}, duplicates_{0}, errors_{0};
  std::atomic<Stopwatch::Clock::rep> last_prefill_at_{0};
  mutable std::mutex mu_;
  std::vector<Sample> latencies_;
  AckLatency acks_;
  std::jthread thread_;
};

}  // namespace cellar::bench::relay_parts
