// IndexCatalog: which physical versions of each index exist and which serves.
//
// Registry: table `index_versions` in the database of the host owning shard 0
// (ClusterConfig::DatabaseForShard(0), the catalog host: where the config
// puts shard 0, also after `cellar shards move` moved shard 0 away):
//   (table_name, version) -> fingerprint, state, definition JSON (the whole
//   definition: datastore, shard field, column_defs), created_at.
// States: building (written by the worker, being backfilled), ready (serves
// queries), retired (superseded; no longer written). A changed definition
// (new fingerprint) gets version N+1 in state building; the old version keeps
// serving until the backfill of N+1 completes and marks it ready.
//
// Physical tables, in every host database (ClusterConfig::HostDatabase), for
// version N of index T. Each holds the rows of every shard the host owns; the
// `shard` column leads every key, so the rows of one shard are one key range
// (a query, a check or a shard move touches only its own shard's rows):
//   idx_T_vN        entries, each in the shard of its shard-field value:
//                   shard, row_key, column_key, ref_key, added_id, source_shard,
//                   created_at, one typed column per field; PRIMARY KEY
//                   (shard, row_key, column_key); KEY (shard, shard field,
//                   field) per field and KEY (shard, shard field, created_at),
//                   so a query is one index range scan of its own shard.
//   idx_T_vN_rows   pointers, each in the shard of its row (shard = the row's
//                   shard): the ref_key last applied and the shard holding the
//                   row's entry (to move or delete it); PRIMARY KEY (shard,
//                   row_key, column_key).
//   index_backfill  resumable backfill progress per (index version, source
//                   shard): the shard log position reached and the cells read.
//   index_positions how far the worker has applied each shard's log
//                   (index_positions.h).
// Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "indexes/index_definition.h"

namespace cellar {

// How long an index worker may go on using a list of writable versions it read
// from the registry. BackfillIndex waits this long after it starts before its
// final catch-up pass, so that a version applied while workers run misses no cell.
constexpr int kWritableVersionsCacheMs = 2000;

enum class IndexState { kBuilding, kReady, kRetired };
std::string_view IndexStateName(IndexState s);

struct IndexVersion {
  std::string table;
  int version = 0;
  std::string fingerprint;
  IndexState state = IndexState::kBuilding;
  MicrosSinceEpoch created_at = 0;
};

// A version of an index and the columns it indexes (its column_defs' keys).
struct IndexedColumns {
  IndexVersion version;
  std::vector<std::string> columns;
};

struct ApplyOutcome {
  IndexVersion version;  // the newest non-retired version after apply
  bool created = false;  // a new version was created by this call
};

std::string EntryTableName(const std::string& table, int version);
std::string PointerTableName(const std::string& table, int version);

class IndexCatalog {
 public:
  explicit IndexCatalog(CellStore* store) : store_(store) {}

  // Creates the registry and, if the definition is new or changed, a new
  // version with its tables on every host. A first version over a datastore
  // with no cells starts ready; otherwise building (run backfill). Unavailable
  // if a host is unreachable (re-run: it is idempotent). FailedPrecondition
  // on a cluster still in the per-shard layout (CellStore::CheckLayout).
  Result<ApplyOutcome> Apply(const IndexDefinition& def);
  // The name of every index with a version in the registry, sorted.
  Result<std::vector<std::string>> Indexes();
  // All versions of `table`, oldest first (empty if never applied).
  Result<std::vector<IndexVersion>> Versions(const std::string& table);
  // The version queries read: the newest ready one, else the newest building
  // one. NotFound if the index was never applied.
  Result<IndexVersion> Serving(const std::string& table);
  // Versions the worker must write: building and ready ones.
  Result<std::vector<IndexVersion>> Writable(const std::string& table);
  // The building and ready versions of every index over `datastore`, with the
  // columns each indexes, from the definitions stored in the registry (a
  // version whose stored definition does not name its datastore and columns
  // is left out, with a warning). Empty when no index was ever applied.
  Result<std::vector<IndexedColumns>> WritableOver(const std::string& datastore);
  // Marks `version` ready and retires older ready versions.
  Status MarkReady(const std::string& table, int version);

  // The definition version `v` was created from (stored by Apply), so that each
  // physical version is read and written with its own columns whatever YAML
  // the caller loaded: `current` itself when its fingerprint matches.
  // NotFound for an unknown version; FailedPrecondition when the registry row
  // predates stored definitions and `current` does not match it.
  Result<IndexDefinition> DefinitionOf(const IndexDefinition& current, const IndexVersion& v);

 private:
  Status EnsureRegistry(MysqlConnection& conn);
  // A read of the registry; no rows when its table does not exist yet.
  static Result<std::vector<SqlRow>> ReadRegistry(MysqlConnection& conn, const std::string& sql,
                                                  const std::vector<SqlParam>& params = {});
  Status CreateTables(const IndexDefinition& def, int version);
  CellStore* store_;
};

}  // namespace cellar
