// The CellStore phases of `cellar-bench put`: single puts from C callers
// (flat out, or paced at a fixed total rate) and put_batch rows.
//
// The clock covers each whole call: validation, encoding, queueing and the
// group-committed transaction. Every cell of one group-commit transaction gets
// the same created_at (the transaction's start), so the committed PutResults
// give the transactions and their sizes: one transaction = one
// (host, created_at).
//
// Threading: each phase runs its own caller threads and returns after joining
// them; StopRequested() ends a phase early (result.interrupted).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "bench/bench_put_raw.h"
#include "cells/cell.h"
#include "cells/cell_store.h"

namespace cellar::bench {

// The group commit's writer threads' time (cellar_group_commit_writer_seconds,
// cells/internal/group_commit_probe.h, summed over hosts and writers).
struct WriterTime {
  double transactions = 0;
  double waiting_s = 0, committing_s = 0, answering_s = 0;

  // The totals in `metrics` now.
  static WriterTime Take(const MetricsRegistry& metrics);
};

// Writer time per transaction between two WriterTime::Take()s, in us; all 0
// when no transaction ended in between.
struct WriterTimePerTransaction {
  double transactions = 0;
  double waiting_us = 0, committing_us = 0, answering_us = 0;

  static WriterTimePerTransaction Between(const WriterTime& before, const WriterTime& after);
};

struct StorePhaseResult : PhaseResult {
  std::vector<double> latencies_ms;  // one per call (a Put, or a PutBatch of one row)
  uint64_t transactions = 0;         // distinct (host, created_at) of committed cells
  uint64_t max_transaction = 0;      // most cells in one transaction
  uint64_t single_cell_transactions = 0;
  double cell_weighted_transaction = 0;  // the transaction size the average cell shared
};

// Trip cells in rows of `cells_per_row` cells: cells [k * cells_per_row,
// (k + 1) * cells_per_row) share one random row key and `column`, with
// ref_keys 0.. cells_per_row - 1. Adds the bodies' JSON and stored sizes to
// *json_bytes and *encoded_bytes.
std::vector<CellWrite> MakeTripCells(int cells, int cells_per_row, const std::string& column,
                                     int body_bytes, std::mt19937_64& rng, uint64_t* json_bytes,
                                     uint64_t* encoded_bytes);

// `callers` threads each Put one cell at a time until `cells` are done.
// rate_per_s > 0 paces them together: cell i is due at start + i / rate and
// its latency runs from when it was due (so a backlog counts, no coordinated
// omission); 0 = as fast as they go.
StorePhaseResult RunPutPhase(CellStore& store, const std::string& datastore,
                             const std::vector<CellWrite>& cells, int callers,
                             double rate_per_s = 0);

// `callers` threads each keep up to `window` CellStore::PutAsync calls in
// flight (a caller issues the next put as soon as fewer than `window` of its
// puts are unanswered) until `cells` are done; the phase ends when every put
// is answered. A put's latency runs from PutAsync to its callback.
// REQUIRES: window >= 1.
StorePhaseResult RunPutAsyncPhase(CellStore& store, const std::string& datastore,
                                  const std::vector<CellWrite>& cells, int callers, int window);

// `cells` (from MakeTripCells) as PutBatch requests of `cells_per_row`
// consecutive cells each (one row per request); the cells are moved, not copied.
std::vector<std::vector<CellWrite>> SplitIntoRows(std::vector<CellWrite> cells, int cells_per_row);

// `callers` threads each PutBatch one request of `rows` (see SplitIntoRows) at
// a time. Nothing is built or copied inside the phase, so a caller of
// TimeStorePhase measures the puts' CPU alone. rows = cells written.
StorePhaseResult RunPutBatchPhase(CellStore& store, const std::string& datastore,
                                  const std::vector<std::vector<CellWrite>>& rows, int callers);

}  // namespace cellar::bench
