// Schema changes that reach the binary log only when they change something.
//
// MariaDB writes CREATE DATABASE IF NOT EXISTS and ALTER TABLE ... ADD COLUMN
// IF NOT EXISTS to its binary log even when they change nothing, and
// processes run them at every start, stream adoption and status read. A DDL
// event cannot be rolled back: when a primary crashes with a transaction no
// replica acknowledged and a DDL event behind it in its binary log, its crash
// recovery as a rejoining replica (--init-rpl-role=SLAVE) cannot truncate the
// unacknowledged tail and the server refuses to start ("Cannot truncate the
// binary log ... unsafe statement is found"). So these look first and run
// the statement only for what is missing. (CREATE TABLE IF NOT EXISTS of a
// table that exists is not logged; it needs no such care.)
//
// Threading: statements on the caller's connection. Names must already be
// validated as identifiers (they are spliced into the statements).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cells/mysql_client.h"

namespace cellar {

// Creates `database` (utf8mb4, binary collation: Cellar compares keys
// byte-wise) unless the server has it. Another process creating it at the
// same time is not an error.
[[nodiscard]] Status CreateDatabaseIfMissing(MysqlConnection& conn, const std::string& database);

// A column to add: its name and its definition ("BIGINT NOT NULL DEFAULT 0").
struct ColumnDefinition {
  std::string name;
  std::string definition;
};

// Adds those of `columns` that `database`.`table` lacks, in one ALTER TABLE;
// runs nothing when it has them all. REQUIRES: the table exists.
[[nodiscard]] Status AddColumnsIfMissing(MysqlConnection& conn, const std::string& database,
                                         const std::string& table,
                                         const std::vector<ColumnDefinition>& columns);

}  // namespace cellar
