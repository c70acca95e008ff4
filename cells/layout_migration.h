// MigrateShardLayout: copies a cluster written by an older Cellar (one MySQL
// database <prefix>_s<N> per logical shard, ClusterConfig::LegacyShardDatabase)
// into the host log (cells/cell_store.h): `cellar migrate`.
//
// For every shard of every host and every datastore with a legacy cells
// table: rows are copied in their old added_id order, in chunks, each chunk in
// one fenced transaction (cells/internal/write_fence.h) together with its
// progress row (table layout_migration in the host database), so an
// interrupted run resumes where it stopped and a chunk is never copied twice.
// Cells keep their address, body, tombstone and created_at; they get new
// added_ids (positions in the host log). Then each table is verified: every
// legacy row must exist in the host table with the same shard, address, body
// and tombstone. Only then is the legacy table renamed to
// migrated_cells_<datastore> (kept as a backup; drop it by hand), which is what
// CellStore::CheckLayout looks for.
//
// Not migrated: index tables (re-apply and backfill the indexes) and relay
// checkpoints (the relay republishes the migrated cells from the start of the
// host log: consumers see them again, once per run).
//
// REQUIRES: no process writes the legacy layout while it runs (stop the old
// Cellar first); `cellar init` created the host databases (Init refuses while
// a legacy table exists, so migrate creates them itself).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "cells/cell_store.h"

namespace cellar {

struct MigrationStats {
  uint32_t tables_migrated = 0;  // legacy (shard, datastore) tables verified and renamed
  uint64_t cells_copied = 0;     // rows inserted into host logs by this run
  uint64_t cells_verified = 0;   // legacy rows found equal in the host logs
};

// Progress lines ("shard 3 trips: 1200 cells") go to `progress` if set.
// FailedPrecondition when a table's verification fails (names the shard and
// datastore; nothing is renamed); Unavailable when a host cannot be reached.
Result<MigrationStats> MigrateShardLayout(
    CellStore& store, const std::function<void(const std::string&)>& progress = {});

}  // namespace cellar
