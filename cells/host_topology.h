// Host topology: which server of each MySQL host is its primary, at which
// epoch, and how every Cellar process follows it while it runs.
//
// Where it lives. In the host's own databases: table `topology` of the host
// database (<prefix>_<host>) holds one row, (epoch, primary server
// "address:port"), written on the primary and replicated to every replica
// like any other row. `cellar init` writes epoch 1 naming the configured
// primary (mysql.hosts[].address/port); each failover (cells/host_failover.h)
// writes epoch + 1 on the server it promotes. The epoch only grows. No file
// and no other store: the servers a process must reach anyway are the
// directory.
//
// How a process learns it. A TopologyView reads the row from every server of
// every host (a background thread, every mysql.topology_refresh, and at once
// when a writer finds its primary gone) and takes the highest epoch it finds
// whose named primary confirms it (holds that epoch itself). A new epoch
// retargets the host's connections (OnChange).
//
// How a stale view is stopped from writing. Every connection Cellar opens to
// write or read a host's primary first passes VerifyPrimary: the server must
// be writable (read_only OFF), hold the view's epoch in its topology row and
// name itself there, and, on a host with replicas in semi_sync mode, run
// lossless semi-synchronous replication (master enabled, wait point
// AFTER_SYNC). A failover makes the old primary read_only, removes its write
// fence rows (write_fence.h: every cells INSERT then fails until its
// connection registers again, and registering verifies) and kills Cellar's
// connections on it; so a writer holding a stale view reconnects, fails the
// check and refreshes. A demoted primary that comes back writable by mistake
// still names an old epoch: processes that saw the failover refuse it. Every
// server starts read_only (docs/design.md, "Replicas and failover"), so a restarted
// old primary is refused by every process.
//
// Threading: TopologyView is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar {

class MetricsRegistry;  // base/metrics.h

struct HostTopology {
  uint64_t epoch = 0;         // 0: no topology row found (a cluster before `cellar init`)
  MysqlServerConfig primary;  // at epoch 0, the configured primary
};

// The topology row as one server holds it; nullopt-like epoch 0 when the
// server has no row (or no host database yet). Unavailable when the server
// cannot be asked.
[[nodiscard]] Result<HostTopology> ReadServerTopology(MysqlConnection& conn,
                                                      const std::string& database);

// DDL of the topology table (idempotent).
std::string CreateTopologySql(const std::string& database);

// Writes (epoch, primary) into `conn`'s server's topology row, in its own
// transaction. REQUIRES: `conn` is to `primary`, writable.
[[nodiscard]] Status WriteServerTopology(MysqlConnection& conn, const std::string& database,
                                         const HostTopology& topology);

// The semi-sync heartbeat: how an emergency failover shows that no
// acknowledged write is missing, and how replica lag is measured. Every
// mysql.topology_refresh each process's TopologyView writes, on the primary
// of each host with replicas, one row (the primary's clock, whether its semi-sync was ON as the
// statement ran, its rpl_semi_sync_master_timeout). The row replicates like
// any commit. If a replica holds a heartbeat written at H with semi-sync ON,
// the primary cannot have fallen back to asynchronous commits before H + T
// (T its timeout: a fallback needs a commit that waited T for an ack, and
// acks are cumulative). So a failover that starts before H + T, to the most
// advanced replica, provably keeps every acknowledged commit.
struct SemiSyncHeartbeat {
  MicrosSinceEpoch at = 0;  // the primary's clock; 0: no heartbeat
  bool semi_sync_on = false;
  int64_t timeout_ms = 0;  // the primary's rpl_semi_sync_master_timeout
  uint64_t epoch = 0;      // the topology epoch of the primary that wrote it
};
std::string CreateSemiSyncHeartbeatSql(const std::string& database);
// Writes the heartbeat on `conn` (the host's verified primary at `epoch`).
[[nodiscard]] Status WriteSemiSyncHeartbeat(MysqlConnection& conn, const std::string& database,
                                            uint64_t epoch);
// The heartbeat `conn`'s server holds (at == 0 when none).
[[nodiscard]] Result<SemiSyncHeartbeat> ReadSemiSyncHeartbeat(MysqlConnection& conn,
                                                              const std::string& database);

// OK when the server `conn` is connected to may take writes as `host`'s
// primary at `topology` (see the file comment); otherwise Unavailable saying
// why (read_only, another epoch or server in its row, semi-sync not lossless).
[[nodiscard]] Status VerifyPrimary(MysqlConnection& conn, const ClusterConfig& config,
                                   const MysqlHostConfig& host, const HostTopology& topology);

// The endpoint of `server` of `host` (credentials, timeouts and TLS from the
// config).
MysqlEndpoint ServerEndpoint(const ClusterConfig& config, const MysqlHostConfig& host,
                             const MysqlServerConfig& server);

// ConnectPrimary of a one-off TopologyView: reads `host`'s topology from its
// servers, then connects to and verifies its primary. For short-lived users
// without a CellStore (trigger control, the purge lock).
Result<std::unique_ptr<MysqlConnection>> ConnectCurrentPrimary(const ClusterConfig& config,
                                                               size_t host);

class TopologyView {
 public:
  // Called on the refreshing thread after a host's epoch changed. Must not
  // block for long nor call back into the view's Refresh.
  using ChangeListener = std::function<void(size_t host, const HostTopology& topology)>;

  // What the last refresh saw of one replica (a server that is not the primary).
  struct ReplicaState {
    std::string server;  // "address:port"
    bool reachable = false;
    // How stale it is: its clock minus the primary's clock in the newest
    // heartbeat it holds (one a second, below); -1 when unknown.
    double lag_seconds = -1;
  };

  // Reads nothing yet: every host starts at epoch 0 with its configured
  // primary until Refresh/Start. With `metrics` (not owned, outlives the
  // view), each refresh sets cellar_mysql_topology_epoch{host},
  // cellar_mysql_replica_lag_seconds{host,server} and
  // cellar_mysql_server_up{host,server} (1 reached, 0 did not answer).
  explicit TopologyView(const ClusterConfig& config, MetricsRegistry* metrics = nullptr);
  ~TopologyView();
  TopologyView(const TopologyView&) = delete;
  TopologyView& operator=(const TopologyView&) = delete;

  // Reads every host's topology once (hosts whose servers cannot be reached
  // keep what they had), then refreshes on a background thread every
  // mysql.topology_refresh until Stop(). Idempotent.
  void Start();
  // Joins the refresher. Idempotent; also done by the destructor.
  void Stop();

  HostTopology Current(size_t host) const;
  // The replicas of `host` as the last refresh saw them.
  std::vector<ReplicaState> Replicas(size_t host) const;
  // Re-reads `host`'s topology from its servers now; returns it (changed or
  // not). Listeners run before it returns when the epoch changed.
  HostTopology Refresh(size_t host);
  // Waits until `host`'s epoch is above `epoch` or `deadline` passes,
  // refreshing every ~100 ms; returns the topology then.
  HostTopology WaitForNewer(size_t host, uint64_t epoch, MicrosSinceEpoch deadline);
  // Listeners are called in the order added. REQUIRES: before Start().
  void AddListener(ChangeListener listener);

  // The host index of `shard`: where the config puts it unless a completed
  // `cellar shards move` placed it elsewhere (shard_placement.h), as of the
  // last refresh of the hosts' placement rows. Lock-free.
  // REQUIRES: shard < config.shards.
  size_t HostOfShard(uint32_t shard) const;

  // The endpoint of `host`'s current primary.
  MysqlEndpoint PrimaryEndpoint(size_t host) const;
  // VerifyPrimary against `host`'s topology now, for MysqlHostPool's check.
  MysqlHostPool::ConnectCheck PrimaryCheck(size_t host) const;
  // A new connection to `host`'s current primary that passed VerifyPrimary,
  // for modules that hold their own connections (relay locks, trigger
  // control). Unavailable when the primary cannot be reached or refuses (the
  // topology is refreshed then, so a retry goes to a new primary).
  Result<std::unique_ptr<MysqlConnection>> ConnectPrimary(size_t host);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
