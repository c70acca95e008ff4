// Raw SQL baselines of `cellar-bench put` (no Cellar write path), and the
// trip-like bodies every phase writes.
//
// A raw phase runs prepared statements straight into the cells tables of the
// shard databases through cellar::MysqlConnection: same columns, same
// EncodeBody bytes, distinct random row keys, each row in the shard its key
// hashes to. Work is a list of transactions per MySQL host; a one-statement
// transaction runs in autocommit.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar::bench {

// A realistic trip document (~380 bytes of JSON text), padded with a
// polyline-like "route" string up to about `target_bytes` when that is larger.
nlohmann::json MakeTripBody(std::mt19937_64& rng, int target_bytes);

struct RawStatement {
  uint32_t shard = 0;
  std::string sql;
  std::vector<SqlParam> params;  // 6 per row; created_at (every 6th) set when run
};

// Statements that commit together (autocommit when there is one).
struct RawTransaction {
  std::vector<RawStatement> statements;
};

// Transactions per host (index = host in the config).
using RawWork = std::vector<std::vector<RawTransaction>>;

struct PhaseResult {
  double seconds = 0;
  uint64_t rows = 0;
  uint64_t errors = 0;
  std::string first_error;
  bool interrupted = false;
};

// `rows` rows in full `rows_per_insert`-row statements per shard (only the
// last statement may be shorter), one statement per transaction.
RawWork PlanRawStatements(const ClusterConfig& cfg, const std::vector<uint32_t>& host_of_shard,
                          const std::string& datastore, const std::string& column, int rows,
                          int rows_per_insert, int body_bytes, std::mt19937_64& rng);

// The best a group commit can do when every cell is the only one of its
// shard in the transaction: `rows` rows, one single-row INSERT each, in
// transactions of `rows_per_transaction` rows of distinct shards of a host.
RawWork PlanShardRowTransactions(const ClusterConfig& cfg,
                                 const std::vector<uint32_t>& host_of_shard,
                                 const std::string& datastore, const std::string& column, int rows,
                                 int rows_per_transaction, int body_bytes, std::mt19937_64& rng);

// Runs `work` over `connections_per_host` connections per host (connected
// before the clock starts) and counts the rows written.
PhaseResult RunRawPhase(const ClusterConfig& cfg, RawWork& work, int connections_per_host);

}  // namespace cellar::bench
