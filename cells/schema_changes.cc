#include "cells/schema_changes.h"

#include <set>

namespace cellar {

Status CreateDatabaseIfMissing(MysqlConnection& conn, const std::string& database) {
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      conn.Query("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", {database}));
  if (!rows.empty()) return Status::Ok();
  return conn.ExecuteDdl("CREATE DATABASE IF NOT EXISTS `" + database +
                         "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin");
}

Status AddColumnsIfMissing(MysqlConnection& conn, const std::string& database,
                           const std::string& table, const std::vector<ColumnDefinition>& columns) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, conn.Query("SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                                                " WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                                                {database, table}));
  std::set<std::string> present;
  for (const SqlRow& r : rows) present.insert(r.Bytes(0));
  std::string additions;
  for (const ColumnDefinition& c : columns) {
    if (present.count(c.name)) continue;
    additions += std::string(additions.empty() ? " " : ", ") + "ADD COLUMN IF NOT EXISTS " +
                 c.name + " " + c.definition;
  }
  if (additions.empty()) return Status::Ok();
  return conn.ExecuteDdl("ALTER TABLE " + QualifiedTable(database, table) + additions);
}

}  // namespace cellar
