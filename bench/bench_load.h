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
#include "bench/bench_broker.h"
#include "bench/bench_common.h"

namespace cellar::bench {

// A private broker (Apache Kafka, or the mock with `mock`) with the
// change-log topics of every datastore (topic prefix "bench", `partitions`
// each), when the cluster is private (started by OpenBenchCluster);
// otherwise null after checking that the config names brokers
// (InvalidArgument if not). Unavailable when the broker cannot start.
Result<std::unique_ptr<BenchBroker>> AttachKafka(BenchCluster& cluster, int partitions,
                                                 const BenchBrokerOptions& broker_options);

// The knobs the change-log benchmarks (relay, trigger) share: a backlog of
// `cells` written before the measured throughput, then paced writes at
// `rate` for `seconds`. Each subcommand sets its own defaults before
// AddPipelineOptions.
struct PipelineOptions {
  ClusterOptions cluster;
  int cells = 50000;
  int body_bytes = 400;  // approximate JSON size of a cell body
  int partitions = 8;    // kafka.partitions of the private broker
  int prefill_threads = 4;
  double rate = 500;  // phase B writes/s
  double seconds = 10;
  int paced_threads = 16;  // puts in flight at most in phase B
  int timeout_s = 120;
};
// Adds the cluster options and --cells, --body-bytes, --partitions,
// --prefill-threads, --rate, --seconds, --paced-threads and --timeout.
void AddPipelineOptions(CLI::App* cmd, PipelineOptions* options);

// A benchmark's cluster and, when private, its broker.
struct PipelineCluster {
  BenchCluster cluster;
  std::unique_ptr<BenchBroker> broker;  // null with --config
};
// OpenBenchCluster, then AttachKafka. Errors as theirs.
Result<PipelineCluster> OpenPipelineCluster(const ClusterOptions& options, int partitions);

struct PacedResult {
  double seconds = 0;
  uint64_t late = 0;  // calls that started more than 10 ms after their slot
  // RunPaced's own threads over their lives (they end before it returns,
  // and /proc lists live threads only).
  ThreadUsage threads;
};

// Calls op(k) for k = 0..total-1 from `threads` threads; call k starts at
// start + k / rate, or as soon as a thread is free after that. Stops early
// when StopRequested(). Its threads are named "bench-writer": the
// harness's (their sleeps and wake-ups are the load's pacing, not the
// system's work); an `op` that wants its calls counted as the system's
// times them (ThisThreadCpuSeconds).
PacedResult RunPaced(int threads, int64_t total, double rate,
                     const std::function<void(int64_t)>& op);

// A trip-like body of about `target_bytes` JSON bytes, tagged with
// "bench_run" = run and "bench_phase" = phase so consumers can ignore
// other runs' events.
nlohmann::json MakeBody(std::mt19937_64& rng, int target_bytes, const std::string& run,
                        const char* phase);

}  // namespace cellar::bench
