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
// from), what the latest cells say the index must hold with what it holds,
// one page at a time (IndexCheckOptions::page cells or entries in memory):
// missing entries, stale entries (another ref_key than the latest cell, or
// field values that are not the latest cell's) and extra entries (one its
// row's pointer does not point at: no live cell, or on the wrong shard; one of
// a version past its TTL; or in a host's table under a shard that host does
// not own). Repair fixes a row
// under its pointer's lock, from its latest cell read under that lock, as a
// writer would: safe beside the live worker and concurrent writes (a version
// committed meanwhile is applied after it, never undone; an entry written
// meanwhile is not deleted). Under live writes the counts include rows the
// worker had not applied yet (its lag); repairing those is harmless.
// Implementation: index_check.cc.
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

struct IndexCheckOptions {
  bool repair = false;  // fix what is found (see CheckIndex)
  int page = 500;       // cells or entries held at a time (1..10000)
  // Tests only: called after each page is read, before it is compared (a
  // write here is one that raced the check).
  std::function<void()> after_page_read;
};

Result<IndexCheckReport> CheckIndex(CellStore* store, const IndexDefinition& def,
                                    const IndexCheckOptions& options);
inline Result<IndexCheckReport> CheckIndex(CellStore* store, const IndexDefinition& def,
                                           bool repair) {
  IndexCheckOptions options;
  options.repair = repair;
  return CheckIndex(store, def, options);
}

}  // namespace cellar
