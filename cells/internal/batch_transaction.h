// One group-commit transaction on a host: every waiting unit of every shard
// the host owns, multi-row INSERTs of a few fixed sizes per datastore, one
// COMMIT.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/internal/write_unit.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

// Cells INSERTs carry at most this many rows each, and exactly as many as
// there are cells up to kExactInsertRows (a group commit of single puts is
// usually one statement); larger batches are split on the ladder of
// StatementRowCounts (mysql_client.h) with steps of kInsertLargeStep above
// 64, so a writer connection prepares at most 48 INSERT texts (~10 MB of
// server memory) instead of one per batch size (measured: 120 MB for sizes up
// to 256). The step is 16, not the ladder's default 32, so that more batch
// sizes fit one statement (UnitsForOneStatement); a step of 8 (~17 MB) made
// more transactions single statements but measured no faster.
inline constexpr size_t kMaxInsertRows = 256;
inline constexpr size_t kExactInsertRows = 32;
inline constexpr size_t kInsertLargeStep = 16;

// The row counts of the INSERT statements that write `cells` cells.
std::vector<size_t> InsertRowCounts(size_t cells);
// InsertRowCounts(cells).size() == 1, without allocating.
bool FitsOneInsert(size_t cells);

// How many of `units` (in queue order) one transaction should take so that
// its cells fit one INSERT: a cell count off the ladder costs BEGIN, two
// INSERTs and COMMIT, four round trips where one would do. All of them when
// their count is on the ladder (or none shorter is); otherwise the longest
// prefix whose count is, provided it leaves at most a quarter of the cells
// for the next transaction and does not separate units submitted together
// (WriteUnit::joins_previous). Never 0 for non-empty `units`.
size_t UnitsForOneStatement(const std::vector<WriteUnit*>& units);

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
//   3. multi-row INSERT ... RETURNING statements for everything planned, of
//      the sizes InsertRowCounts gives (one statement of every planned cell
//      when single_statement: the caller runs it as an autocommit
//      transaction); the first row of each locks `conn`'s write fence row
//      (FencedCreatedAt) before any added_id is allocated.
// Fills each unit's results, valid only once the transaction commits. Returns
// Conflict when, without look-up, an insert hit an existing address.
Status ApplyDatastoreBatch(MysqlConnection& conn, const std::string& database,
                           const std::string& datastore, const std::vector<WriteUnit*>& units,
                           bool look_up_existing, bool single_statement, MicrosSinceEpoch now);

// One transaction over `batches` on the host `database`: ApplyDatastoreBatch
// per datastore, optimistically without reading existing cells first; a
// duplicate key redoes the transaction with the look-up. Each INSERT locks the
// write fence itself (write_fence.h, FencedCreatedAt). One datastore without
// erases whose cells fit one INSERT (InsertRowCounts) is ONE autocommit
// INSERT ... RETURNING (one round trip); anything else is START TRANSACTION
// ... COMMIT. One fsync either way. Writers never
// wait for each other's commits.
// REQUIRES: `conn` is a registered writer (RegisterWriter) of `database` in
// autocommit mode (not UseImplicitTransactions), no transaction open.
// On OK every unit's results are filled. On error (Unavailable, Aborted for a
// deadlock or lock timeout, FailedPrecondition when the connection's write
// fence row is gone: a failover demoted the server, the caller reconnects,
// verifies the primary and registers again; Internal) nothing was committed,
// or the outcome is unknown (a lost COMMIT); units' results are empty for the
// caller to fill.
Status RunGroupTransaction(MysqlConnection& conn, const std::string& database,
                           std::vector<DatastoreBatch>& batches);

}  // namespace cellar::internal
