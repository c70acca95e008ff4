// `cellar-bench put --bare-group-commit` (phase H): the group commit's design
// with nothing of Cellar's around it, as the upper bound of any group commit
// for C blocked callers on this machine.
//
// Phase C' (the closed-loop ceiling) commits C rows in flight with no callers
// to wake: the next transaction's rows are there the moment a commit ends.
// Callers blocked in Put() must be answered and come back first. Phase H
// measures what that costs by itself: C caller threads each hand one
// pre-encoded row to a host queue (a mutex and a condition variable) and
// sleep on the gate of the batch their row joins (a C++20 atomic wait, one
// futex word per batch, as cells/internal/answer_gate.h); W writer connections
// per host take everything queued (at most group_commit.max_batch_cells),
// start a second transaction while one is in flight only once
// group_commit.min_pipelined_cells rows wait, and send the statement the group
// commit sends (one autocommit INSERT ... RETURNING whose first row locks the
// writer's fence row, PlanFusedFenceStatements). No validation, encoding,
// routing, metrics or topology: what is left is the queue, the wake-ups and
// the SQL. Two variants: the writer opens the gate itself, or hands the batch
// to one answering thread that does (as GroupCommitter does).
//
// Threading: call from the benchmark's main thread.
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "bench/bench_common.h"
#include "bench/bench_put_phases.h"

namespace cellar::bench {

struct BareGroupCommit {
  bool answering_thread = false;
  RawRounds rounds;
  double rows_per_transaction = 0;  // over all rounds
};

// Both variants, `rounds` rounds of `cells` rows each from `callers` callers;
// an empty vector with *exit_code != 0 when one failed or was interrupted
// (reported).
std::vector<BareGroupCommit> RunBareGroupCommits(const BenchCluster& cluster, int callers,
                                                 int cells, int body_bytes, int rounds,
                                                 std::mt19937_64& rng, int* exit_code);

// Table section and JSON object (`bare_group_commit`) of the variants; ratios
// are to `closed_loop_rows_per_s` (phase C').
void AddBareGroupCommitRows(Table& t, const std::vector<BareGroupCommit>& variants,
                            double closed_loop_rows_per_s, double store_cells_per_s);
nlohmann::json BareGroupCommitJson(const std::vector<BareGroupCommit>& variants,
                                   double closed_loop_rows_per_s, double store_cells_per_s);

}  // namespace cellar::bench
