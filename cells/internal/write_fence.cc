#include "cells/internal/write_fence.h"

#include <set>

namespace cellar::internal {
namespace {

std::string FenceTable(const std::string& database) {
  return QualifiedTable(database, "write_fence");
}

// Internal naming `cellar init` when the fence table does not exist.
Status NameInitIfMissing(const Status& st, const std::string& database) {
  if (st.code() == StatusCode::kInternal && st.message().find("doesn't exist") != std::string::npos)
    return Internal("host database " + database + " has no write_fence table: run `cellar init`");
  return st;
}

}  // namespace

namespace {
Status RegisterUnlogged(MysqlConnection& conn, const std::string& database);
}  // namespace

std::string CreateWriteFenceSql(const std::string& database) {
  return "CREATE TABLE IF NOT EXISTS " + FenceTable(database) +
         " (conn_id BIGINT UNSIGNED NOT NULL PRIMARY KEY COMMENT 'CONNECTION_ID() of a writer',"
         " registered_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB";
}

Status RegisterWriter(MysqlConnection& conn, const std::string& database) {
  // Fence rows name connections of this server: they must never replicate
  // (a replica applying another server's fence rows, or missing rows a
  // failover deleted here, would stop its replication). So a server with a
  // binary log registers with sql_log_bin off (which needs BINLOG ADMIN).
  CELLAR_ASSIGN_OR_RETURN(auto log_bin, conn.Query("SELECT @@log_bin"));
  CELLAR_RETURN_IF_ERROR(conn.Commit());
  const bool logged = !log_bin.empty() && log_bin[0].Int(0) != 0;
  if (logged) CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("SET SESSION sql_log_bin = 0"));
  Status st = RegisterUnlogged(conn, database);
  if (logged && !conn.broken()) {
    Status restore = conn.ExecuteDdl("SET SESSION sql_log_bin = 1");
    if (st.ok()) st = restore;
  }
  return st;
}

namespace {
Status RegisterUnlogged(MysqlConnection& conn, const std::string& database) {
  const std::string table = FenceTable(database);
  // Rows of closed connections are never locked again; drop them so the
  // readers' scan stays small. A live connection is always in PROCESSLIST
  // before its row exists, so no live writer loses its row here.
  // Found with a plain read, deleted by primary key: a locking scan would
  // wait for every open writer.
  auto dead = conn.Query("SELECT conn_id FROM " + table +
                         " WHERE conn_id NOT IN (SELECT ID FROM information_schema.PROCESSLIST)");
  Status st = dead.status();
  for (size_t i = 0; st.ok() && i < dead->size(); ++i)
    st = conn.Execute("DELETE FROM " + table + " WHERE conn_id = ?", {(*dead)[i].Uint(0)}).status();
  if (st.ok())
    st = conn.Execute("INSERT IGNORE INTO " + table + " (conn_id) VALUES (CONNECTION_ID())")
             .status();
  if (st.ok())
    st = conn.Execute(
                 "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), "
                 "'STRICT_ALL_TABLES')")
             .status();
  if (st.ok()) return conn.Commit();
  conn.Rollback();
  return NameInitIfMissing(st, database);
}
}  // namespace

Status EnterWriteFence(MysqlConnection& conn, const std::string& database) {
  auto rows = conn.Query("SELECT conn_id FROM " + FenceTable(database) +
                         " WHERE conn_id = CONNECTION_ID() FOR UPDATE");
  if (!rows.ok()) return NameInitIfMissing(rows.status(), database);
  if (rows->empty())
    return FailedPrecondition("this connection's write fence row in " + database + " is gone");
  return Status::Ok();
}

std::string FencedCreatedAt(const std::string& database) {
  return "IF((SELECT conn_id FROM " + FenceTable(database) +
         " WHERE conn_id = CONNECTION_ID() FOR UPDATE) IS NULL, NULL, ?)";
}

Status FencedInsertStatus(const Status& st, const std::string& database) {
  if (st.ok()) return st;
  const std::string& m = st.message();
  if (m.find("created_at") != std::string::npos && m.find("cannot be null") != std::string::npos)
    return FailedPrecondition("this connection's write fence row in " + database + " is gone");
  if (m.find("write_fence") != std::string::npos) return NameInitIfMissing(st, database);
  return st;
}

Status WaitForOpenWriters(MysqlConnection& conn, const std::string& database, int max_wait_s) {
  const std::string table = FenceTable(database);
  CELLAR_ASSIGN_OR_RETURN(auto all, conn.Query("SELECT conn_id FROM " + table));
  if (all.empty()) return Status::Ok();
  // The rows no transaction holds (locked and released within this autocommit
  // statement); the others belong to open writing transactions.
  CELLAR_ASSIGN_OR_RETURN(auto free_rows,
                          conn.Query("SELECT conn_id FROM " + table + " FOR UPDATE SKIP LOCKED"));
  std::set<uint64_t> free_ids;
  for (const auto& r : free_rows) free_ids.insert(r.Uint(0));
  for (const auto& r : all) {
    const uint64_t id = r.Uint(0);
    if (free_ids.count(id)) continue;
    // One row per statement: this waits for that writer alone, and holds the
    // row only for the instant between being granted it and the statement's
    // end, so no other writer ever waits behind the reader.
    auto waited = conn.Query("SELECT conn_id FROM " + table +
                                 " WHERE conn_id = ? FOR UPDATE WAIT " + std::to_string(max_wait_s),
                             {id});
    if (!waited.ok()) {
      if (waited.status().code() == StatusCode::kAborted)
        return DeadlineExceeded("a writing transaction on " + database + " (connection " +
                                std::to_string(id) + ") is still open after " +
                                std::to_string(max_wait_s) + " s");
      return waited.status();
    }
  }
  return Status::Ok();
}

}  // namespace cellar::internal
