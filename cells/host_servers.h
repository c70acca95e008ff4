// The MariaDB servers of a host as replication sees them: what each one is
// (primary, replica of whom, how far), and the administration statements a
// failover runs on them. MariaDB's own GTID replication throughout; Cellar
// replicates nothing itself.
//
// Threading: the functions use only the connection they are given.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/host_topology.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar {

// A GTID position ("0-1-100,1-2-7"): per replication domain, the last
// sequence number. MariaDB's gtid_strict_mode keeps sequence numbers growing
// within a domain, so positions compare domain by domain.
class GtidPosition {
 public:
  // InvalidArgument for text that is not a comma-separated list of
  // domain-server-seq triples ("" is the empty position).
  static Result<GtidPosition> Parse(const std::string& text);
  // True when this position holds everything `other` does (per domain).
  bool Covers(const GtidPosition& other) const;
  // This as a binlog state (@@gtid_binlog_state: the last GTID per domain and
  // server id): true when every GTID of `other` belongs to this history, i.e.
  // the same domain and server id reached at least its sequence number. A
  // server whose position a primary's history does not hold has commits the
  // primary lacks, even where its sequence numbers are lower.
  bool HistoryHolds(const GtidPosition& other) const;
  bool empty() const { return seq_.empty(); }
  const std::string& text() const { return text_; }

 private:
  std::map<uint32_t, uint64_t> seq_;  // domain -> sequence number (the highest)
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> by_server_;  // (domain, server) -> seq
  std::string text_;
};

struct ServerState {
  MysqlServerConfig server;
  std::string error;  // non-empty: the server could not be asked (the rest is unset)
  bool read_only = false;
  std::string gtid_binlog_pos;    // what its binary log holds
  std::string gtid_binlog_state;  // the last GTID per domain and server id in its binary log
  std::string gtid_current_pos;   // binlog or replicated, whichever is later per domain
  HostTopology topology;          // its topology row (epoch 0: none)
  SemiSyncHeartbeat heartbeat;    // the last heartbeat it holds
  MicrosSinceEpoch now = 0;       // its clock when asked
  bool semi_sync_master_enabled = false;
  std::string semi_sync_wait_point;
  bool semi_sync_master_on = false;  // Rpl_semi_sync_master_status: not fallen back
  int64_t semi_sync_no_tx = 0;       // Rpl_semi_sync_master_no_tx: commits no replica acked
  int64_t semi_sync_timeout_ms = 0;
  // Replication from a primary (SHOW SLAVE STATUS); master empty when none.
  std::string master;  // "address:port"
  bool io_running = false, sql_running = false;
  bool io_connecting = false;  // the IO thread runs but is not connected (Connecting)
  std::string gtid_io_pos;     // received from its primary
  int64_t lag_seconds = -1;    // Seconds_Behind_Master; -1 when not replicating
  std::string replication_error;

  bool reachable() const { return error.empty(); }
};

// Everything above for `server`, over `conn` (connected to it).
[[nodiscard]] Result<ServerState> InspectServer(MysqlConnection& conn, const ClusterConfig& config,
                                                const MysqlHostConfig& host,
                                                const MysqlServerConfig& server);
// InspectServer of every server of `host`, connecting to each; an unreachable
// one has `error` set.
std::vector<ServerState> InspectHost(const ClusterConfig& config, const MysqlHostConfig& host);

// Makes `conn`'s server replicate from `primary` with GTIDs (CHANGE MASTER
// ... MASTER_USE_GTID = current_pos for a former primary, whose own binlog
// counts, else slave_pos), reconnecting every second, and starts it.
[[nodiscard]] Status ReplicateFrom(MysqlConnection& conn, const ClusterConfig& config,
                                   const MysqlServerConfig& primary, bool former_primary);
// Stops replication on `conn`'s server and forgets its primary.
[[nodiscard]] Status StopReplicating(MysqlConnection& conn);
// Makes `conn`'s server a primary: semi-synchronous with wait point
// AFTER_SYNC (and rpl_semi_sync_master_wait_no_slave OFF) when `host` is
// semi_sync, then writable.
[[nodiscard]] Status OpenAsPrimary(MysqlConnection& conn, const MysqlHostConfig& host);
// Fences `conn`'s server: read_only, its write fence rows deleted (waits for
// the transactions holding them; every later cells INSERT fails until its
// connection registers again, which verifies the primary) and every
// connection of Cellar's MySQL user killed except replication and `conn`.
// Returns once the killed connections have ended, so no commit of theirs can
// reach the binlog afterwards; DeadlineExceeded (naming them) when some still
// run after `timeout_ms`.
[[nodiscard]] Status FenceServer(MysqlConnection& conn, const ClusterConfig& config,
                                 const MysqlHostConfig& host, int64_t timeout_ms);
// MASTER_GTID_WAIT: OK once `conn`'s server has applied `position`;
// DeadlineExceeded after `timeout_ms`.
[[nodiscard]] Status WaitForPosition(MysqlConnection& conn, const std::string& position,
                                     int64_t timeout_ms);

}  // namespace cellar
