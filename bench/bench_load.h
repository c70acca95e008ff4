// What the latency benchmarks (relay, trigger, index) share: their Kafka,
// their paced writers and their trip-like cell bodies.
// Threading: RunPaced calls `op` from its own threads; the rest are plain functions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "base/status.h"
#include "bench/bench_common.h"
#include "testing/local_broker.h"

namespace cellar::bench {

// A private broker with the change-log topics of every datastore (topic
// prefix "bench", `partitions` each), when the cluster is private (started
// by OpenBenchCluster); otherwise null after checking that the config names
// brokers (InvalidArgument if not). Unavailable when the broker cannot start.
Result<std::unique_ptr<testing::LocalBroker>> AttachKafka(BenchCluster& cluster, int partitions);

struct PacedResult {
  double seconds = 0;
  uint64_t late = 0;  // calls that started more than 10 ms after their slot
};

// Calls op(k) for k = 0..total-1 from `threads` threads; call k starts at
// start + k / rate, or as soon as a thread is free after that. Stops early
// when StopRequested().
PacedResult RunPaced(int threads, int64_t total, double rate,
                     const std::function<void(int64_t)>& op);

// A trip-like body of about `target_bytes` JSON bytes, tagged with
// "bench_run" = run and "bench_phase" = phase so consumers can ignore
// other runs' events.
nlohmann::json MakeBody(std::mt19937_64& rng, int target_bytes, const std::string& run,
                        const char* phase);

}  // namespace cellar::bench
