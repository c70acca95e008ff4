// IndexWriter: applies one cell version to one index version.
//
// Per (row, column) the row's own shard keeps a pointer (idx_T_vN_rows, on
// the row's host, with shard = the row's shard): the ref_key last applied and
// the shard of its entry. Entries live on the host of their shard, in rows
// keyed by that shard (index_catalog.h). Applying cell version k:
//   1. lock the pointer row (created if missing with INSERT ... ON DUPLICATE
//      KEY UPDATE, which locks it exclusively, then SELECT ... FOR UPDATE, on
//      the row's shard): one writer per row at a time, across the live
//      worker, backfill and repair;
//   2. if the pointer already has ref_key >= k: nothing to do (older or
//      duplicate event: replays and out-of-order delivery change nothing);
//   3. extract the entry (a tombstone, a version whose column TTL has passed
//      or a body without valid fields yields none, the last with a counted
//      reason);
//   4. delete the old entry (its shard's row) if it lives on another shard
//      or there is none now;
//   5. upsert the new entry in its shard's rows (version-checked: never
//      replaces a newer one); 6. move the pointer to k; commit.
// When the entry's shard lives on the row's host (always with one host), steps
// 4-5 run in the pointer's transaction: one commit per event. Across hosts
// they commit on their own before the pointer does.
// A failure anywhere rolls back the pointer, so a retry redoes every step.
//
// ApplyBatch does the same for many cell versions of one host's rows at once,
// for every index version given: one transaction on that host (pointer locks
// taken in key order with one statement per index version, entry deletes and
// upserts in multi-row statements, pointers moved in one statement), plus
// one short transaction per other host holding entries, committed before it
// and before any entry of the row's own host is written, so that two batches
// of two hosts never wait on each other's entry locks. Versions of one
// (row, column) within a batch are applied in order in memory (each outcome
// is the one applying them one by one would give) and only the end state is
// written: a moved shard-field value leaves no copy behind.
// Thread-safe.
#pragma once

#include <string>

#include "base/metrics.h"
#include "base/status.h"
#include "cells/cell_store.h"
#include "indexes/index_definition.h"
#include "indexes/index_probe.h"

namespace cellar {

enum class IndexApply { kUpserted, kRemoved, kStale, kSkipped, kNotIndexed };

struct IndexApplyResult {
  IndexApply outcome = IndexApply::kNotIndexed;
  std::string skip_reason;  // for kSkipped: why the body has no entry
};

// One physical version of an index: its definition (as created) and number.
struct IndexVersionRef {
  const IndexDefinition* def = nullptr;  // not owned
  int version = 0;
};

class IndexWriter {
 public:
  // Neither is owned; both must outlive the writer. probe may be null (no
  // metrics: maintenance, purge).
  IndexWriter(CellStore* store, IndexProbe* probe) : store_(store), probe_(probe) {}

  // Unavailable/Aborted: nothing committed, retry later.
  Result<IndexApplyResult> Apply(const IndexDefinition& def, int version, const Cell& cell);

  // Applies `cells` (versions of `datastore`, in log order) to each of
  // `versions` whose definition indexes the cell's column. With
  // `record_positions`, also records in the same transaction, per shard of
  // the cells, the highest added_id as applied (index_positions.h): every cell
  // given, indexed or not, counts. On success: outcome[i][v] for cells[i] and
  // versions[v] (kNotIndexed where v does not index the column).
  // Unavailable/Aborted: nothing of the row host's transaction committed
  // (entries on other hosts may have been written: a retry rewrites them the
  // same); retry the whole batch. Cells of rows on several hosts (a shard
  // moved since the batch was formed) are applied per host, one after the
  // other. REQUIRES: cells.size() <= 5000.
  Result<std::vector<std::vector<IndexApplyResult>>> ApplyBatch(
      const std::string& datastore, const std::vector<IndexVersionRef>& versions,
      const std::vector<const Cell*>& cells, bool record_positions);

  // Removes the entry of cell version (row, column, ref_key) from `version` of
  // index `table` when the pointer says that version is the one applied (an
  // entry of a newer version stays). The pointer keeps its ref_key and loses
  // its target, so a replayed event of that version or an older one changes
  // nothing. For a purge (retention/purger.h), before it deletes the cell.
  // Returns whether an entry was removed. Unavailable/Aborted: nothing
  // committed, retry later.
  Result<bool> RemoveEntryOf(const std::string& table, int version, const Uuid& row,
                             const std::string& column, int64_t ref_key);

 private:
  CellStore* store_;
  IndexProbe* probe_;
};

}  // namespace cellar
