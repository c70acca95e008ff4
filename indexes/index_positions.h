// Index positions: how far the index worker has applied each shard's log, so
// that a query can wait for its caller's own writes ("read your index writes").
//
// Table `index_positions` in every host database: (datastore, shard) ->
// applied_added_id, the highest added_id of the shard's host log that the
// worker has applied to every writable index version, with everything before
// it in the shard's log. The worker writes it in the transaction of the
// entries and pointers of the same events (IndexWriter::ApplyBatch), one batch
// of a host at a time in log order, so a position that is read is exact: every
// cell of the shard up to it is in the index (entries on other hosts commit
// before it). Only ever raised (GREATEST): a replay after a rebalance does not
// lower it.
// Thread-safe (free functions over a CellStore).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"

namespace cellar {

// Creates the table in `database` if it is missing.
Status EnsureIndexPositionsTable(MysqlConnection& conn, const std::string& database);

// Raises the positions of `highest` (shard -> added_id) of `datastore` in
// `database`, within the caller's transaction on `conn`.
Status RecordIndexPositions(MysqlConnection& conn, const std::string& database,
                            const std::string& datastore,
                            const std::map<uint32_t, uint64_t>& highest);

// The applied position of `shard` of `datastore` on the shard's host; 0 when
// nothing was applied yet. Unavailable when the host is down.
// REQUIRES: shard < the cluster's shard count.
Result<uint64_t> AppliedIndexPosition(CellStore* store, const std::string& datastore,
                                      uint32_t shard);

// Every (shard, applied position) of `datastore` recorded in `database`, in
// one statement. REQUIRES: `database` is a validated host database name.
Result<std::vector<std::pair<uint32_t, uint64_t>>> ReadIndexPositions(MysqlConnection& conn,
                                                                      const std::string& database,
                                                                      const std::string& datastore);

// Waits until the applied position of `shard` reaches `added_id`
// (IndexPositionWatcher::Wait with a watcher of its own: a caller that waits
// often keeps one watcher instead). OK once it has; DeadlineExceeded after
// `timeout_ms` (the message says how far the worker is); Unavailable when the
// host is down.
Status WaitForIndexPosition(CellStore* store, const std::string& datastore, uint32_t shard,
                            uint64_t added_id, int timeout_ms);

}  // namespace cellar
