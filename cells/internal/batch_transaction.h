// One group-commit transaction on a host: every waiting unit of every shard
// the host owns, one multi-row INSERT per datastore, one COMMIT.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/internal/write_unit.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

// The units of one datastore in a group transaction (any shards of the host).
struct DatastoreBatch {
  std::string datastore;
  std::vector<WriteUnit*> units;
};

// Inside a transaction on `conn` (or as its one autocommit statement, when
// there is nothing to read first), for the cells table of `datastore` in the
// host `database`:
//   1. if look_up_existing (or a unit erases), read the cells that already
//      exist at the units' addresses,
//   2. decide each unit: all-new cells are planned; an identical existing cell
//      is an idempotent success; a different one is Conflict and the unit's
//      other cells are Aborted (a unit is all or nothing); an erase reads the
//      column's top versions (locking them) and plans a tombstone, answers
//      with the tombstone that already is the latest version, or fails with
//      Conflict when its expected ref_key is not the latest (the contract of
//      CellStore::Erase),
//   3. one multi-row INSERT ... RETURNING for everything planned; its first
//      row locks `conn`'s write fence row (FencedCreatedAt) before any
//      added_id is allocated.
// Fills each unit's results, valid only once the transaction commits. Returns
// Conflict when, without look-up, an insert hit an existing address.
Status ApplyDatastoreBatch(MysqlConnection& conn, const std::string& database,
                           const std::string& datastore, const std::vector<WriteUnit*>& units,
                           bool look_up_existing, MicrosSinceEpoch now);

// One transaction over `batches` on the host `database`: ApplyDatastoreBatch
// per datastore, optimistically without reading existing cells first; a
// duplicate key redoes the transaction with the look-up. Each INSERT locks the
// write fence itself (write_fence.h, FencedCreatedAt). One datastore without
// erases is ONE autocommit INSERT ... RETURNING (one round trip); anything
// else is START TRANSACTION ... COMMIT. One fsync either way. Writers never
// wait for each other's commits.
// REQUIRES: `conn` is a registered writer (RegisterWriter) of `database` in
// autocommit mode (not UseImplicitTransactions), no transaction open.
// On OK every unit's results are filled. On error (Unavailable, Aborted for a
// deadlock or lock timeout, Internal) nothing was committed, or the outcome is
// unknown (a lost COMMIT); units' results are empty for the caller to fill.
Status RunGroupTransaction(MysqlConnection& conn, const std::string& database,
                           std::vector<DatastoreBatch>& batches);

}  // namespace cellar::internal
