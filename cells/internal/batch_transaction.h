// One group-commit transaction over units of a single (shard, datastore).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/internal/write_unit.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

// The units of one (shard, datastore) in a group transaction.
struct ShardBatch {
  uint32_t shard = 0;
  std::string datastore;
  std::vector<WriteUnit*> units;
};

// Locks commit_order's row of `datastore` in the shard database (serialises
// commits per shard). With nowait, Aborted when another transaction holds it.
Status LockShardForCommit(MysqlConnection& conn, const std::string& database,
                          const std::string& datastore, uint32_t shard, bool nowait);

// How ApplyShardBatch gets the shard's commit lock.
enum class CommitLock {
  kHeld,        // the caller took it (LockShardForCommit)
  kTake,        // the INSERT takes it (INSERT ... SELECT ... FOR UPDATE), waiting
  kTakeNoWait,  // the same with NOWAIT: Aborted at once when another transaction holds it
};

// Inside an open transaction on `conn`, for one (shard, datastore), holding
// the shard's commit lock or taking it in the INSERT (`lock`; kTake* requires
// MariaDB and !look_up_existing and no erase unit):
//   2. if look_up_existing (or the batch erases), read the cells that already
//      exist at the batch's addresses,
//   3. decide each unit: all-new cells are planned; an identical existing cell
//      is an idempotent success; a different one is Conflict and the unit's
//      other cells are Aborted (a unit is all or nothing),
//   4. one multi-row INSERT ... RETURNING for everything planned.
// Fills each unit's results, valid only once the transaction commits. Returns
// Conflict when, without look-up, an insert hit an existing address.
Status ApplyShardBatch(MysqlConnection& conn, const std::string& database,
                       const std::string& datastore, uint32_t shard,
                       const std::vector<WriteUnit*>& units, bool look_up_existing,
                       MicrosSinceEpoch now, CommitLock lock = CommitLock::kHeld);

// One transaction over several shards of one host: commit locks are taken in
// (shard, datastore) order, without waiting (NOWAIT) when there are several
// shards, by the shards' INSERTs themselves when nothing must be read first; shards another writer
// is committing are left out and returned in *busy (run them again alone: a single batch waits for
// its lock). Cells are inserted optimistically without reading existing ones first; a duplicate key
// redoes the transaction with the look-up. One COMMIT, one fsync for all the
// shards that were free.
// On OK, `batches` holds the committed batches (their units' results filled).
// On error (Unavailable, Aborted for a deadlock or lock timeout, Internal)
// nothing was committed, or the outcome is unknown (a lost COMMIT); *busy is
// empty and units' results are empty for the caller to fill.
Status RunGroupTransaction(MysqlConnection& conn, const std::string& database_prefix,
                           std::vector<ShardBatch*>& batches, std::vector<ShardBatch*>* busy);

}  // namespace cellar::internal
