// CellStore's state shared by its implementation files (cell_store.cc:
// opening, writes and reads; cell_store_log.cc: log reads and purge).
// Private to cells/.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "cells/cell_store.h"
#include "cells/host_servers.h"
#include "cells/host_topology.h"
#include "cells/internal/cell_validation.h"
#include "cells/internal/cells_table.h"
#include "cells/internal/group_commit_probe.h"
#include "cells/internal/group_committer.h"
#include "cells/internal/unit_completion.h"
#include "cells/log_position.h"
#include "cells/mysql_client.h"

namespace cellar {

using internal::CellsTableName;
using internal::GroupCommitter;
using internal::PendingCell;
using internal::RowToCell;
using internal::ValidateColumn;
using internal::ValidateDatastore;
using internal::ValidateWrite;
using internal::WriteUnit;

namespace internal {

// The GTID position `c`'s server's binary log holds.
inline Result<std::string> BinlogPosition(MysqlConnection& c) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query("SELECT @@gtid_binlog_pos"));
  if (rows.empty() || rows[0].IsNull(0)) return Internal("no @@gtid_binlog_pos");
  return rows[0].Bytes(0);
}

}  // namespace internal

struct CellStore::Impl {
  ClusterConfig config;
  std::unique_ptr<TopologyView> topology;                           // which server is primary
  std::vector<std::unique_ptr<MysqlHostPool>> pools;                // one per host
  MetricsRegistry own_metrics;                                      // when Open() was given none
  std::vector<std::unique_ptr<internal::GroupCommitProbe>> probes;  // one per host
  std::vector<std::unique_ptr<GroupCommitter>> committers;          // one per host
  // Per host with replicas: a read pool per server ("address:port"), used
  // for ReadPreference::kReplica while the server is not the primary.
  std::vector<std::map<std::string, std::unique_ptr<MysqlHostPool>>> server_pools;
  std::atomic<uint64_t> next_replica{0};
  Counter* replica_reads = nullptr;  // cellar_replica_reads_total

  std::string Table(uint32_t shard, const std::string& datastore) const {
    return HostTable(topology->HostOfShard(shard), datastore);
  }
  std::string DatabaseOfShard(uint32_t shard) const {
    return config.HostDatabase(config.mysql.hosts[topology->HostOfShard(shard)]);
  }
  std::string HostTable(size_t host, const std::string& datastore) const {
    return QualifiedTable(config.HostDatabase(config.mysql.hosts[host]), CellsTableName(datastore));
  }

  // Runs fn(connection) on host `host`, retrying once on a fresh connection
  // when a pooled one turns out to be stale. `what` prefixes errors.
  template <typename T, typename Fn>
  Result<T> WithHost(size_t host, const std::string& what, Fn&& fn) {
    MysqlHostPool& pool = *pools[host];
    Status last;
    for (int attempt = 0; attempt < 2; ++attempt) {
      // A primary that is gone or refuses (demoted): learn the topology now,
      // which retargets the pool when a failover moved the primary.
      if (attempt > 0) topology->Refresh(host);
      auto lease = pool.Acquire();
      if (!lease.ok()) {
        if (lease.status().code() != StatusCode::kUnavailable)
          return Status(lease.status().code(), what + ": " + lease.status().message());
        return Unavailable(what + ": " + lease.status().message());
      }
      Result<T> r = fn(**lease);
      if (r.ok() || r.status().code() != StatusCode::kUnavailable) return r;
      last = r.status();
    }
    return Unavailable(what + ": " + last.message());
  }
  template <typename T, typename Fn>
  Result<T> WithShard(uint32_t shard, Fn&& fn) {
    return WithHost<T>(topology->HostOfShard(shard), "shard " + std::to_string(shard),
                       std::forward<Fn>(fn));
  }

  // A pool of one of `host`'s replicas that answered the last topology
  // refresh, taking turns; nullptr when there is none.
  MysqlHostPool* ReplicaPool(size_t host) {
    std::vector<std::string> up;
    for (const auto& r : topology->Replicas(host))
      if (r.reachable) up.push_back(r.server);
    if (up.empty()) return nullptr;
    auto it = server_pools[host].find(up[next_replica.fetch_add(1) % up.size()]);
    return it == server_pools[host].end() ? nullptr : it->second.get();
  }

  // Waits until `conn`'s server holds the cell at `added_id` of `table` (a
  // replica applying the primary's log in commit order then holds every
  // write committed before it), up to limits.index_wait. False on timeout.
  bool WaitForCell(MysqlConnection& conn, const std::string& table, uint64_t added_id) {
    const MicrosSinceEpoch deadline = NowMicros() + config.limits.index_wait_ms * 1000;
    const std::string sql = "SELECT 1 FROM " + table + " WHERE added_id = ?";
    for (int pause_us = 500;; pause_us = std::min(pause_us * 2, 20000)) {
      auto rows = conn.Query(sql, {SqlParam(added_id)});
      if (!rows.ok()) return false;
      if (!rows->empty()) return true;
      if (NowMicros() + pause_us > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    }
  }

  // True once `replica` has applied everything `host`'s primary had
  // committed when asked (its @@gtid_binlog_pos), waiting up to `timeout_ms`;
  // false when it has not by then or a server cannot be asked.
  bool CaughtUpWithPrimary(size_t host, MysqlConnection& replica, int64_t timeout_ms) {
    auto position = WithHost<std::string>(host, "host " + config.mysql.hosts[host].name,
                                          internal::BinlogPosition);
    return position.ok() && WaitForPosition(replica, *position, timeout_ms).ok();
  }

  // fn on a replica of `shard`'s host when `preference` asks for one and
  // ready(replica connection) holds, else, or when no replica serves or fn
  // fails Unavailable there, on the primary (WithShard).
  template <typename T, typename Ready, typename Fn>
  Result<T> ReadReplicaOrPrimary(uint32_t shard, ReadPreference preference, Ready&& ready,
                                 Fn&& fn) {
    if (preference == ReadPreference::kReplica)
      if (MysqlHostPool* pool = ReplicaPool(topology->HostOfShard(shard))) {
        auto lease = pool->Acquire();
        if (lease.ok() && ready(**lease)) {
          replica_reads->Increment();
          Result<T> r = fn(**lease);
          if (r.ok() || r.status().code() != StatusCode::kUnavailable) return r;
        }
      }
    return WithShard<T>(shard, std::forward<Fn>(fn));
  }

  // fn on a replica of `shard`'s host when `read` asks for one (after the
  // replica holds read.after), else, or when no replica serves, on the primary.
  template <typename T, typename Fn>
  Result<T> ReadShard(uint32_t shard, const std::string& datastore, const ReadOptions& read,
                      Fn&& fn) {
    std::optional<LogPosition> after;
    if (!read.after.empty()) {
      CELLAR_ASSIGN_OR_RETURN(LogPosition p,
                              DecodeLogPosition(config, datastore, read.after,
                                                [this](uint32_t s) { return DatabaseOfShard(s); }));
      after = p;
    }
    const size_t host = topology->HostOfShard(shard);
    return ReadReplicaOrPrimary<T>(
        shard, read.preference,
        [&](MysqlConnection& replica) {
          return !after || topology->HostOfShard(after->shard) != host ||
                 WaitForCell(replica, HostTable(host, datastore), after->added_id);
        },
        std::forward<Fn>(fn));
  }

  // Visibility floor for a column's TTL (0 when the column never expires).
  static MicrosSinceEpoch VisibleSince(const ColumnConfig& col) {
    return col.ttl_ms > 0 ? NowMicros() - col.ttl_ms * 1000 : 0;
  }

  // Hands `units` to their hosts' committers; each unit's completion must be set.
  void Enqueue(const std::vector<WriteUnit*>& units) {
    std::vector<std::vector<WriteUnit*>> by_host(committers.size());
    for (WriteUnit* u : units) by_host[topology->HostOfShard(u->shard)].push_back(u);
    for (size_t h = 0; h < by_host.size(); ++h)
      if (!by_host[h].empty()) committers[h]->Submit(by_host[h]);
  }

  // Submits `units` and blocks until every one is answered.
  std::vector<Result<PutResult>> Submit(std::vector<std::unique_ptr<WriteUnit>>& units) {
    internal::UnitsWaiter waiter(units.size());
    std::vector<WriteUnit*> raw;
    raw.reserve(units.size());
    for (auto& u : units) {
      u->completion = &waiter;
      u->caller_waits = true;
      raw.push_back(u.get());
    }
    Enqueue(raw);
    waiter.Wait();
    size_t total = 0;
    for (auto& u : units) total += u->results.size();
    std::vector<Result<PutResult>> out;
    out.reserve(total);
    for (auto& u : units)
      for (auto& r : u->results) out.push_back(std::move(r));
    return out;
  }
};

}  // namespace cellar
