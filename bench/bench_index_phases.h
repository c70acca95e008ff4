// The phases of `cellar-bench index` (what each measures is described at the
// top of bench_index.cc): the options, the trips written, what every phase
// works on, the figures each returns and the report they end in.
//
//   bench_index.cc          options, set-up, the phases in order
//   bench_index_trips.cc    trip bodies and the index definition over them
//   bench_index_lag.cc      phase A: write-commit to query-visible lag
//   bench_index_upserts.cc  phase B: IndexWriter::Apply upserts/s
//   bench_index_query.cc    phase C: bulk load, then IndexReader vs raw SQL
//   bench_index_report.cc   the table and the closing JSON line
//
// A phase returns 0 to go on, otherwise the exit code the run ends with
// (1 failed, 130 interrupted); its figures are only valid when it returned 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_broker.h"
#include "bench/bench_common.h"
#include "bench/bench_load.h"
#include "cells/cell_store.h"
#include "config/cluster_config.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"
#include "indexes/index_worker.h"

namespace cellar::bench::index_phases {

struct IndexBenchOptions {
  ClusterOptions cluster;
  int partitions = 8;  // private broker only
  double rate = 200;   // phase A writes/s
  double seconds = 10;
  int paced_threads = 16;
  int sample_every = 10;
  int poll_ms = 2;
  int pollers = 2;
  int batch_cells = 30000;
  int apply_cells = 3000;
  int put_cells = 20000;
  int apply_threads = IndexWorkerOptions{}.concurrency;
  int entries = 1000000;
  int drivers = 2000;
  int rows_per_insert = 1000;
  int load_connections = 2;  // per MySQL host
  int queries = 2000;
  int query_days = 7;
  int timeout_s = 60;
};

constexpr double kTargetP99Ms = 50;
constexpr const char* kLiveIndex = "bench_driver_index";
constexpr const char* kQueryIndex = "bench_query_index";

// ---- Trips (bench_index_trips.cc) -------------------------------------------------

constexpr const char* kCities[] = {"san_francisco", "new_york", "london",    "sao_paulo",
                                   "mumbai",        "paris",    "amsterdam", "mexico_city"};
constexpr int64_t kDayMicros = 86400LL * 1000000;

nlohmann::json TripBody(const Uuid& driver, const std::string& city, MicrosSinceEpoch requested,
                        double fare);

Result<IndexDefinition> Definition(const ClusterConfig& cfg, const std::string& table);

// ---- What every phase works on ------------------------------------------------------

// Set up by RunIndexBench (bench_index.cc): the cluster, its store with both
// indexes applied, and the names of this run.
struct IndexBenchRun {
  const IndexBenchOptions& o;
  const BenchCluster& cluster;
  const ClusterConfig& cfg;  // cluster.config
  CellStore* store;
  const std::string& datastore;  // the first datastore
  const std::string& column;     // its first column
  const std::string& run;        // names the relay and the scratch table of this run
  const IndexDefinition& live_def;
  const IndexDefinition& query_def;
  int query_version;  // of kQueryIndex
};

// ---- Phase A: write-commit to query-visible lag (bench_index_lag.cc) ------------------

struct LagFigures {
  double warmup_s = 0;
  int64_t writes = 0;
  uint64_t put_errors = 0;
  PacedResult paced;
  double achieved = 0;
  double put_p50 = 0, put_p99 = 0;
  uint64_t samples = 0, not_visible = 0, total_polls = 0, first_poll_visible = 0;
  double lag_p50 = 0, lag_p99 = 0, lag_max = 0;
  double ack_p50 = 0, ack_p99 = 0, ack_max = 0;
  size_t tap_events = 0;
  double tap_p50 = 0, tap_p99 = 0;
  double tap_ack_p50 = 0, tap_ack_p99 = 0;
  uint64_t tap_arrived_before_ack = 0;
  double client_cpu = 0;
  std::optional<double> server_cpu_before, server_cpu_after;
  // cellar_index_lag_seconds over phase A's writes only (bucket upper bounds, ms).
  double worker_p50 = 0, worker_p99 = 0;
};

// Starts the relay and an IndexWorker for live_def, waits for the first
// entry, writes at --rate and polls `reader` for the sampled puts; stops both.
int RunLagPhase(const IndexBenchRun& b, IndexReader& reader, LagFigures* out);

// ---- Phase B: index-entry upserts (bench_index_upserts.cc) ----------------------------

struct UpsertFigures {
  // Group apply (IndexWriter::ApplyBatch in the worker's lanes).
  size_t batch_cells = 0, lanes = 0, max_batch = 0;
  double batch_s = 0;
  double upserts_per_s = 0;
  double batch_p50 = 0, batch_p99 = 0;  // ms per ApplyBatch call
  // The same cluster's blocking single puts from 32 callers.
  double put_rate = 0;
  uint64_t put_errors = 0;
  double put_rate_ratio = 0;  // upserts_per_s / put_rate
  // One cell per transaction (IndexWriter::Apply).
  size_t cells = 0;
  uint64_t apply_errors = 0;  // every failed apply or put of the phase
  double apply_s = 0;
  double single_upserts_per_s = 0;
  double apply_p50 = 0, apply_p99 = 0;
  double flush_p50 = 0;
};

// Applies --batch-cells new trips of `drivers` to query_def with
// IndexWriter::ApplyBatch as the worker does, --apply-cells more one at a
// time with IndexWriter::Apply, and measures the cluster's put rate.
int RunUpsertPhase(const IndexBenchRun& b, const std::vector<Uuid>& drivers, UpsertFigures* out);

// ---- Phase C: queries (bench_index_query.cc) ------------------------------------------

struct QueryFigures {
  std::string server_memory;
  double load_seconds = 0;
  uint64_t load_rows = 0;
  double load_client_cpu = 0;
  std::optional<double> load_server_before, load_server_after;
  int warmup = 0;
  size_t timed = 0;
  double mean_hits = 0;
  uint64_t mismatches = 0, query_errors = 0;
  double q_p50 = 0, q_p99 = 0;
  double raw_p50 = 0, raw_p99 = 0;
  double ratio = 0;
};

// Bulk-loads --entries entries of `drivers` into query_def's emptied tables,
// then times --queries queries through `reader` and as raw SQL.
int RunQueryPhase(const IndexBenchRun& b, IndexReader& reader, const std::vector<Uuid>& drivers,
                  QueryFigures* out);

// ---- Report (bench_index_report.cc) ---------------------------------------------------

// Prints the table and the JSON line; the run's exit code (1 if anything failed).
int PrintIndexReport(const IndexBenchRun& b, const BenchBroker* broker, const LagFigures& a,
                     const UpsertFigures& up, const QueryFigures& q);

}  // namespace cellar::bench::index_phases
