// One group-commit transaction over units of a single (shard, datastore).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/internal/write_unit.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

// Runs the whole transaction on `conn`:
//   1. lock commit_order's row for the datastore (serialises commits per shard),
//   2. read the cells that already exist at the batch's addresses,
//   3. decide each unit: all-new cells are planned; an identical existing cell
//      is an idempotent success; a different one is Conflict and the unit's
//      other cells are Aborted (a unit is all or nothing),
//   4. one multi-row INSERT for everything planned, then COMMIT.
// On OK every unit's `results` is filled. On error (Unavailable, Aborted for a
// deadlock, Internal) nothing was committed by this call or the outcome is
// unknown (a lost COMMIT): units' results are left empty for the caller to fill.
Status RunBatchTransaction(MysqlConnection& conn, const std::string& database,
                           const std::string& datastore, uint32_t shard,
                           const std::vector<WriteUnit*>& units);

}  // namespace cellar::internal
