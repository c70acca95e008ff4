// Failover of a MySQL host: `cellar host failover HOST [--to SERVER]`, and
// the bootstrap of a host's topology by `cellar init`.
//
// Planned (the primary answers):
//   1. fence the primary (host_servers.h FenceServer): read_only, its write
//      fence rows deleted, Cellar's connections on it killed and ended (a
//      commit in progress finishes first); writes to the host are held by
//      every writer from here (mysql.hold_writes);
//   2. wait until the target replica has applied the primary's whole binlog
//      (MASTER_GTID_WAIT);
//   3. promote the target: replication stopped, topology epoch + 1 written on
//      it, every other server (the old primary included) pointed at it,
//      semi-sync AFTER_SYNC enabled, read_only off, verified as a process
//      would (VerifyPrimary). Held writes go there once their processes see
//      the new epoch (within mysql.topology_refresh).
//   Any failure before the promotion reopens the old primary: nothing changed.
// Emergency (the primary does not answer):
//   1. choose the reachable replica that received the most (by GTID), or the
//      one named by `to` (refused if another received more);
//   2. let it apply everything it received;
//   3. show that no acknowledged write is missing (host_topology.h,
//      SemiSyncHeartbeat): the host is semi_sync, every replica answers, and
//      the target holds a heartbeat written with semi-sync ON less than the
//      primary's semi-sync timeout (less a second) ago. Otherwise refuse
//      (FailedPrecondition, replication restarted: nothing changed) unless
//      accept_loss, and then report from when commits may be lost;
//   4. promote it as above. The old primary stays as it is: it starts
//      read_only and holds an older epoch, so no process writes to it; a
//      later failover run fences it when it answers.
// Running it twice, or twice at once, is harmless: one run at a time holds a
// named lock (GET_LOCK) on the first server of the host that answers, and a
// run whose target is already the primary only fences the other servers and
// points those that do not replicate from it at it (how a former primary
// rejoins after an emergency failover: restart it with --init-rpl-role=SLAVE,
// then run `cellar host failover HOST --to <the primary>`), except a server
// holding commits the primary lacks (`diverged`).
//
// Errors: InvalidArgument for an unknown host, a `to` that is not a server of
// the host, a host without replicas, a catch_up_timeout_ms <= 0 (nothing
// changed); FailedPrecondition
// when the target does not replicate from the primary, when no replica can be
// promoted, when loss cannot be ruled out, when another failover of the host
// runs; DeadlineExceeded when the target does not catch up in time or a
// connection the fence killed still runs after catch_up_timeout_ms;
// Unavailable when a server fails mid-way (the message says which step).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

struct FailoverOptions {
  std::string to;            // "address:port" of the server to promote; "": choose
  bool accept_loss = false;  // emergency: promote even when loss cannot be ruled out
  // Planned: for the fenced primary's killed connections to end, and for the
  // target to apply the primary's binlog.
  int64_t catch_up_timeout_ms = 30000;
};

struct FailoverReport {
  std::string host;
  std::string kind;      // "planned", "emergency" or "none" (the target already was primary)
  std::string from, to;  // servers, "address:port"
  uint64_t epoch_before = 0, epoch_after = 0;
  std::string position;                  // GTID position of the new primary when promoted
  std::vector<std::string> repointed;    // servers now replicating from `to`
  std::vector<std::string> fenced;       // servers made read_only by this run
  std::vector<std::string> unreachable;  // servers that did not answer
  // Servers holding commits the primary lacks (a former primary's tail after
  // --accept-loss): not pointed at it; rebuild them from the primary.
  std::vector<std::string> diverged;
  bool loss_ruled_out = true;
  std::string may_be_lost;        // accept_loss without proof: which commits may be missing
  int64_t writes_stopped_ms = 0;  // from fencing the primary to opening the new one
  int64_t duration_ms = 0;
};

using FailoverProgress = std::function<void(const std::string&)>;

[[nodiscard]] Result<FailoverReport> FailoverHost(const ClusterConfig& config,
                                                  const std::string& host,
                                                  const FailoverOptions& options,
                                                  const FailoverProgress& progress = {});

// `cellar init`: when no server of mysql.hosts[host] holds a topology row,
// makes the configured primary the primary at epoch 1: replicas without a
// primary are pointed at it, it is opened (semi-sync, writable) and the row
// written. OK and nothing done when a row exists. Unavailable when the
// configured primary does not answer.
[[nodiscard]] Status BootstrapHost(const ClusterConfig& config, size_t host);

}  // namespace cellar
