#include "indexes/index_positions.h"

#include <algorithm>
#include <chrono>
#include <thread>

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
  CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(shard).Acquire());
  CELLAR_ASSIGN_OR_RETURN(auto rows,
                          lease->Query("SELECT applied_added_id FROM " +
                                           QualifiedTable(cfg.DatabaseForShard(shard), kTable) +
                                           " WHERE datastore = ? AND shard = ?",
                                       {datastore, int64_t{shard}}));
  return rows.empty() ? uint64_t{0} : rows[0].Uint(0);
}

Status WaitForIndexPosition(CellStore* store, const std::string& datastore, uint32_t shard,
                            uint64_t added_id, int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  // The worker applies a batch in a few milliseconds: read often at first,
  // then less (at most every 20 ms) for a worker that is behind.
  int pause_ms = 1;
  while (true) {
    CELLAR_ASSIGN_OR_RETURN(uint64_t applied, AppliedIndexPosition(store, datastore, shard));
    if (applied >= added_id) return Status::Ok();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return DeadlineExceeded("the index worker has applied shard " + std::to_string(shard) +
                              " of " + datastore + " up to position " + std::to_string(applied) +
                              ", not yet " + std::to_string(added_id) + ", after " +
                              std::to_string(timeout_ms) + " ms");
    std::this_thread::sleep_until(std::min(deadline, now + std::chrono::milliseconds(pause_ms)));
    pause_ms = std::min(20, pause_ms * 2);
  }
}

}  // namespace cellar
