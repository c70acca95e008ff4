#include "changelog/relay_checkpoint.h"

#include "cells/schema_changes.h"

namespace cellar {
namespace {
std::string Table(const std::string& database) {
  return QualifiedTable(database, "relay_checkpoint");
}
}  // namespace

Status EnsureCheckpointTable(MysqlConnection& conn, const std::string& database) {
  CELLAR_RETURN_IF_ERROR(
      conn.ExecuteDdl("CREATE TABLE IF NOT EXISTS " + Table(database) +
                      " (datastore VARCHAR(64) CHARACTER SET ascii NOT NULL PRIMARY KEY,"
                      " after_added_id BIGINT UNSIGNED NOT NULL DEFAULT 0,"
                      " kafka_offset BIGINT NOT NULL DEFAULT -1,"
                      " kafka_partition INT NOT NULL DEFAULT -1,"
                      " updated_at BIGINT NOT NULL DEFAULT 0 COMMENT 'microseconds, UTC')"
                      " ENGINE=InnoDB"));
  // The exactly-once fence (internal/stream_claim.h); added in place on
  // tables of older relays.
  return AddColumnsIfMissing(conn, database, "relay_checkpoint",
                             {{"owner_epoch", "BIGINT UNSIGNED NOT NULL DEFAULT 0"},
                              {"owner_released", "TINYINT NOT NULL DEFAULT 1"},
                              {"scan_offsets", "TEXT CHARACTER SET ascii NULL"}});
}

Result<RelayCheckpoint> LoadCheckpoint(MysqlConnection& conn, const std::string& database,
                                       const std::string& datastore) {
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      conn.Query("SELECT after_added_id, kafka_offset, updated_at, kafka_partition FROM " +
                     Table(database) + " WHERE datastore = ?",
                 {datastore}));
  RelayCheckpoint cp;
  if (!rows.empty()) {
    cp.after_added_id = rows[0].Uint(0);
    cp.kafka_offset = rows[0].Int(1);
    cp.updated_at = rows[0].Int(2);
    cp.kafka_partition = static_cast<int32_t>(rows[0].Int(3));
  }
  return cp;
}

Status SaveCheckpoint(MysqlConnection& conn, const std::string& database,
                      const std::string& datastore, const RelayCheckpoint& cp) {
  return conn
      .Execute(
          "INSERT INTO " + Table(database) +
              " (datastore, after_added_id, kafka_offset, kafka_partition, updated_at)"
              " VALUES (?, ?, ?, ?, ?)"
              " ON DUPLICATE KEY UPDATE"
              " kafka_offset = IF(VALUES(after_added_id) > after_added_id,"
              "                   VALUES(kafka_offset), kafka_offset),"
              " kafka_partition = IF(VALUES(after_added_id) > after_added_id,"
              "                      VALUES(kafka_partition), kafka_partition),"
              " updated_at = IF(VALUES(after_added_id) > after_added_id,"
              "                 VALUES(updated_at), updated_at),"
              " after_added_id = GREATEST(after_added_id, VALUES(after_added_id))",
          {datastore, cp.after_added_id, cp.kafka_offset, int64_t{cp.kafka_partition}, NowMicros()})
      .status();
}

Status ResetCheckpoint(MysqlConnection& conn, const std::string& database,
                       const std::string& datastore) {
  return conn
      .Execute("INSERT INTO " + Table(database) +
                   " (datastore, after_added_id, kafka_offset, kafka_partition, updated_at)"
                   " VALUES (?, 0, -1, -1, ?) ON DUPLICATE KEY UPDATE after_added_id = 0,"
                   " kafka_offset = -1, kafka_partition = -1, scan_offsets = NULL,"
                   " updated_at = VALUES(updated_at)",
               {datastore, NowMicros()})
      .status();
}

}  // namespace cellar
