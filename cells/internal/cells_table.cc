#include "cells/internal/cells_table.h"

#include "cells/body_codec.h"
#include "cells/host_topology.h"
#include "cells/internal/write_fence.h"
#include "cells/schema_changes.h"

namespace cellar::internal {

std::string CreateCellsTableSql(const std::string& table) {
  return "CREATE TABLE IF NOT EXISTS " + table +
         " ("
         " added_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'position in the host log',"
         " shard INT UNSIGNED NOT NULL COMMENT 'logical shard of row_key',"
         " row_key BINARY(16) NOT NULL,"
         " column_name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,"
         " ref_key BIGINT NOT NULL,"
         " body LONGBLOB NOT NULL,"
         " tombstone TINYINT NOT NULL DEFAULT 0,"
         " created_at BIGINT NOT NULL COMMENT 'microseconds since the epoch, UTC',"
         " PRIMARY KEY (added_id),"
         " UNIQUE KEY cell_address (row_key, column_name, ref_key),"
         " KEY shard_log (shard, added_id),"
         " KEY column_created (column_name, created_at)"
         ") ENGINE=InnoDB";
}

Status CreateHostSchema(MysqlConnection& conn, const std::string& database,
                        const std::vector<DatastoreConfig>& datastores) {
  CELLAR_RETURN_IF_ERROR(CreateDatabaseIfMissing(conn, database));
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl(CreateWriteFenceSql(database)));
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl(CreateTopologySql(database)));
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl(CreateSemiSyncHeartbeatSql(database)));
  for (const auto& ds : datastores)
    CELLAR_RETURN_IF_ERROR(
        conn.ExecuteDdl(CreateCellsTableSql(QualifiedTable(database, CellsTableName(ds.name)))));
  return Status::Ok();
}

Result<Cell> RowToCell(const SqlRow& row, std::string* body_text) {
  Cell c;
  c.row_key = Uuid::FromBytes(row.Bytes(0));
  c.column = row.Bytes(1);
  c.ref_key = row.Int(2);
  c.tombstone = row.Int(4) != 0;
  c.created_at = row.Int(5);
  c.added_id = row.Uint(6);
  c.shard = static_cast<uint32_t>(row.Uint(7));
  if (body_text) body_text->clear();
  if (c.tombstone) return c;
  auto corrupt = [&](const Status& s) {
    return Internal("cell at shard " + std::to_string(c.shard) + " added_id " +
                    std::to_string(c.added_id) + ": " + s.message());
  };
  if (body_text) {
    auto text = DecodeBodyToJsonText(row.Bytes(3));
    if (!text.ok()) return corrupt(text.status());
    *body_text = std::move(text).value();
  } else {
    auto body = DecodeBody(row.Bytes(3));
    if (!body.ok()) return corrupt(body.status());
    c.body = std::move(body).value();
  }
  return c;
}

}  // namespace cellar::internal
