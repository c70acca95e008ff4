// The purge of one host's cells table of one datastore (CellStore::PurgeHost).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar::internal {

// Deletes the expired versions of `ds`'s TTL columns from `qualified_table`
// (a host's cells table), in added_id order, `options.batch_cells` at a time:
// selects a batch, hands it to options.before_delete, then deletes exactly
// those cells. Cells with added_id > options.max_added_id are never deleted;
// they are counted in held_back. Expiry is judged against NowMicros() once, at
// the start. On an error, the cells of earlier batches stay deleted and
// `stats` counts them.
Status PurgeCellsTable(MysqlConnection& conn, const std::string& qualified_table,
                       const DatastoreConfig& ds, const PurgeOptions& options, PurgeStats* stats);

}  // namespace cellar::internal
