#include "cells/layout_migration.h"

#include "cells/host_topology.h"
#include "cells/internal/cells_table.h"
#include "cells/internal/write_fence.h"
#include "cells/mysql_client.h"

namespace cellar {
namespace {

constexpr int kChunk = 1000;

Result<bool> TableExists(MysqlConnection& c, const std::string& db, const std::string& table) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query("SELECT COUNT(*) FROM information_schema.TABLES"
                                             " WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                                             {db, table}));
  return !rows.empty() && rows[0].Uint(0) > 0;
}

// Copies one legacy table in chunks; returns the rows inserted.
Result<uint64_t> CopyTable(MysqlConnection& c, const std::string& host_db,
                           const std::string& legacy_table, const std::string& host_table,
                           uint32_t shard, const std::string& datastore) {
  const std::string progress = QualifiedTable(host_db, "layout_migration");
  uint64_t copied = 0;
  while (true) {
    CELLAR_ASSIGN_OR_RETURN(auto done, c.Query("SELECT after_added_id FROM " + progress +
                                                   " WHERE shard = ? AND datastore = ?",
                                               {uint64_t{shard}, datastore}));
    const uint64_t after = done.empty() ? 0 : done[0].Uint(0);
    CELLAR_ASSIGN_OR_RETURN(
        auto hi_rows,
        c.Query("SELECT MAX(added_id) FROM (SELECT added_id FROM " + legacy_table +
                    " WHERE added_id > ? ORDER BY added_id LIMIT " + std::to_string(kChunk) + ") t",
                {after}));
    if (hi_rows.empty() || hi_rows[0].IsNull(0)) {
      CELLAR_RETURN_IF_ERROR(c.Commit());  // ends the read-only implicit transaction
      return copied;
    }
    const uint64_t hi = hi_rows[0].Uint(0);
    CELLAR_RETURN_IF_ERROR(c.Commit());
    // One fenced transaction: the chunk, in its old order, and the progress row.
    Status st = internal::EnterWriteFence(c, host_db);
    Result<uint64_t> n = st.ok() ? c.Execute("INSERT IGNORE INTO " + host_table +
                                                 " (shard, row_key, column_name, ref_key, body,"
                                                 " tombstone, created_at)"
                                                 " SELECT ?, row_key, column_name, ref_key, body,"
                                                 " tombstone, created_at FROM " +
                                                 legacy_table +
                                                 " WHERE added_id > ? AND added_id <= ?"
                                                 " ORDER BY added_id",
                                             {uint64_t{shard}, after, hi})
                                 : Result<uint64_t>(st);
    if (n.ok())
      st = c.Execute("INSERT INTO " + progress +
                         " (shard, datastore, after_added_id) VALUES (?, ?, ?)"
                         " ON DUPLICATE KEY UPDATE after_added_id = VALUES(after_added_id)",
                     {uint64_t{shard}, datastore, hi})
               .status();
    else
      st = n.status();
    if (st.ok()) st = c.Commit();
    if (!st.ok()) {
      c.Rollback();
      return st;
    }
    copied += *n;
  }
}

// Every legacy row is in the host table with the same shard, address, body
// and tombstone. Returns the number of legacy rows.
Result<uint64_t> Verify(MysqlConnection& c, const std::string& legacy_table,
                        const std::string& host_table, uint32_t shard,
                        const std::string& datastore) {
  CELLAR_ASSIGN_OR_RETURN(auto total, c.Query("SELECT COUNT(*) FROM " + legacy_table));
  CELLAR_ASSIGN_OR_RETURN(
      auto equal, c.Query("SELECT COUNT(*) FROM " + legacy_table + " l JOIN " + host_table +
                              " h ON h.row_key = l.row_key AND h.column_name = l.column_name"
                              " AND h.ref_key = l.ref_key WHERE h.shard = ? AND h.body = l.body"
                              " AND h.tombstone = l.tombstone AND h.created_at = l.created_at",
                          {uint64_t{shard}}));
  CELLAR_RETURN_IF_ERROR(c.Commit());
  const uint64_t want = total[0].Uint(0), got = equal[0].Uint(0);
  if (want != got)
    return FailedPrecondition("shard " + std::to_string(shard) + " " + datastore + ": " +
                              std::to_string(want - got) + " of " + std::to_string(want) +
                              " legacy cells are missing or differ in the host log");
  return want;
}

}  // namespace

Result<MigrationStats> MigrateShardLayout(CellStore& store,
                                          const std::function<void(const std::string&)>& progress) {
  const ClusterConfig& config = store.config();
  MigrationStats stats;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
    const MysqlHostConfig& host = config.mysql.hosts[h];
    const std::string host_db = config.HostDatabase(host);
    CELLAR_ASSIGN_OR_RETURN(auto conn, store.topology().ConnectPrimary(h));
    MysqlConnection& c = *conn;
    CELLAR_RETURN_IF_ERROR(internal::CreateHostSchema(c, host_db, config.datastores));
    CELLAR_RETURN_IF_ERROR(c.ExecuteDdl(
        "CREATE TABLE IF NOT EXISTS " + QualifiedTable(host_db, "layout_migration") +
        " (shard INT UNSIGNED NOT NULL, datastore VARCHAR(64) CHARACTER SET ascii NOT NULL,"
        " after_added_id BIGINT UNSIGNED NOT NULL, PRIMARY KEY (shard, datastore))"
        " ENGINE=InnoDB"));
    CELLAR_RETURN_IF_ERROR(c.UseImplicitTransactions());
    CELLAR_RETURN_IF_ERROR(internal::RegisterWriter(c, host_db));
    for (uint32_t s : host.shards) {
      const std::string legacy_db = config.LegacyShardDatabase(s);
      for (const auto& ds : config.datastores) {
        const std::string name = internal::CellsTableName(ds.name);
        CELLAR_ASSIGN_OR_RETURN(bool exists, TableExists(c, legacy_db, name));
        if (!exists) continue;
        const std::string legacy_table = QualifiedTable(legacy_db, name);
        const std::string host_table = QualifiedTable(host_db, name);
        CELLAR_ASSIGN_OR_RETURN(uint64_t copied,
                                CopyTable(c, host_db, legacy_table, host_table, s, ds.name));
        CELLAR_ASSIGN_OR_RETURN(uint64_t verified, Verify(c, legacy_table, host_table, s, ds.name));
        CELLAR_RETURN_IF_ERROR(c.ExecuteDdl("RENAME TABLE " + legacy_table + " TO " +
                                            QualifiedTable(legacy_db, "migrated_" + name)));
        stats.cells_copied += copied;
        stats.cells_verified += verified;
        ++stats.tables_migrated;
        if (progress)
          progress("shard " + std::to_string(s) + " " + ds.name + ": " + std::to_string(verified) +
                   " cells verified (" + std::to_string(copied) + " copied now)");
      }
    }
  }
  return stats;
}

}  // namespace cellar
