// Shard placement: which host owns each logical shard, as it changes with
// `cellar shards move` while every process runs.
//
// The config's `mysql.hosts[].shards` lists are the placement a cluster is
// created with. Each completed move records one row (shard, host, move_seq)
// in table `shard_placement` of both hosts' databases (the source's and the
// target's, each replicated to its replicas). For each shard the row with the
// highest move_seq names its host; a shard without a row stays where the
// config puts it. A move's move_seq is one above the highest any host holds
// for that shard, so the sequence only grows, and either host of the latest
// move answering is enough to know where the shard is.
//
// Every process's TopologyView (host_topology.h) reads the rows of every host
// each mysql.topology_refresh and resolves the placement with
// ResolveShardHosts. A process with a stale view cannot write the shard where
// it was: the source keeps the shard frozen (shard_move.h) after the move.
//
// Threading: pure functions and statements on the caller's connection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar {

struct ShardPlacementRow {
  uint32_t shard = 0;
  std::string host;       // a mysql.hosts[].name
  uint64_t move_seq = 0;  // 1 for a shard's first move, then + 1 per move
  friend bool operator==(const ShardPlacementRow&, const ShardPlacementRow&) = default;
};

// DDL of the placement table (idempotent).
std::string CreateShardPlacementSql(const std::string& database);

// The rows `conn`'s server holds; empty when the table does not exist yet.
// Unavailable when the server cannot be asked.
[[nodiscard]] Result<std::vector<ShardPlacementRow>> ReadShardPlacement(
    MysqlConnection& conn, const std::string& database);

// Records `row` on `conn`'s server (its own transaction); a row with a lower
// move_seq than the one held for the shard changes nothing.
// REQUIRES: `conn` is to the primary of the host of `database`.
[[nodiscard]] Status WriteShardPlacement(MysqlConnection& conn, const std::string& database,
                                         const ShardPlacementRow& row);

// The host index of every shard: the config's lists, overridden per shard by
// the row with the highest move_seq among `rows` (rows naming a host or shard
// the config does not have are ignored).
std::vector<uint32_t> ResolveShardHosts(const ClusterConfig& config,
                                        const std::vector<ShardPlacementRow>& rows);

}  // namespace cellar
