#include "cells/shard_placement.h"

#include <map>

namespace cellar {

std::string CreateShardPlacementSql(const std::string& database) {
  return "CREATE TABLE IF NOT EXISTS " + QualifiedTable(database, "shard_placement") +
         " (shard INT UNSIGNED NOT NULL PRIMARY KEY,"
         " host VARCHAR(64) CHARACTER SET ascii NOT NULL,"
         " move_seq BIGINT UNSIGNED NOT NULL,"
         " moved_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB";
}

Status WriteShardPlacement(MysqlConnection& conn, const std::string& database,
                           const ShardPlacementRow& row) {
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl(CreateShardPlacementSql(database)));
  // host first: it compares against the move_seq held before this statement.
  return conn
      .Execute("INSERT INTO " + QualifiedTable(database, "shard_placement") +
                   " (shard, host, move_seq) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE"
                   " host = IF(VALUES(move_seq) > move_seq, VALUES(host), host),"
                   " moved_at = IF(VALUES(move_seq) > move_seq, CURRENT_TIMESTAMP(6), moved_at),"
                   " move_seq = GREATEST(move_seq, VALUES(move_seq))",
               {uint64_t{row.shard}, row.host, row.move_seq})
      .status();
}

std::vector<uint32_t> ResolveShardHosts(const ClusterConfig& config,
                                        const std::vector<ShardPlacementRow>& rows) {
  std::vector<uint32_t> hosts(config.shards, 0);
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h)
    for (uint32_t s : config.mysql.hosts[h].shards)
      if (s < config.shards) hosts[s] = static_cast<uint32_t>(h);
  std::map<uint32_t, const ShardPlacementRow*> latest;
  for (const ShardPlacementRow& r : rows) {
    if (r.shard >= config.shards) continue;
    auto& best = latest[r.shard];
    if (!best || r.move_seq > best->move_seq) best = &r;
  }
  for (const auto& [shard, row] : latest)
    for (size_t h = 0; h < config.mysql.hosts.size(); ++h)
      if (config.mysql.hosts[h].name == row->host) hosts[shard] = static_cast<uint32_t>(h);
  return hosts;
}

}  // namespace cellar
