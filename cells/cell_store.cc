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
#include "cells/internal/cell_store_impl.h"
#include "cells/internal/cell_validation.h"
#include "cells/internal/cells_table.h"
#include "cells/internal/group_committer.h"
#include "cells/internal/unit_completion.h"
#include "cells/log_position.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"

namespace cellar {

CellStore::CellStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CellStore::~CellStore() { Close(); }

std::unique_ptr<CellStore> CellStore::Open(const ClusterConfig& config, MetricsRegistry* metrics) {
  auto impl = std::make_unique<Impl>();
  if (!metrics) metrics = &impl->own_metrics;
  impl->config = config;
  impl->topology = std::make_unique<TopologyView>(config, metrics);
  TopologyView& topology = *impl->topology;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
    const auto& host = config.mysql.hosts[h];
    impl->pools.push_back(std::make_unique<MysqlHostPool>(
        topology.PrimaryEndpoint(h), PoolLimits(config.mysql), topology.PrimaryCheck(h)));
    internal::GroupCommitterOptions opts;
    opts.threads = config.group_commit.writer_threads_per_host;
    opts.max_batch_cells = config.group_commit.max_batch_cells;
    opts.min_pipelined_cells = config.group_commit.min_pipelined_cells;
    opts.linger_us = config.group_commit.linger_us;
    opts.commit_interval_us = config.group_commit.commit_interval_us;
    opts.database = config.HostDatabase(host);
    // Only a host with replicas can get a new primary to wait for.
    opts.hold_writes_ms = host.replicas.empty() ? 0 : config.mysql.hold_writes_ms;
    // A unit of a shard that moved away (this host refuses it as frozen)
    // goes to the shard's new host once the placement names it.
    opts.reroute = [self = impl.get(), h](internal::WriteUnit* u) {
      if (self->topology->HostOfShard(u->shard) == h) self->topology->Refresh(h);
      const size_t to = self->topology->HostOfShard(u->shard);
      if (to == h) return false;
      self->committers[to]->Submit({u});
      return true;
    };
    impl->probes.push_back(std::make_unique<internal::GroupCommitProbe>(metrics, host.name));
    impl->committers.push_back(
        std::make_unique<GroupCommitter>(&topology, h, opts, impl->probes.back().get()));
    impl->server_pools.emplace_back();
    if (!host.replicas.empty())
      for (const MysqlServerConfig& server : host.Servers())
        impl->server_pools.back()[server.Label()] = std::make_unique<MysqlHostPool>(
            ServerEndpoint(config, host, server), PoolLimits(config.mysql));
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

size_t CellStore::HostOfShard(uint32_t shard) const { return impl_->topology->HostOfShard(shard); }

std::string CellStore::DatabaseOfShard(uint32_t shard) const {
  return impl_->DatabaseOfShard(shard);
}

MysqlHostPool& CellStore::PoolForShard(uint32_t shard) {
  return *impl_->pools[impl_->topology->HostOfShard(shard)];
}

MysqlHostPool& CellStore::PoolForHost(size_t host) { return *impl_->pools[host]; }

Status CellStore::ReadShardHost(uint32_t shard, ReadPreference preference,
                                std::optional<int64_t> catch_up_ms,
                                const std::function<Status(MysqlConnection&)>& read) {
  const size_t host = impl_->topology->HostOfShard(shard);
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
  return GetCell(datastore, row, column, ref_key, read, nullptr);
}

Result<CellText> CellStore::GetText(const std::string& datastore, const Uuid& row,
                                    const std::string& column, int64_t ref_key,
                                    const ReadOptions& read) {
  CellText t;
  CELLAR_ASSIGN_OR_RETURN(t.cell, GetCell(datastore, row, column, ref_key, read, &t.body_json));
  return t;
}

Result<Cell> CellStore::GetCell(const std::string& datastore, const Uuid& row,
                                const std::string& column, int64_t ref_key, const ReadOptions& read,
                                std::string* body_text) {
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
    return RowToCell(rows[0], body_text);
  });
}

Result<Cell> CellStore::Latest(const std::string& datastore, const Uuid& row,
                               const std::string& column, const ReadOptions& read) {
  return LatestCell(datastore, row, column, read, nullptr);
}

Result<CellText> CellStore::LatestText(const std::string& datastore, const Uuid& row,
                                       const std::string& column, const ReadOptions& read) {
  CellText t;
  CELLAR_ASSIGN_OR_RETURN(t.cell, LatestCell(datastore, row, column, read, &t.body_json));
  return t;
}

Result<Cell> CellStore::LatestCell(const std::string& datastore, const Uuid& row,
                                   const std::string& column, const ReadOptions& read,
                                   std::string* body_text) {
  VersionQuery q;
  q.limit = 1;
  std::vector<std::string> texts;
  CELLAR_ASSIGN_OR_RETURN(auto versions, VersionCells(datastore, row, column, q, read,
                                                      body_text != nullptr ? &texts : nullptr));
  // The address is formatted only for an error: a read that finds its cell pays nothing for it.
  auto where = [&] { return datastore + "/" + row.ToString() + "/" + column; };
  if (versions.empty()) return NotFound("no cell at " + where());
  if (versions[0].tombstone)
    return NotFound("cell " + where() + " was erased at ref_key " +
                    std::to_string(versions[0].ref_key));
  if (body_text != nullptr) *body_text = std::move(texts[0]);
  return std::move(versions[0]);
}

namespace {

// The latest live cell of each of the datastore's columns, read by
// `latest(column)` (Latest or LatestText): a column without one is left out.
template <typename T, typename ReadLatest>
Result<std::vector<T>> LiveColumns(const DatastoreConfig& ds, ReadLatest latest) {
  std::vector<T> out;
  for (const auto& col : ds.columns) {
    Result<T> cell = latest(col.name);
    if (cell.ok())
      out.push_back(std::move(cell).value());
    else if (cell.status().code() != StatusCode::kNotFound)
      return cell.status();
  }
  return out;
}

}  // namespace

Result<std::vector<Cell>> CellStore::Row(const std::string& datastore, const Uuid& row,
                                         const ReadOptions& read) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  return LiveColumns<Cell>(
      *ds, [&](const std::string& column) { return Latest(datastore, row, column, read); });
}

Result<std::vector<CellText>> CellStore::RowText(const std::string& datastore, const Uuid& row,
                                                 const ReadOptions& read) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  return LiveColumns<CellText>(
      *ds, [&](const std::string& column) { return LatestText(datastore, row, column, read); });
}

Result<std::vector<CellText>> CellStore::VersionsText(const std::string& datastore, const Uuid& row,
                                                      const std::string& column,
                                                      const VersionQuery& q,
                                                      const ReadOptions& read) {
  std::vector<std::string> texts;
  CELLAR_ASSIGN_OR_RETURN(std::vector<Cell> cells,
                          VersionCells(datastore, row, column, q, read, &texts));
  std::vector<CellText> out(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    out[i].cell = std::move(cells[i]);
    out[i].body_json = std::move(texts[i]);
  }
  return out;
}

Result<std::vector<Cell>> CellStore::Versions(const std::string& datastore, const Uuid& row,
                                              const std::string& column, const VersionQuery& q,
                                              const ReadOptions& read) {
  return VersionCells(datastore, row, column, q, read, nullptr);
}

Result<std::vector<Cell>> CellStore::VersionCells(const std::string& datastore, const Uuid& row,
                                                  const std::string& column, const VersionQuery& q,
                                                  const ReadOptions& read,
                                                  std::vector<std::string>* body_texts) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  CELLAR_ASSIGN_OR_RETURN(const ColumnConfig* col, ValidateColumn(*ds, column));
  CELLAR_RETURN_IF_ERROR(ValidateVersionQuery(q));
  const uint32_t shard = ShardForRow(row, impl_->config.shards);
  std::string sql = std::string("SELECT ") + internal::kCellColumns + " FROM " +
                    impl_->Table(shard, datastore) +
                    " WHERE row_key = ? AND column_name = ? AND created_at >= ?";
  // The later of the column's retention floor and the caller's `since`.
  std::vector<SqlParam> params{row.ToBytes(), column,
                               std::max(Impl::VisibleSince(*col), q.since.value_or(0))};
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
        if (body_texts != nullptr) body_texts->clear();
        for (const auto& r : rows) {
          std::string text;
          CELLAR_ASSIGN_OR_RETURN(Cell cell, RowToCell(r, body_texts != nullptr ? &text : nullptr));
          out.push_back(std::move(cell));
          if (body_texts != nullptr) body_texts->push_back(std::move(text));
        }
        return out;
      });
}

}  // namespace cellar
