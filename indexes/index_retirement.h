// Dropping the tables of retired index versions (`cellar index drop-retired`).
//
// A version V of index T is *retired* (droppable) when, in the registry
// (index_catalog.h):
//   - its state is `retired` (MarkReady retired it when a newer version
//     finished its backfill; no transition ever leaves `retired`), and
//   - a newer version of T is `ready` (it serves: queries read the newest
//     ready version, IndexCatalog::Serving), and
//   - V is older than the serving version.
// Such a version is neither written (the index worker writes only building and
// ready versions, IndexCatalog::Writable) nor read (queries read the serving
// version). Two caches bound "no longer": an index worker may go on writing a
// version for up to kWritableVersionsCacheMs after it was retired, and a query
// may read the serving version an IndexReader read up to kServingVersionCacheMs
// (<= kWritableVersionsCacheMs) before it was retired (index_query.h). So
// the drop waits `settle_ms` (default kWritableVersionsCacheMs + 500 ms) after
// it read the registry, re-reads it, and drops only versions that are still
// retired with a newer ready version. A building or ready version is never
// dropped, nor is any version of an index that has no ready version.
// (Queries resolve the serving version after any read-your-writes wait, just
// before reading. One edge remains: a worker that cannot reach the registry
// keeps its last list; its writes to a dropped version then fail and are
// retried until it reads the registry again, which ends them.)
//
// Dropping a version removes, in every host database, its entry table
// idx_T_vN, its pointer table idx_T_vN_rows (DROP TABLE IF EXISTS) and its
// rows of index_backfill. The registry row stays (state `retired`: the
// version's history, and version numbers are never reused), so a version
// whose tables are gone from every host is "already dropped": a second run
// finds nothing to drop. A host that cannot be reached is reported for that
// version (and in unreachable_hosts) and the others are still done; a re-run
// once it is back finishes the job.
//
// Thread-safe (no shared state); safe beside running workers, queries and
// backfills for the reasons above.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell_store.h"
#include "indexes/index_catalog.h"

namespace cellar {

struct DropRetiredOptions {
  // Only this index (its table name); empty: every index in the registry.
  std::string index;
  // Report what would be dropped; drop nothing, do not wait.
  bool dry_run = false;
  // Wait between reading the registry and dropping, in milliseconds (see
  // above). Tests may shorten it only when no worker or query runs.
  int settle_ms = kWritableVersionsCacheMs + 500;
};

// One retired version with tables left on at least one host.
struct RetiredVersionDrop {
  std::string index;
  int version = 0;
  int serving_version = 0;          // the ready version that superseded it
  std::vector<std::string> tables;  // idx_T_vN, idx_T_vN_rows
  // Hosts (config names) where its tables exist (dry run) or were dropped.
  std::vector<std::string> hosts;
  // Hosts that failed ("host: error"); empty when every host was done.
  std::vector<std::string> errors;
};

struct DropRetiredReport {
  bool dry_run = false;
  // Versions whose tables a reachable host still holds (with the hosts that
  // could not be asked in their `errors`); empty: nothing to drop.
  std::vector<RetiredVersionDrop> versions;
  // Hosts that could not be asked or dropped on ("host: error"), once each.
  // Retired versions that only they might still hold are not in `versions`:
  // a run once they are back finds and drops them.
  std::vector<std::string> unreachable_hosts;
  bool ok() const {
    if (!unreachable_hosts.empty()) return false;
    for (const auto& v : versions)
      if (!v.errors.empty()) return false;
    return true;
  }
};

// Finds the retired versions (of options.index, or of every index) whose tables
// still exist on some host, and unless dry_run drops them on every host.
// Errors: Unavailable when the registry's host (the one owning shard 0) cannot
// be read; NotFound when options.index was never applied; per-host failures
// are in the report (RetiredVersionDrop::errors), not the status.
// Blocks for options.settle_ms when something is to be dropped.
Result<DropRetiredReport> DropRetiredIndexVersions(CellStore* store,
                                                   const DropRetiredOptions& options);

}  // namespace cellar
