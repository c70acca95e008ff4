// SQL text for a host's cells table of one datastore, and reading its rows.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar::internal {

// The column list every cell SELECT uses, in the order RowToCell expects.
inline constexpr const char* kCellColumns =
    "row_key, column_name, ref_key, body, tombstone, created_at, added_id, shard";

inline std::string CellsTableName(const std::string& datastore) { return "cells_" + datastore; }

// DDL for the cells table of one (host, datastore): the host's log (idempotent).
std::string CreateCellsTableSql(const std::string& qualified_table);

// Creates the host database `database` with its write fence and one cells
// table per datastore, idempotently (CellStore::Init, cellar migrate).
Status CreateHostSchema(MysqlConnection& conn, const std::string& database,
                        const std::vector<DatastoreConfig>& datastores);

// Decodes a row selected with kCellColumns. Internal if the stored body is
// corrupt. With `body_text` non-null the body is not parsed: *body_text gets
// it as compact JSON text (DecodeBodyToJsonText; "" for a tombstone) and
// Cell::body stays null.
Result<Cell> RowToCell(const SqlRow& row, std::string* body_text = nullptr);

}  // namespace cellar::internal
