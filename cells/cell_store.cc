#include "cells/cell_store.h"

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/metrics.h"
#include "cells/host_failover.h"
#include "cells/host_servers.h"
#include "cells/host_topology.h"
#include "cells/internal/cell_validation.h"
#include "cells/internal/cells_purge.h"
#include "cells/internal/cells_table.h"
#include "cells/internal/group_committer.h"
#include "cells/internal/unit_completion.h"
#include "cells/internal/write_fence.h"
#include "cells/log_position.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"

namespace cellar {

using internal::CellsTableName;
using internal::GroupCommitter;
using internal::PendingCell;
using internal::RowToCell;
using internal::ValidateColumn;
using internal::ValidateDatastore;
using internal::ValidateWrite;
using internal::WriteUnit;

namespace {

// The GTID position `c`'s server's binary log holds.
Result<std::string> BinlogPosition(MysqlConnection& c) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query("SELECT @@gtid_binlog_pos"));
  if (rows.empty() || rows[0].IsNull(0)) return Internal("no @@gtid_binlog_pos");
  return rows[0].Bytes(0);
}

}  // namespace

struct CellStore::Impl {
  ClusterConfig config;
  std::unique_ptr<TopologyView> topology;                           // which server is primary
  std::vector<std::unique_ptr<MysqlHostPool>> pools;                // one per host
  MetricsRegistry own_metrics;                                      // when Open() was given none
  std::vector<std::unique_ptr<internal::GroupCommitProbe>> probes;  // one per host
  std::vector<std::unique_ptr<GroupCommitter>> committers;          // one per host
  std::vector<uint32_t> host_of_shard;
  // Per host with replicas: a read pool per server ("address:port"), used
  // for ReadPreference::kReplica while the server is not the primary.
  std::vector<std::map<std::string, std::unique_ptr<MysqlHostPool>>> server_pools;
  std::atomic<uint64_t> next_replica{0};
  Counter* replica_reads = nullptr;  // cellar_replica_reads_total

  std::string Table(uint32_t shard, const std::string& datastore) const {
    return QualifiedTable(config.DatabaseForShard(shard), CellsTableName(datastore));
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
    return WithHost<T>(host_of_shard[shard], "shard " + std::to_string(shard),
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
    auto position =
        WithHost<std::string>(host, "host " + config.mysql.hosts[host].name, BinlogPosition);
    return position.ok() && WaitForPosition(replica, *position, timeout_ms).ok();
  }

  // fn on a replica of `shard`'s host when `preference` asks for one and
  // ready(replica connection) holds, else, or when no replica serves or fn
  // fails Unavailable there, on the primary (WithShard).
  template <typename T, typename Ready, typename Fn>
  Result<T> ReadReplicaOrPrimary(uint32_t shard, ReadPreference preference, Ready&& ready,
                                 Fn&& fn) {
    if (preference == ReadPreference::kReplica)
      if (MysqlHostPool* pool = ReplicaPool(host_of_shard[shard])) {
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
      CELLAR_ASSIGN_OR_RETURN(LogPosition p, DecodeLogPosition(config, datastore, read.after));
      after = p;
    }
    const size_t host = host_of_shard[shard];
    return ReadReplicaOrPrimary<T>(
        shard, read.preference,
        [&](MysqlConnection& replica) {
          return !after || host_of_shard[after->shard] != host ||
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
    for (WriteUnit* u : units) by_host[host_of_shard[u->shard]].push_back(u);
    for (size_t h = 0; h < by_host.size(); ++h)
      if (!by_host[h].empty()) committers[h]->Submit(by_host[h]);
  }

  // Submits `units` and blocks until every one is answered.
  std::vector<Result<PutResult>> Submit(std::vector<std::unique_ptr<WriteUnit>>& units) {
    std::shared_ptr<internal::UnitsWaiter> waiter = internal::UnitsWaiter::Create(units.size());
    std::vector<WriteUnit*> raw;
    raw.reserve(units.size());
    for (auto& u : units) {
      u->completion = waiter.get();
      raw.push_back(u.get());
    }
    Enqueue(raw);
    waiter->Wait();
    size_t total = 0;
    for (auto& u : units) total += u->results.size();
    std::vector<Result<PutResult>> out;
    out.reserve(total);
    for (auto& u : units)
      for (auto& r : u->results) out.push_back(std::move(r));
    return out;
  }
};

CellStore::CellStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CellStore::~CellStore() { Close(); }

std::unique_ptr<CellStore> CellStore::Open(const ClusterConfig& config, MetricsRegistry* metrics) {
  auto impl = std::make_unique<Impl>();
  if (!metrics) metrics = &impl->own_metrics;
  impl->config = config;
  impl->host_of_shard.assign(config.shards, 0);
  impl->topology = std::make_unique<TopologyView>(config, metrics);
  TopologyView& topology = *impl->topology;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
    const auto& host = config.mysql.hosts[h];
    impl->pools.push_back(std::make_unique<MysqlHostPool>(
        topology.PrimaryEndpoint(h), config.mysql.pool_size_per_host, topology.PrimaryCheck(h)));
    internal::GroupCommitterOptions opts;
    opts.threads = config.group_commit.writer_threads_per_host;
    opts.max_batch_cells = config.group_commit.max_batch_cells;
    opts.min_pipelined_cells = config.group_commit.min_pipelined_cells;
    opts.linger_us = config.group_commit.linger_us;
    opts.database = config.HostDatabase(host);
    // Only a host with replicas can get a new primary to wait for.
    opts.hold_writes_ms = host.replicas.empty() ? 0 : config.mysql.hold_writes_ms;
    impl->probes.push_back(std::make_unique<internal::GroupCommitProbe>(metrics, host.name));
    impl->committers.push_back(
        std::make_unique<GroupCommitter>(&topology, h, opts, impl->probes.back().get()));
    for (uint32_t s : host.shards) impl->host_of_shard[s] = static_cast<uint32_t>(h);
    impl->server_pools.emplace_back();
    if (!host.replicas.empty())
      for (const MysqlServerConfig& server : host.Servers())
        impl->server_pools.back()[server.Label()] = std::make_unique<MysqlHostPool>(
            ServerEndpoint(config, host, server), config.mysql.pool_size_per_host);
  }
  impl->replica_reads = &metrics->GetCounter(
      "cellar_replica_reads_total",
      "Reads served by a replica (read preference replica); the others went to the primary");
  Impl* raw = impl.get();
  topology.AddListener([raw](size_t host, const HostTopology&) {
    raw->pools[host]->Retarget(raw->topology->PrimaryEndpoint(host),
                               raw->topology->PrimaryCheck(host));
  });
  topology.Start();
  return std::unique_ptr<CellStore>(new CellStore(std::move(impl)));
}

void CellStore::Close() {
  if (!impl_) return;
  for (auto& c : impl_->committers) c->Stop();
  impl_->topology->Stop();
}

TopologyView& CellStore::topology() { return *impl_->topology; }

const ClusterConfig& CellStore::config() const { return impl_->config; }

MysqlHostPool& CellStore::PoolForShard(uint32_t shard) {
  return *impl_->pools[impl_->host_of_shard[shard]];
}

MysqlHostPool& CellStore::PoolForHost(size_t host) { return *impl_->pools[host]; }

Status CellStore::ReadShardHost(uint32_t shard, ReadPreference preference,
                                std::optional<int64_t> catch_up_ms,
                                const std::function<Status(MysqlConnection&)>& read) {
  const size_t host = impl_->host_of_shard[shard];
  return impl_
      ->ReadReplicaOrPrimary<bool>(
          shard, preference,
          [&](MysqlConnection& replica) {
            return !catch_up_ms || impl_->CaughtUpWithPrimary(host, replica, *catch_up_ms);
          },
          [&](MysqlConnection& c) -> Result<bool> {
            CELLAR_RETURN_IF_ERROR(read(c));
            return true;
          })
      .status();
}

Status CellStore::CheckReady() {
  std::string down;
  const auto& hosts = impl_->config.mysql.hosts;
  for (size_t h = 0; h < hosts.size(); ++h) {
    auto lease = PoolForHost(h).Acquire();
    Status s = lease.ok() ? (*lease)->Query("SELECT 1").status() : lease.status();
    if (s.ok()) continue;
    if (!down.empty()) down += "; ";
    down += "host " + hosts[h].name + " (shards " + hosts[h].ShardList() + "): " + s.message();
  }
  if (down.empty()) return Status::Ok();
  return Unavailable(down);
}

Status CellStore::CheckLayout() {
  Status first_error;
  for (size_t h = 0; h < impl_->config.mysql.hosts.size(); ++h) {
    const MysqlHostConfig& host = impl_->config.mysql.hosts[h];
    std::string legacy;  // the first legacy database found on the host
    auto r = impl_->WithHost<bool>(h, "host " + host.name, [&](MysqlConnection& c) -> Result<bool> {
      std::string sql =
          "SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'cells\\_%'"
          " AND TABLE_SCHEMA IN (";
      std::vector<SqlParam> params;
      for (uint32_t s : host.shards) {
        sql += params.empty() ? "?" : ",?";
        params.emplace_back(impl_->config.LegacyShardDatabase(s));
      }
      CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql + ") ORDER BY 1 LIMIT 1", params));
      if (!rows.empty()) legacy = rows[0].Bytes(0);
      return !rows.empty();
    });
    Status st = r.status();
    if (r.ok() && *r)
      st = FailedPrecondition("host " + host.name +
                              " holds cells in the per-shard layout of an "
                              "older Cellar (database " +
                              legacy +
                              "); run `cellar migrate` to "
                              "copy them into the host log (database " +
                              impl_->config.HostDatabase(host) + ")");
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  return first_error;
}

Status CellStore::Init() {
  if (Status layout = CheckLayout(); layout.code() == StatusCode::kFailedPrecondition)
    return layout;
  Status first_error;
  for (size_t h = 0; h < impl_->config.mysql.hosts.size(); ++h) {
    // A new host's topology (epoch 1, the configured primary) first: the
    // pools connect only to a verified primary.
    if (Status st = BootstrapHost(impl_->config, h); !st.ok()) {
      if (first_error.ok()) first_error = st;
      continue;
    }
    impl_->topology->Refresh(h);
    const MysqlHostConfig& host = impl_->config.mysql.hosts[h];
    const std::string db = impl_->config.HostDatabase(host);
    auto r = impl_->WithHost<bool>(h, "host " + host.name, [&](MysqlConnection& c) -> Result<bool> {
      CELLAR_RETURN_IF_ERROR(internal::CreateHostSchema(c, db, impl_->config.datastores));
      return true;
    });
    if (!r.ok() && first_error.ok()) first_error = r.status();
  }
  return first_error;
}

Result<PutResult> CellStore::Put(const std::string& datastore, const CellWrite& cell) {
  CELLAR_ASSIGN_OR_RETURN(PendingCell p, ValidateWrite(impl_->config, datastore, cell));
  std::vector<std::unique_ptr<WriteUnit>> units;
  units.push_back(std::make_unique<WriteUnit>());
  units[0]->datastore = datastore;
  units[0]->shard = ShardForRow(cell.row_key, impl_->config.shards);
  units[0]->cells.push_back(std::move(p));
  auto results = impl_->Submit(units);
  return std::move(results[0]);
}

void CellStore::PutAsync(const std::string& datastore, const CellWrite& cell, PutCallback done) {
  Result<PendingCell> p = ValidateWrite(impl_->config, datastore, cell);
  if (!p.ok()) {
    done(p.status());
    return;
  }
  auto* put = new internal::AsyncPut(std::move(done));  // deletes itself when answered
  put->unit.datastore = datastore;
  put->unit.shard = ShardForRow(cell.row_key, impl_->config.shards);
  put->unit.cells.push_back(std::move(p).value());
  impl_->Enqueue({&put->unit});
}

std::vector<Result<PutResult>> CellStore::PutBatch(const std::string& datastore,
                                                   const std::vector<CellWrite>& cells) {
  std::vector<Result<PutResult>> out;
  auto fail_all = [&](const Status& s) {
    out.assign(cells.size(), Result<PutResult>(s));
    return out;
  };
  if (auto ds = ValidateDatastore(impl_->config, datastore); !ds.ok()) return fail_all(ds.status());
  if (cells.size() > static_cast<size_t>(impl_->config.limits.max_batch_cells))
    return fail_all(InvalidArgument(
        "batch has " + std::to_string(cells.size()) + " cells, over the limit of " +
        std::to_string(impl_->config.limits.max_batch_cells) + " (limits.max_batch_cells)"));
  // Validate everything first; a row with an invalid cell is not written at all.
  std::vector<Result<PendingCell>> pending;
  pending.reserve(cells.size());
  std::map<Uuid, std::vector<size_t>> rows;  // row -> indexes, in input order
  for (size_t i = 0; i < cells.size(); ++i) {
    pending.push_back(ValidateWrite(impl_->config, datastore, cells[i]));
    rows[cells[i].row_key].push_back(i);
  }
  out.assign(cells.size(), Result<PutResult>(Internal("not processed")));
  std::vector<std::unique_ptr<WriteUnit>> units;
  std::vector<std::vector<size_t>> unit_indexes;
  for (auto& [row, idx] : rows) {
    const Result<PendingCell>* bad = nullptr;
    for (size_t i : idx)
      if (!pending[i].ok()) bad = &pending[i];
    if (bad) {
      for (size_t i : idx)
        out[i] =
            pending[i].ok()
                ? Result<PutResult>(Aborted("not written: another cell of row " + row.ToString() +
                                            " is invalid (" + bad->status().ToString() + ")"))
                : Result<PutResult>(pending[i].status());
      continue;
    }
    auto u = std::make_unique<WriteUnit>();
    u->datastore = datastore;
    u->shard = ShardForRow(row, impl_->config.shards);
    u->cells.reserve(idx.size());
    for (size_t i : idx) u->cells.push_back(std::move(pending[i]).value());
    units.push_back(std::move(u));
    unit_indexes.push_back(idx);
  }
  auto results = impl_->Submit(units);
  size_t k = 0;
  for (const auto& idx : unit_indexes)
    for (size_t i : idx) out[i] = std::move(results[k++]);
  return out;
}

Result<PutResult> CellStore::Erase(const std::string& datastore, const Uuid& row,
                                   const std::string& column,
                                   std::optional<int64_t> expected_ref_key) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  CELLAR_ASSIGN_OR_RETURN(const ColumnConfig* col, ValidateColumn(*ds, column));
  if (expected_ref_key && *expected_ref_key < 0)
    return InvalidArgument("expected_ref_key must be >= 0, got " +
                           std::to_string(*expected_ref_key));
  std::vector<std::unique_ptr<WriteUnit>> units;
  units.push_back(std::make_unique<WriteUnit>());
  units[0]->datastore = datastore;
  units[0]->shard = ShardForRow(row, impl_->config.shards);
  units[0]->erase = true;
  units[0]->expected_ref_key = expected_ref_key;
  units[0]->ttl_ms = col->ttl_ms;
  PendingCell t;
  t.row_key = row;
  t.column = column;
  t.tombstone = true;
  units[0]->cells.push_back(std::move(t));
  auto results = impl_->Submit(units);
  return std::move(results[0]);
}

Result<Cell> CellStore::Get(const std::string& datastore, const Uuid& row,
                            const std::string& column, int64_t ref_key, const ReadOptions& read) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  CELLAR_ASSIGN_OR_RETURN(const ColumnConfig* col, ValidateColumn(*ds, column));
  if (ref_key < 0) return InvalidArgument("ref_key must be >= 0, got " + std::to_string(ref_key));
  const uint32_t shard = ShardForRow(row, impl_->config.shards);
  const std::string sql =
      std::string("SELECT ") + internal::kCellColumns + " FROM " + impl_->Table(shard, datastore) +
      " WHERE row_key = ? AND column_name = ? AND ref_key = ? AND created_at >= ?";
  return impl_->ReadShard<Cell>(shard, datastore, read, [&](MysqlConnection& c) -> Result<Cell> {
    CELLAR_ASSIGN_OR_RETURN(
        auto rows, c.Query(sql, {row.ToBytes(), column, ref_key, Impl::VisibleSince(*col)}));
    if (rows.empty()) return NotFound("no cell " + CellAddress(datastore, row, column, ref_key));
    return RowToCell(rows[0]);
  });
}

Result<Cell> CellStore::Latest(const std::string& datastore, const Uuid& row,
                               const std::string& column, const ReadOptions& read) {
  VersionQuery q;
  q.limit = 1;
  CELLAR_ASSIGN_OR_RETURN(auto versions, Versions(datastore, row, column, q, read));
  const std::string where = datastore + "/" + row.ToString() + "/" + column;
  if (versions.empty()) return NotFound("no cell at " + where);
  if (versions[0].tombstone)
    return NotFound("cell " + where + " was erased at ref_key " +
                    std::to_string(versions[0].ref_key));
  return std::move(versions[0]);
}

Result<std::vector<Cell>> CellStore::Row(const std::string& datastore, const Uuid& row,
                                         const ReadOptions& read) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  std::vector<Cell> out;
  for (const auto& col : ds->columns) {
    auto latest = Latest(datastore, row, col.name, read);
    if (latest.ok())
      out.push_back(std::move(latest).value());
    else if (latest.status().code() != StatusCode::kNotFound)
      return latest.status();
  }
  return out;
}

Result<std::vector<Cell>> CellStore::Versions(const std::string& datastore, const Uuid& row,
                                              const std::string& column, const VersionQuery& q,
                                              const ReadOptions& read) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  CELLAR_ASSIGN_OR_RETURN(const ColumnConfig* col, ValidateColumn(*ds, column));
  if (q.limit < 1 || q.limit > 10000)
    return InvalidArgument("limit must be between 1 and 10000, got " + std::to_string(q.limit));
  if (q.min_ref && q.max_ref && *q.min_ref > *q.max_ref)
    return InvalidArgument("min_ref " + std::to_string(*q.min_ref) + " is above max_ref " +
                           std::to_string(*q.max_ref));
  const uint32_t shard = ShardForRow(row, impl_->config.shards);
  std::string sql = std::string("SELECT ") + internal::kCellColumns + " FROM " +
                    impl_->Table(shard, datastore) +
                    " WHERE row_key = ? AND column_name = ? AND created_at >= ?";
  std::vector<SqlParam> params{row.ToBytes(), column, Impl::VisibleSince(*col)};
  if (q.max_ref) {
    sql += " AND ref_key <= ?";
    params.emplace_back(*q.max_ref);
  }
  if (q.min_ref) {
    sql += " AND ref_key >= ?";
    params.emplace_back(*q.min_ref);
  }
  if (q.as_of) {
    sql += " AND created_at <= ?";
    params.emplace_back(*q.as_of);
  }
  sql += " ORDER BY ref_key DESC LIMIT " + std::to_string(q.limit);
  return impl_->ReadShard<std::vector<Cell>>(
      shard, datastore, read, [&](MysqlConnection& c) -> Result<std::vector<Cell>> {
        CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql, params));
        std::vector<Cell> out;
        for (const auto& r : rows) {
          CELLAR_ASSIGN_OR_RETURN(Cell cell, RowToCell(r));
          out.push_back(std::move(cell));
        }
        return out;
      });
}

namespace {

// How long a log read waits for an open writer before returning what is
// final so far (write_fence.h).
constexpr int kFenceWaitSeconds = 1;

// The cells `sql` selects (kCellColumns) appended to `page`, with their
// bodies as `bodies` says.
Status ReadCells(MysqlConnection& c, const std::string& sql, const std::vector<SqlParam>& params,
                 LogBodies bodies, HostLogPage* page) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql, params));
  page->cells.reserve(page->cells.size() + rows.size());
  const bool text = bodies == LogBodies::kJsonText;
  if (text) page->body_texts.reserve(page->body_texts.size() + rows.size());
  std::string body_text;
  for (const auto& r : rows) {
    CELLAR_ASSIGN_OR_RETURN(Cell cell, RowToCell(r, text ? &body_text : nullptr));
    page->cells.push_back(std::move(cell));
    if (text) page->body_texts.push_back(std::move(body_text));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Up to `limit` final cells of one log, in added_id order: `select` is
// "SELECT ... WHERE <key filter> AND added_id > ?" with `params` for the key
// filter. A cell is returned only once no smaller added_id of the log can
// still commit: a contiguous run of ids (`contiguous`: the whole host log, so
// no id is missing) is final at once; past a gap, the read waits for the
// writers that were open and reads again up to the highest id seen, which is
// then final (write_fence.h). A writer still open after the wait ends the
// page before the gap (held_by_open_writer).
Result<HostLogPage> ReadFinalLog(MysqlConnection& c, const std::string& database,
                                 const std::string& select, std::vector<SqlParam> params,
                                 uint64_t after, int limit, bool contiguous, LogBodies bodies) {
  HostLogPage page;
  page.next_after = after;
  params.emplace_back(after);
  CELLAR_RETURN_IF_ERROR(ReadCells(c, select + " ORDER BY added_id LIMIT " + std::to_string(limit),
                                   params, bodies, &page));
  if (page.cells.empty()) return page;
  size_t run = 0;
  while (contiguous && run < page.cells.size() && page.cells[run].added_id == after + run + 1)
    ++run;
  if (run == page.cells.size()) {
    page.next_after = page.cells.back().added_id;
    return page;
  }
  const uint64_t high = page.cells.back().added_id;
  const uint64_t final_before = run ? page.cells[run - 1].added_id : after;
  Status fenced = internal::WaitForOpenWriters(c, database, kFenceWaitSeconds);
  page.cells.resize(run);
  if (bodies == LogBodies::kJsonText) page.body_texts.resize(run);
  page.next_after = final_before;
  if (fenced.code() == StatusCode::kDeadlineExceeded) {
    page.held_by_open_writer = true;
    return page;
  }
  CELLAR_RETURN_IF_ERROR(fenced);
  params.back() = final_before;
  params.emplace_back(high);
  CELLAR_RETURN_IF_ERROR(ReadCells(c,
                                   select + " AND added_id <= ? ORDER BY added_id LIMIT " +
                                       std::to_string(limit - static_cast<int>(run)),
                                   params, bodies, &page));
  const bool full = static_cast<int>(page.cells.size()) == limit;
  page.next_after = full && !page.cells.empty() ? page.cells.back().added_id : high;
  return page;
}

}  // namespace

Result<ShardLogPage> CellStore::ShardLog(const std::string& datastore, uint32_t shard,
                                         uint64_t after_added_id, int limit) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (shard >= impl_->config.shards)
    return InvalidArgument("shard " + std::to_string(shard) + " out of range: the cluster has " +
                           std::to_string(impl_->config.shards) + " shards");
  if (limit < 1 || limit > impl_->config.limits.max_log_limit)
    return InvalidArgument("limit must be between 1 and " +
                           std::to_string(impl_->config.limits.max_log_limit) + ", got " +
                           std::to_string(limit));
  const std::string db = impl_->config.DatabaseForShard(shard);
  const std::string select = std::string("SELECT ") + internal::kCellColumns + " FROM " +
                             impl_->Table(shard, datastore) + " WHERE shard = ? AND added_id > ?";
  return impl_->WithShard<ShardLogPage>(shard, [&](MysqlConnection& c) -> Result<ShardLogPage> {
    // Other shards' cells interleave in the host log: no run is known final.
    CELLAR_ASSIGN_OR_RETURN(HostLogPage page,
                            ReadFinalLog(c, db, select, {uint64_t{shard}}, after_added_id, limit,
                                         /*contiguous=*/false, LogBodies::kDocument));
    return ShardLogPage{std::move(page.cells), page.next_after};
  });
}

Result<HostLogPage> CellStore::HostLog(const std::string& datastore, size_t host,
                                       uint64_t after_added_id, int limit, LogBodies bodies) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host " + std::to_string(host) + " out of range: the cluster has " +
                           std::to_string(impl_->config.mysql.hosts.size()) + " hosts");
  if (limit < 1 || limit > impl_->config.limits.max_log_limit)
    return InvalidArgument("limit must be between 1 and " +
                           std::to_string(impl_->config.limits.max_log_limit) + ", got " +
                           std::to_string(limit));
  const std::string db = impl_->config.HostDatabase(impl_->config.mysql.hosts[host]);
  const std::string select = std::string("SELECT ") + internal::kCellColumns + " FROM " +
                             impl_->HostTable(host, datastore) + " WHERE added_id > ?";
  const std::string what = "host " + impl_->config.mysql.hosts[host].name;
  return impl_->WithHost<HostLogPage>(host, what, [&](MysqlConnection& c) -> Result<HostLogPage> {
    return ReadFinalLog(c, db, select, {}, after_added_id, limit, /*contiguous=*/true, bodies);
  });
}

Result<uint64_t> CellStore::ShardHead(const std::string& datastore, uint32_t shard) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (shard >= impl_->config.shards)
    return InvalidArgument("shard " + std::to_string(shard) + " out of range");
  const std::string sql =
      "SELECT MAX(added_id) FROM " + impl_->Table(shard, datastore) + " WHERE shard = ?";
  return impl_->WithShard<uint64_t>(shard, [&](MysqlConnection& c) -> Result<uint64_t> {
    CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql, {uint64_t{shard}}));
    return rows.empty() ? 0 : rows[0].Uint(0);
  });
}

Result<uint64_t> CellStore::HostHead(const std::string& datastore, size_t host) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host " + std::to_string(host) + " out of range");
  const std::string sql = "SELECT MAX(added_id) FROM " + impl_->HostTable(host, datastore);
  return impl_->WithHost<uint64_t>(host, "host " + impl_->config.mysql.hosts[host].name,
                                   [&](MysqlConnection& c) -> Result<uint64_t> {
                                     CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql));
                                     return rows.empty() ? 0 : rows[0].Uint(0);
                                   });
}

Result<MicrosSinceEpoch> CellStore::HostLogCreatedAt(const std::string& datastore, size_t host,
                                                     uint64_t after_added_id) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host " + std::to_string(host) + " out of range");
  const std::string sql = "SELECT created_at FROM " + impl_->HostTable(host, datastore) +
                          " WHERE added_id > ? ORDER BY added_id LIMIT 1";
  return impl_->WithHost<MicrosSinceEpoch>(host, "host " + impl_->config.mysql.hosts[host].name,
                                           [&](MysqlConnection& c) -> Result<MicrosSinceEpoch> {
                                             CELLAR_ASSIGN_OR_RETURN(
                                                 auto rows, c.Query(sql, {after_added_id}));
                                             return rows.empty() ? 0 : rows[0].Int(0);
                                           });
}

Result<PurgeStats> CellStore::Purge(const std::string& datastore) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  PurgeStats stats;
  for (size_t h = 0; h < impl_->config.mysql.hosts.size(); ++h) {
    auto r = PurgeHost(datastore, h, PurgeOptions{});
    if (r.ok()) {
      stats.deleted += r->deleted;
    } else {
      stats.shards_failed += static_cast<uint32_t>(impl_->config.mysql.hosts[h].shards.size());
      LogWarn("purge", "host failed",
              {{"host", impl_->config.mysql.hosts[h].name}, {"error", r.status().ToString()}});
    }
  }
  return stats;
}

Result<PurgeStats> CellStore::PurgeHost(const std::string& datastore, size_t host,
                                        const PurgeOptions& options) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host index " + std::to_string(host) + " is out of range (" +
                           std::to_string(impl_->config.mysql.hosts.size()) + " hosts)");
  if (options.batch_cells < 1 || options.batch_cells > 100000)
    return InvalidArgument("batch_cells must be 1..100000, got " +
                           std::to_string(options.batch_cells));
  PurgeStats stats;
  const std::string table = impl_->HostTable(host, datastore);
  auto r = impl_->WithHost<bool>(
      host, "host " + impl_->config.mysql.hosts[host].name,
      [&](MysqlConnection& c) -> Result<bool> {
        CELLAR_RETURN_IF_ERROR(internal::PurgeCellsTable(c, table, *ds, options, &stats));
        return true;
      });
  if (!r.ok()) return r.status();
  return stats;
}

}  // namespace cellar
