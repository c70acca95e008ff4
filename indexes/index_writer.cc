#include "indexes/index_writer.h"

#include <optional>

#include "base/log.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_catalog.h"
#include "indexes/index_entry.h"

namespace cellar {

namespace {

// A connection to write shard `target` with: the pointer's own connection
// when both shards live on one MySQL host (the entry then commits in the
// pointer's transaction: one log flush per event, and entry and pointer move
// together), otherwise a pooled connection of the target's host (autocommit;
// the pointer commits after it, so a crash in between only repeats the write).
struct TargetConnection {
  std::optional<MysqlHostPool::Lease> lease;
  MysqlConnection* conn = nullptr;
};

}  // namespace

Result<IndexApplyResult> IndexWriter::Apply(const IndexDefinition& def, int version,
                                            const Cell& cell) {
  const IndexColumnDef* cd = def.FindColumnDef(cell.column);
  if (!cd) return IndexApplyResult{IndexApply::kNotIndexed, ""};
  const ClusterConfig& cfg = store_->config();
  const uint32_t src = ShardForRow(cell.row_key, cfg.shards);
  const std::string pointer =
      QualifiedTable(cfg.DatabaseForShard(src), PointerTableName(def.table, version));
  const std::string entries = EntryTableName(def.table, version);
  const std::string row = cell.row_key.ToBytes();

  MysqlHostPool& src_pool = store_->PoolForShard(src);
  auto ConnectionFor = [&](uint32_t target, MysqlConnection& own) -> Result<TargetConnection> {
    TargetConnection t;
    MysqlHostPool& pool = store_->PoolForShard(target);
    if (&pool == &src_pool) {
      t.conn = &own;
      return t;
    }
    CELLAR_ASSIGN_OR_RETURN(auto target_lease, pool.Acquire());
    t.lease.emplace(std::move(target_lease));
    t.conn = &**t.lease;
    return t;
  };
  CELLAR_ASSIGN_OR_RETURN(auto lease, src_pool.Acquire());
  MysqlConnection& c = *lease;
  CELLAR_RETURN_IF_ERROR(c.Begin());
  auto fail = [&](Status s) -> Result<IndexApplyResult> {
    c.Rollback();
    return s;
  };
  // Not INSERT IGNORE: on an existing row that takes a shared lock, and two
  // writers of one row (worker and backfill) upgrading it FOR UPDATE deadlock.
  // ON DUPLICATE KEY UPDATE locks the row exclusively at once.
  if (auto s =
          c.Execute("INSERT INTO " + pointer +
                        " (shard, row_key, column_key, ref_key, target_shard)"
                        " VALUES (?, ?, ?, -1, NULL) ON DUPLICATE KEY UPDATE ref_key = ref_key",
                    {int64_t{src}, row, cell.column});
      !s.ok())
    return fail(s.status());
  auto ptr = c.Query("SELECT ref_key, target_shard FROM " + pointer +
                         " WHERE shard = ? AND row_key = ? AND column_key = ? FOR UPDATE",
                     {int64_t{src}, row, cell.column});
  if (!ptr.ok()) return fail(ptr.status());
  if (ptr->empty()) return fail(Internal("index pointer row vanished"));
  const int64_t applied = (*ptr)[0].Int(0);
  const bool had_target = !(*ptr)[0].IsNull(1);
  const uint32_t old_target = static_cast<uint32_t>((*ptr)[0].Uint(1));
  if (applied >= cell.ref_key) {
    c.Rollback();
    return IndexApplyResult{IndexApply::kStale, ""};
  }

  IndexApplyResult result{IndexApply::kRemoved, ""};
  std::optional<IndexEntry> entry;
  // An expired version (its column's TTL passed) has no entry, like a
  // tombstone: a purge may be deleting it, and reads no longer see it.
  const DatastoreConfig* ds = cfg.FindDatastore(def.datastore);
  const ColumnConfig* col = ds ? ds->FindColumn(cell.column) : nullptr;
  const bool expired = col && col->ttl_ms > 0 && cell.created_at < NowMicros() - col->ttl_ms * 1000;
  if (!cell.tombstone && !expired) {
    auto e = ExtractEntry(def, *cd, cell, cfg.shards);
    if (e.ok()) {
      entry = std::move(e).value();
    } else {
      result = {IndexApply::kSkipped, e.status().message()};
      if (probe_) probe_->Skipped(def.table).Increment();
      LogInfo("index", "no entry for cell",
              {{"index", def.table},
               {"cell", cell.Address(def.datastore)},
               {"reason", e.status().message()}});
    }
  }
  // Remove the old entry when it does not stay where the new one goes.
  if (had_target && (!entry || entry->target_shard != old_target)) {
    auto tl = ConnectionFor(old_target, c);
    if (!tl.ok()) return fail(tl.status());
    auto del = tl->conn->Execute(
        "DELETE FROM " + QualifiedTable(cfg.DatabaseForShard(old_target), entries) +
            " WHERE shard = ? AND row_key = ? AND column_key = ? AND ref_key < ?",
        {int64_t{old_target}, row, cell.column, cell.ref_key});
    if (!del.ok()) return fail(del.status());
  }
  if (entry) {
    std::string cols = "shard, row_key, column_key, ref_key, added_id, source_shard, created_at";
    std::string marks = "?, ?, ?, ?, ?, ?, ?";
    std::string updates;
    std::vector<SqlParam> params{int64_t{entry->target_shard},
                                 row,
                                 cell.column,
                                 cell.ref_key,
                                 cell.added_id,
                                 int64_t{entry->source_shard},
                                 cell.created_at};
    for (size_t i = 0; i < cd->fields.size(); ++i) {
      const std::string& col = cd->fields[i].sql_column;
      cols += ", " + col;
      marks += ", ?";
      updates += col + " = IF(VALUES(ref_key) > ref_key, VALUES(" + col + "), " + col + "), ";
      params.push_back(entry->values[i]);
    }
    updates +=
        "added_id = IF(VALUES(ref_key) > ref_key, VALUES(added_id), added_id), "
        "created_at = IF(VALUES(ref_key) > ref_key, VALUES(created_at), created_at), "
        "ref_key = GREATEST(ref_key, VALUES(ref_key))";
    auto tl = ConnectionFor(entry->target_shard, c);
    if (!tl.ok()) return fail(tl.status());
    auto up = tl->conn->Execute(
        "INSERT INTO " + QualifiedTable(cfg.DatabaseForShard(entry->target_shard), entries) + " (" +
            cols + ") VALUES (" + marks + ") ON DUPLICATE KEY UPDATE " + updates,
        params);
    if (!up.ok()) return fail(up.status());
    result = {IndexApply::kUpserted, ""};
  }
  SqlParam target = entry ? SqlParam(int64_t{entry->target_shard}) : SqlParam(nullptr);
  if (auto s = c.Execute("UPDATE " + pointer +
                             " SET ref_key = ?, target_shard = ?"
                             " WHERE shard = ? AND row_key = ? AND column_key = ?",
                         {cell.ref_key, target, int64_t{src}, row, cell.column});
      !s.ok())
    return fail(s.status());
  CELLAR_RETURN_IF_ERROR(c.Commit());
  return result;
}

Result<bool> IndexWriter::RemoveEntryOf(const std::string& table, int version, const Uuid& row,
                                        const std::string& column, int64_t ref_key) {
  const ClusterConfig& cfg = store_->config();
  const uint32_t src = ShardForRow(row, cfg.shards);
  const std::string pointer =
      QualifiedTable(cfg.DatabaseForShard(src), PointerTableName(table, version));
  const std::string row_bytes = row.ToBytes();
  MysqlHostPool& src_pool = store_->PoolForShard(src);
  CELLAR_ASSIGN_OR_RETURN(auto lease, src_pool.Acquire());
  MysqlConnection& c = *lease;
  CELLAR_RETURN_IF_ERROR(c.Begin());
  auto fail = [&](Status s) -> Result<bool> {
    c.Rollback();
    return s;
  };
  auto ptr = c.Query("SELECT ref_key, target_shard FROM " + pointer +
                         " WHERE shard = ? AND row_key = ? AND column_key = ? FOR UPDATE",
                     {int64_t{src}, row_bytes, column});
  if (!ptr.ok()) return fail(ptr.status());
  if (ptr->empty() || (*ptr)[0].Int(0) != ref_key || (*ptr)[0].IsNull(1)) {
    c.Rollback();
    return false;  // never applied, a newer version applied, or no entry
  }
  const uint32_t target = static_cast<uint32_t>((*ptr)[0].Uint(1));
  // Same host: in the pointer's transaction; otherwise autocommitted first (a
  // crash before the pointer commits leaves a pointer to no entry, which the
  // next apply or removal handles).
  std::optional<MysqlHostPool::Lease> target_lease;
  MysqlConnection* tc = &c;
  if (&store_->PoolForShard(target) != &src_pool) {
    auto l = store_->PoolForShard(target).Acquire();
    if (!l.ok()) return fail(l.status());
    target_lease.emplace(std::move(l).value());
    tc = &**target_lease;
  }
  auto del =
      tc->Execute("DELETE FROM " +
                      QualifiedTable(cfg.DatabaseForShard(target), EntryTableName(table, version)) +
                      " WHERE shard = ? AND row_key = ? AND column_key = ? AND ref_key = ?",
                  {int64_t{target}, row_bytes, column, ref_key});
  if (!del.ok()) return fail(del.status());
  if (auto s = c.Execute("UPDATE " + pointer +
                             " SET target_shard = NULL"
                             " WHERE shard = ? AND row_key = ? AND column_key = ?",
                         {int64_t{src}, row_bytes, column});
      !s.ok())
    return fail(s.status());
  CELLAR_RETURN_IF_ERROR(c.Commit());
  return *del > 0;
}

}  // namespace cellar
