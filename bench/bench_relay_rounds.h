// Parts of `cellar-bench relay` (bench_relay.cc) that run more than once: the
// pre-fill with the relay stopped, the paced writer of the latency phase, and
// the exactly-once round (relay.exactly_once) that repeats both with a
// fenced relay so one run reports both delivery modes.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_load.h"
#include "bench/bench_relay_collector.h"
#include "cells/cell_store.h"

namespace cellar::bench::relay_parts {

struct Prefilled {
  std::vector<CellWrite> cells;
  std::vector<PutResult> written;  // written[i] belongs to cells[i]
  double seconds = 0;
  std::string error;  // non-empty when a put failed
};
// Writes `n` bodies tagged (run, "prefill") with PutBatch from `threads` threads.
Prefilled Prefill(CellStore& store, const std::string& datastore, const std::string& column, int n,
                  int body_bytes, int threads, const std::string& run, std::mt19937_64& rng);

struct PacedWrites {
  int64_t total = 0;
  std::vector<double> put_ms;   // -1 for failed puts
  std::vector<PutResult> puts;  // by call index
  uint64_t errors = 0;
  std::string first_error;
  PacedResult paced;
};
// Puts rate x seconds single cells tagged (run, "latency") on a paced pool of
// `threads`, recording each commit acknowledgement in collector.acks().
PacedWrites RunPacedWrites(CellStore& store, const std::string& datastore,
                           const std::string& column, double rate, double seconds, int threads,
                           int body_bytes, const std::string& run, std::mt19937_64& rng,
                           Collector& collector);

struct RoundSettings {
  int cells = 0;
  int body_bytes = 0;
  int prefill_threads = 0;
  double rate = 0;
  double seconds = 0;
  int writer_threads = 0;
  int timeout_s = 0;
};
struct ExactlyOnceRound {
  double events_per_s = 0;  // first produced .. all acknowledged
  double ack_p50_ms = 0, ack_p99_ms = 0, ack_max_ms = 0;
  uint64_t latency_events = 0, missing = 0, duplicates = 0;
  uint64_t failed_batches = 0, skipped_already_published = 0;
  std::string error;  // non-empty when the round could not finish
};
// The same two phases with relay.exactly_once on: a new store and relay on
// `config` (no other relay may run), cells tagged `run`.
ExactlyOnceRound RunExactlyOnceRound(const ClusterConfig& config, const RoundSettings& settings,
                                     const std::string& run, std::mt19937_64& rng);

}  // namespace cellar::bench::relay_parts
