// The options, results and report of `cellar-bench put` (bench_put.cc runs
// the phases; bench_put_report.cc prints the table and the JSON line).
//
// Threading: the benchmark's main thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "bench/bench_put_bare_commit.h"
#include "bench/bench_put_designs.h"
#include "bench/bench_put_phases.h"
#include "bench/bench_put_raw.h"
#include "bench/bench_put_store.h"

namespace cellar::bench {

struct PutOptions {
  ClusterOptions cluster;
  int cells = 20000;
  int callers = 32;
  int body_bytes = 400;
  int raw_connections = 4;  // per MySQL host
  int raw_rows_per_insert = 100;
  int raw_rounds = 3;  // the median round is the baseline (the machine may be shared)
  // Rounds of N cells of phases B and D; the median round counts, as for the
  // baseline (a single sub-second round takes whatever the machine's noise
  // does to it, the baseline's median does not).
  int store_rounds = 3;
  bool single_row_baseline = false;
  int ceiling_rows_per_tx = 32;  // cells per transaction of the plain-SQL ceiling
  int batch_cells_per_row = 10;
  int half_rate_cells = 0;  // 0: N / 2
  int async_window = 8;     // PutAsync calls in flight per caller in phase F (0: no phase F)
  // Untimed puts and put_batch cells before phase B (0: none), as the
  // baseline's median round follows a first round: a service's writers are
  // connected and have prepared their statements (one per batch size).
  int warm_up_cells = 5000;
  bool closed_loop_designs = false;  // phase G: plain-SQL closed-loop variants
  bool bare_group_commit = false;    // phase H: the group commit without Cellar
};

// The targets.
constexpr double kTargetRatio = 0.5;
constexpr double kTargetSingleRowRatio = 2.0;
constexpr double kTargetBatchRatio = 0.8;
constexpr double kTargetHalfRateP99Ms = 20.0;

// A store phase with what it used and its latency percentiles.
struct StorePhase {
  StorePhaseResult r;
  UsageDelta usage;
  double cells_per_s = 0;
  double p50 = 0, p99 = 0, max_ms = 0;
  bool ran = false;
  std::vector<double> round_rates;  // cells/s of every round (TimeStoreRounds)
  WriterTimePerTransaction writer;
};

inline double CellsPerTransaction(const StorePhaseResult& r) {
  return r.transactions ? static_cast<double>(r.rows) / r.transactions : 0;
}

// A closed-loop ceiling in plain SQL (phases C' and D'): a fixed number of rows
// in flight per host, over W connections of (rows in flight) / W rows per
// transaction, for W = 1 and W = the writer threads per host; the faster counts.
struct ClosedLoopCeiling {
  struct Try {
    int connections = 0;
    int rows_per_tx = 0;
    RawRounds rounds;
  };
  std::vector<Try> tried;
  RawRounds best;
  int rows_per_tx = 0;  // of the faster
  int connections = 0;  // of the faster
  int rows_in_flight = 0;
};

struct PutRun {
  RawRounds raw, ceiling;
  ClosedLoopCeiling closed_loop;          // phase C': C rows in flight
  ClosedLoopCeiling batch_closed_loop;    // phase D': C x k rows in flight
  std::vector<ClosedLoopDesign> designs;  // phase G (--closed-loop-designs)
  std::vector<BareGroupCommit> bare;      // phase H (--bare-group-commit)
  std::optional<PhaseResult> single;      // with --single-row-baseline
  StorePhase put, batch, half, async;
  double half_rate = 0;                                   // cells/s phase E was paced at
  uint64_t cells = 0, json_bytes = 0, encoded_bytes = 0;  // of phase B's cells
};

inline double SingleRowRate(const PutRun& run) {
  return run.single && run.single->seconds > 0 ? run.single->rows / run.single->seconds : 0;
}

// The readable table, then the one JSON line (keys stable across versions).
void PrintPutTable(const BenchCluster& cluster, const PutOptions& o, const PutRun& run);
void PrintPutJson(const BenchCluster& cluster, const PutOptions& o, const PutRun& run);

}  // namespace cellar::bench
