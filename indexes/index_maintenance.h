// Backfill and check/repair of an index version from the cell tables.
//
// Backfill walks every shard's log (shard_log) and applies each cell of an
// indexed column through IndexWriter, saving the shard's progress (its row of
// index_backfill in its host's database) after every page: an interrupted
// backfill resumes where it stopped. A shard that moved to another host since
// starts over (its position was one in the old host's log). It is safe while
// the live worker runs (the writer serialises per row and ignores older
// versions). When every shard is done the version is marked ready (it then
// serves queries; older versions retire).
//
// Check compares, for the serving version (with the definition it was built
// from), what the latest cells say the index must hold with what it holds:
// missing entries, stale entries (another ref_key than the latest cell, or
// field values that are not the latest cell's) and extra entries (no live
// cell, on the wrong shard, or in a host's table under a shard that host does
// not own). Repair deletes extra and stale entries and re-applies the latest
// cell of each missing/stale row.
//
// Backfill builds the version with the definition it was created from, and
// ends with a catch-up pass over the shard logs once workers that may have
// cached the registry from before the version existed have refreshed it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell_store.h"
#include "indexes/index_definition.h"

namespace cellar {

struct BackfillProgress {
  uint64_t cells_done = 0;   // cells read from the shard logs (all shards, all runs)
  uint64_t cells_total = 0;  // newest added_id summed over host logs (an upper bound)
  double cells_per_s = 0;
  double eta_s = 0;
};

// Runs the backfill of the newest writable version of `def`. `on_progress` is
// called after every page (may be empty); `stop` (may be null) interrupts it
// with Aborted, leaving progress saved. Unavailable when a host is down;
// FailedPrecondition on a cluster still in the per-shard layout.
Status BackfillIndex(CellStore* store, const IndexDefinition& def,
                     const std::function<void(const BackfillProgress&)>& on_progress,
                     const std::atomic<bool>* stop = nullptr);

struct IndexCheckReport {
  int version = 0;
  uint64_t expected = 0;  // entries the latest cells call for
  uint64_t present = 0;   // entries found
  uint64_t missing = 0, stale = 0, extra = 0;
  uint64_t repaired = 0;
  std::vector<std::string> examples;  // a few "missing trips/<row>/BASE" lines
};

Result<IndexCheckReport> CheckIndex(CellStore* store, const IndexDefinition& def, bool repair);

}  // namespace cellar
