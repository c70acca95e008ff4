#include "indexes/index_positions.h"

#include <algorithm>

#include "indexes/index_position_watcher.h"

namespace cellar {
namespace {

constexpr const char* kTable = "index_positions";
constexpr size_t kRowsPerStatement = 512;  // shards per statement at most

}  // namespace

Status EnsureIndexPositionsTable(MysqlConnection& conn, const std::string& database) {
  return conn.ExecuteDdl("CREATE TABLE IF NOT EXISTS " + QualifiedTable(database, kTable) +
                         " (datastore VARCHAR(64) CHARACTER SET ascii NOT NULL,"
                         " shard INT UNSIGNED NOT NULL,"
                         " applied_added_id BIGINT UNSIGNED NOT NULL,"
                         " PRIMARY KEY (datastore, shard)) ENGINE=InnoDB");
}

Status RecordIndexPositions(MysqlConnection& conn, const std::string& database,
                            const std::string& datastore,
                            const std::map<uint32_t, uint64_t>& highest) {
  const std::vector<std::pair<uint32_t, uint64_t>> rows(highest.begin(), highest.end());
  return ExecuteRows(conn,
                     "INSERT INTO " + QualifiedTable(database, kTable) +
                         " (datastore, shard, applied_added_id) VALUES ",
                     rows.size(), kRowsPerStatement, ", ",
                     " ON DUPLICATE KEY UPDATE applied_added_id ="
                     " GREATEST(applied_added_id, VALUES(applied_added_id))",
                     [&](size_t i, std::vector<SqlParam>& p) {
                       p.insert(p.end(), {datastore, int64_t{rows[i].first}, rows[i].second});
                       return std::string("(?, ?, ?)");
                     });
}

Result<uint64_t> AppliedIndexPosition(CellStore* store, const std::string& datastore,
                                      uint32_t shard) {
  const ClusterConfig& cfg = store->config();
  const size_t host = store->HostOfShard(shard);
  CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForHost(host).Acquire());
  CELLAR_ASSIGN_OR_RETURN(
      auto rows, lease->Query("SELECT applied_added_id FROM " +
                                  QualifiedTable(cfg.HostDatabase(cfg.mysql.hosts[host]), kTable) +
                                  " WHERE datastore = ? AND shard = ?",
                              {datastore, int64_t{shard}}));
  return rows.empty() ? uint64_t{0} : rows[0].Uint(0);
}

Result<std::vector<std::pair<uint32_t, uint64_t>>> ReadIndexPositions(
    MysqlConnection& conn, const std::string& database, const std::string& datastore) {
  CELLAR_ASSIGN_OR_RETURN(auto rows,
                          conn.Query("SELECT shard, applied_added_id FROM " +
                                         QualifiedTable(database, kTable) + " WHERE datastore = ?",
                                     {datastore}));
  std::vector<std::pair<uint32_t, uint64_t>> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.emplace_back(static_cast<uint32_t>(row.Uint(0)), row.Uint(1));
  return out;
}

Status WaitForIndexPosition(CellStore* store, const std::string& datastore, uint32_t shard,
                            uint64_t added_id, int timeout_ms) {
  return IndexPositionWatcher(store).Wait(datastore, shard, added_id, timeout_ms);
}

}  // namespace cellar
