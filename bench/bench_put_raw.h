// Raw SQL phases of `cellar-bench put` (no Cellar write path), and the
// trip-like bodies every phase writes.
//
// A raw phase runs prepared statements straight into the host cells tables
// (cells_<datastore> in <prefix>_<host name>, the host log of
// cells/cell_store.h) through cellar::MysqlConnection: same columns including
// `shard`, same EncodeBody bytes, distinct random row keys, each row on the
// host owning the shard its key hashes to. Work is a list of transactions per
// MySQL host; a one-statement transaction without a fence runs in autocommit.
#pragma once

#include <cstdint>
#include <memory>
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

// A cell row's parameters in a RawStatement, and where its created_at is.
constexpr size_t kRawParamsPerRow = 7;
constexpr size_t kRawCreatedAtParam = 6;

struct RawStatement {
  std::string sql;
  std::vector<SqlParam> params;  // cell_rows: 7 per row; created_at (every 7th) set when run
  bool returning = false;        // run as a query (INSERT ... RETURNING, SELECT)
  // An INSERT of cells: its params are stamped as above and its rows count
  // as the phase's rows. Other statements (a stage's own SQL around the
  // cells, `cellar-bench pipeline`) run with their params as given and count
  // for nothing.
  bool cell_rows = true;
};

// Statements that commit together. Without a fence and with one statement,
// the statement runs in autocommit.
struct RawTransaction {
  // Non-empty: the transaction's first statement, the write fence lock
  // (SELECT conn_id ... WHERE conn_id = CONNECTION_ID() FOR UPDATE); the
  // connection must have been registered (RawPhaseOptions::register_writers).
  std::string fence_sql;
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

// `rows` rows in full `rows_per_insert`-row statements per host (rows of
// random shards of the host; only the last statement of a host may be
// shorter), one autocommit statement per transaction.
RawWork PlanRawStatements(const ClusterConfig& cfg, const std::string& datastore,
                          const std::string& column, int rows, int rows_per_insert, int body_bytes,
                          std::mt19937_64& rng);

// The ceiling of the host-log design in plain SQL: `rows` rows in
// transactions of `rows_per_transaction` rows of random shards of a host,
// each = the write fence lock + ONE multi-row prepared INSERT ... RETURNING
// (the statement Cellar's group commit sends) + COMMIT.
RawWork PlanFencedTransactions(const ClusterConfig& cfg, const std::string& datastore,
                               const std::string& column, int rows, int rows_per_transaction,
                               int body_bytes, std::mt19937_64& rng);

// The fence inside the INSERT: each transaction is ONE autocommit INSERT ...
// RETURNING whose first row's created_at is IF((SELECT conn_id FROM
// write_fence WHERE conn_id = CONNECTION_ID() FOR UPDATE) IS NULL, NULL, ?).
// The uncorrelated subquery runs while the statement is optimised, before any
// row (and so any added_id) is written, and its lock lasts until the
// statement's own commit; a missing fence row makes created_at NULL and the
// statement fails. Needs registered writers left in autocommit
// (RawPhaseOptions::keep_autocommit).
RawWork PlanFusedFenceStatements(const ClusterConfig& cfg, const std::string& datastore,
                                 const std::string& column, int rows, int rows_per_transaction,
                                 int body_bytes, std::mt19937_64& rng);

struct RawPhaseOptions {
  int connections_per_host = 4;
  // Each connection registers in the host's write_fence (INSERT IGNORE of
  // CONNECTION_ID(), committed) before the clock starts, runs with
  // autocommit off (SET autocommit = 0, as Cellar's writers do) and removes
  // its row when done.
  bool register_writers = false;
  // With register_writers: leave autocommit on (PlanFusedFenceStatements).
  bool keep_autocommit = false;
};

// A connection to mysql.hosts[host], registered in its write fence as
// `options` says. Unavailable or Internal when it cannot connect or register.
Result<std::unique_ptr<MysqlConnection>> ConnectRawConnection(const ClusterConfig& cfg, size_t host,
                                                              const RawPhaseOptions& options);
// Removes the fence row of a registered connection; best effort.
void UnregisterRawWriter(const ClusterConfig& cfg, size_t host, MysqlConnection& conn);

// Runs `work` (connections connected before the clock starts) and counts the
// rows written.
PhaseResult RunRawPhase(const ClusterConfig& cfg, RawWork& work, const RawPhaseOptions& options);

}  // namespace cellar::bench
