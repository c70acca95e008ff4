// `cellar-bench put --closed-loop-designs`: what plain SQL can do for C
// blocked callers, across designs (no Cellar code).
//
// C callers each blocked in Put() never offer the server more than C rows at
// once. This phase asks whether ANY plain-SQL way of writing those C rows
// reaches the bar (0.5 x raw 100-row INSERTs): for W connections per
// host in {1, 2, 4, 8} (W <= C), C / W rows per transaction, both
//   - fenced: the host-log design (write fence lock + one INSERT ... RETURNING
//     + COMMIT: three round trips),
//   - fused: the fence lock inside one autocommit INSERT ... RETURNING (one
//     round trip; PlanFusedFenceStatements), and
//   - bare: one autocommit multi-row INSERT (one round trip, no fence, no
//     RETURNING: no design can send less per transaction).
// Each variant runs `rounds` rounds of N rows; the median round counts.
//
// Threading: call from the benchmark's main thread.
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "bench/bench_put_phases.h"

namespace cellar::bench {

struct ClosedLoopDesign {
  int connections_per_host = 0;
  int rows_per_transaction = 0;
  enum Kind { kFenced, kFused, kBare } kind = kFenced;
  RawRounds rounds;
};

// Runs every variant; an empty vector with *exit_code != 0 when one failed or
// was interrupted (reported).
std::vector<ClosedLoopDesign> RunClosedLoopDesigns(const BenchCluster& cluster, int callers,
                                                   int cells, int body_bytes, int rounds,
                                                   std::mt19937_64& rng, int* exit_code);

// Table section and JSON array (`closed_loop_designs`) of the variants; ratios
// are to `raw_rows_per_s`.
void AddClosedLoopDesignRows(Table& t, const std::vector<ClosedLoopDesign>& designs,
                             double raw_rows_per_s);
nlohmann::json ClosedLoopDesignsJson(const std::vector<ClosedLoopDesign>& designs,
                                     double raw_rows_per_s);

}  // namespace cellar::bench
