#include "cells/shard_move.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "cells/cell_store.h"
#include "cells/host_topology.h"
#include "cells/internal/cells_table.h"
#include "cells/internal/write_fence.h"
#include "cells/mysql_client.h"

namespace cellar {
namespace {

constexpr int kChunk = 1000;
constexpr int kFenceWaitSeconds = 10;
constexpr int kMaxCatchUpPasses = 20;
constexpr uint64_t kSmallPass = 100;  // a pass this small means the copy caught up

Result<size_t> FindHost(const ClusterConfig& config, const std::string& name) {
  for (size_t i = 0; i < config.mysql.hosts.size(); ++i)
    if (config.mysql.hosts[i].name == name) return i;
  return InvalidArgument("unknown host '" + name + "' (not in mysql.hosts)");
}

struct Side {
  std::string db;
  std::unique_ptr<MysqlConnection> conn;
};

// A plain (autocommit) connection to `host`.
Result<Side> Open(const ClusterConfig& config, const MysqlHostConfig& host) {
  size_t index = 0;
  while (config.mysql.hosts[index].name != host.name) ++index;
  CELLAR_ASSIGN_OR_RETURN(auto conn, ConnectCurrentPrimary(config, index));
  // DDL (the freeze trigger) waits for open transactions' metadata locks: bounded.
  CELLAR_RETURN_IF_ERROR(conn->ExecuteDdl("SET SESSION lock_wait_timeout = 30"));
  return Side{config.HostDatabase(host), std::move(conn)};
}

// The target as a registered writer (write_fence.h) with implicit transactions.
Result<Side> OpenWriter(const ClusterConfig& config, const MysqlHostConfig& host) {
  CELLAR_ASSIGN_OR_RETURN(Side side, Open(config, host));
  CELLAR_RETURN_IF_ERROR(side.conn->ExecuteDdl(
      "CREATE TABLE IF NOT EXISTS " + QualifiedTable(side.db, "shard_move_progress") +
      " (shard INT UNSIGNED NOT NULL, datastore VARCHAR(64) CHARACTER SET ascii NOT NULL,"
      " source_after BIGINT UNSIGNED NOT NULL,"
      " target_high BIGINT UNSIGNED NULL COMMENT 'the copy ends here in the target log',"
      " PRIMARY KEY (shard, datastore)) ENGINE=InnoDB"));
  CELLAR_RETURN_IF_ERROR(side.conn->UseImplicitTransactions());
  CELLAR_RETURN_IF_ERROR(internal::RegisterWriter(*side.conn, side.db));
  return side;
}

ShardMoveReport NewReport(uint32_t shard, const MysqlHostConfig& from, const MysqlHostConfig& to) {
  ShardMoveReport report;
  report.shard = shard;
  report.from_host = from.name;
  report.to_host = to.name;
  return report;
}

Status CheckShard(const ClusterConfig& config, uint32_t shard) {
  if (shard < config.shards) return Status::Ok();
  return InvalidArgument("shard " + std::to_string(shard) + " out of range: the cluster has " +
                         std::to_string(config.shards) + " shards");
}

std::string Cells(const std::string& db, const std::string& ds) {
  return QualifiedTable(db, internal::CellsTableName(ds));
}

// One pass: every cell of `shard` in the source log that is final now and not
// yet copied goes to the target, in source order. Returns the cells inserted.
Result<uint64_t> CopyPass(Side& src, Side& dst, const std::string& ds, uint32_t shard) {
  MysqlConnection& d = *dst.conn;
  const std::string progress = QualifiedTable(dst.db, "shard_move_progress");
  CELLAR_ASSIGN_OR_RETURN(auto done, d.Query("SELECT source_after FROM " + progress +
                                                 " WHERE shard = ? AND datastore = ?",
                                             {uint64_t{shard}, ds}));
  CELLAR_RETURN_IF_ERROR(d.Commit());
  uint64_t after = done.empty() ? 0 : done[0].Uint(0);
  // Everything up to the source's head is final once its open writers ended.
  CELLAR_ASSIGN_OR_RETURN(
      auto head, src.conn->Query("SELECT IFNULL(MAX(added_id), 0) FROM " + Cells(src.db, ds)));
  const uint64_t high = head[0].Uint(0);
  CELLAR_RETURN_IF_ERROR(internal::WaitForOpenWriters(*src.conn, src.db, kFenceWaitSeconds));
  uint64_t copied = 0;
  while (after < high) {
    CELLAR_ASSIGN_OR_RETURN(
        auto rows,
        src.conn->Query("SELECT added_id, row_key, column_name, ref_key, body, tombstone,"
                        " created_at FROM " +
                            Cells(src.db, ds) +
                            " WHERE shard = ? AND added_id > ? AND added_id <= ?"
                            " ORDER BY added_id LIMIT " +
                            std::to_string(kChunk),
                        {uint64_t{shard}, after, high}));
    const uint64_t next = rows.empty() ? high : rows.back().Uint(0);
    Status st = internal::EnterWriteFence(d, dst.db);
    uint64_t inserted = 0;
    if (st.ok() && !rows.empty()) {
      std::string sql = "INSERT IGNORE INTO " + Cells(dst.db, ds) +
                        " (shard, row_key, column_name, ref_key, body, tombstone, created_at)"
                        " VALUES ";
      std::vector<SqlParam> params;
      for (size_t i = 0; i < rows.size(); ++i) {
        sql += i ? ",(?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?)";
        params.emplace_back(uint64_t{shard});
        params.emplace_back(rows[i].Bytes(1));
        params.emplace_back(rows[i].Bytes(2));
        params.emplace_back(rows[i].Int(3));
        params.emplace_back(rows[i].Bytes(4));
        params.emplace_back(rows[i].Int(5));
        params.emplace_back(rows[i].Int(6));
      }
      auto n = d.Execute(sql, params);
      st = n.status();
      if (n.ok()) inserted = *n;
    }
    if (st.ok())
      st = d.Execute("INSERT INTO " + progress +
                         " (shard, datastore, source_after) VALUES (?, ?, ?)"
                         " ON DUPLICATE KEY UPDATE source_after = VALUES(source_after)",
                     {uint64_t{shard}, ds, next})
               .status();
    if (st.ok()) st = d.Commit();
    if (!st.ok()) {
      d.Rollback();
      return st;
    }
    copied += inserted;
    after = next;
  }
  return copied;
}

// Count and digest of the shard's cells of `ds` on one side (up to added_id
// `high` when given).
Result<std::pair<uint64_t, uint64_t>> Digest(Side& side, const std::string& ds, uint32_t shard,
                                             std::optional<uint64_t> high = std::nullopt) {
  std::vector<SqlParam> params{uint64_t{shard}};
  if (high) params.emplace_back(*high);
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      side.conn->Query(
          "SELECT COUNT(*), IFNULL(BIT_XOR(CAST(CONV(LEFT(MD5(CONCAT_WS('|', HEX(row_key),"
          " HEX(column_name), ref_key, MD5(body), tombstone, created_at)), 16), 16, 10) AS "
          "UNSIGNED)),"
          " 0) FROM " +
              Cells(side.db, ds) + " WHERE shard = ?" + (high ? " AND added_id <= ?" : ""),
          params));
  return std::make_pair(rows[0].Uint(0), rows[0].Uint(1));
}

// Compares the shard's cells on both sides. The first step (after the freeze
// nothing else writes the shard on the target) records where the copy ends in
// the target log; the second compares up to there, since the target's own
// writers may have added cells after the config roll.
Status Verify(const ClusterConfig& config, Side& src, Side& dst, uint32_t shard, bool finishing,
              ShardMoveReport* report) {
  CELLAR_RETURN_IF_ERROR(dst.conn->Commit());  // a fresh view on the writer connection
  const std::string progress = QualifiedTable(dst.db, "shard_move_progress");
  uint64_t total = 0, digest = 0;
  for (const auto& ds : config.datastores) {
    std::optional<uint64_t> high;
    if (finishing) {
      CELLAR_ASSIGN_OR_RETURN(auto h, dst.conn->Query("SELECT target_high FROM " + progress +
                                                          " WHERE shard = ? AND datastore = ?",
                                                      {uint64_t{shard}, ds.name}));
      high = h.empty() || h[0].IsNull(0) ? 0 : h[0].Uint(0);
    }
    CELLAR_ASSIGN_OR_RETURN(auto a, Digest(src, ds.name, shard));
    CELLAR_ASSIGN_OR_RETURN(auto b, Digest(dst, ds.name, shard, high));
    if (!finishing)
      CELLAR_RETURN_IF_ERROR(
          dst.conn
              ->Execute("INSERT INTO " + progress +
                            " (shard, datastore, source_after, target_high) SELECT ?, ?, 0,"
                            " IFNULL(MAX(added_id), 0) FROM " +
                            Cells(dst.db, ds.name) +
                            " WHERE shard = ? ON DUPLICATE KEY UPDATE target_high ="
                            " VALUES(target_high)",
                        {uint64_t{shard}, ds.name, uint64_t{shard}})
              .status());
    CELLAR_RETURN_IF_ERROR(dst.conn->Commit());
    if (a != b)
      return FailedPrecondition("shard " + std::to_string(shard) + " " + ds.name + ": source has " +
                                std::to_string(a.first) + " cells, target " +
                                std::to_string(b.first) +
                                (a.first == b.first ? " (digests differ)" : ""));
    total += a.first;
    digest ^= a.second * 0x9e3779b97f4a7c15ULL + total;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
  report->cells_verified = total;
  report->digest = hex;
  return Status::Ok();
}

Status Freeze(const ClusterConfig& config, Side& src, uint32_t shard, const std::string& to) {
  MysqlConnection& c = *src.conn;
  const std::string frozen = QualifiedTable(src.db, "frozen_shards");
  CELLAR_RETURN_IF_ERROR(c.ExecuteDdl(
      "CREATE TABLE IF NOT EXISTS " + frozen +
      " (shard INT UNSIGNED NOT NULL PRIMARY KEY, to_host VARCHAR(64) NOT NULL) ENGINE=InnoDB"));
  CELLAR_RETURN_IF_ERROR(
      c.Execute("INSERT IGNORE INTO " + frozen + " (shard, to_host) VALUES (?, ?)",
                {uint64_t{shard}, to})
          .status());
  for (const auto& ds : config.datastores)
    CELLAR_RETURN_IF_ERROR(c.ExecuteDdl(
        "CREATE TRIGGER IF NOT EXISTS " + QualifiedTable(src.db, "cellar_frozen_" + ds.name) +
        " BEFORE INSERT ON " + Cells(src.db, ds.name) +
        " FOR EACH ROW BEGIN IF EXISTS (SELECT 1 FROM " + frozen +
        " WHERE shard = NEW.shard) THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT ="
        " 'cellar-frozen-shard'; END IF; END"));
  // Writers that inserted the shard's cells before the freeze end first.
  return internal::WaitForOpenWriters(c, src.db, kFenceWaitSeconds);
}

std::string ShardListWith(const MysqlHostConfig& host, uint32_t shard, bool add) {
  MysqlHostConfig h = host;
  if (add)
    h.shards.push_back(shard);
  else
    h.shards.erase(std::remove(h.shards.begin(), h.shards.end(), shard), h.shards.end());
  std::sort(h.shards.begin(), h.shards.end());
  return h.ShardList();
}

// Copies the shard's rows of every idx_* table with a shard column.
Result<uint64_t> CopyIndexRows(Side& src, Side& dst, uint32_t shard) {
  CELLAR_ASSIGN_OR_RETURN(auto tables,
                          src.conn->Query("SELECT TABLE_NAME FROM information_schema.COLUMNS"
                                          " WHERE TABLE_SCHEMA = ? AND COLUMN_NAME = 'shard'"
                                          " AND TABLE_NAME LIKE 'idx\\\\_%'",
                                          {src.db}));
  uint64_t copied = 0;
  for (const auto& t : tables) {
    const std::string name = t.Bytes(0);
    CELLAR_ASSIGN_OR_RETURN(auto cols,
                            src.conn->Query("SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                                            " WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"
                                            " ORDER BY ORDINAL_POSITION",
                                            {src.db, name}));
    std::string list;
    for (const auto& c : cols) list += (list.empty() ? "`" : ", `") + c.Bytes(0) + "`";
    CELLAR_ASSIGN_OR_RETURN(
        auto rows, src.conn->Query("SELECT " + list + " FROM " + QualifiedTable(src.db, name) +
                                       " WHERE shard = ?",
                                   {uint64_t{shard}}));
    for (size_t begin = 0; begin < rows.size(); begin += 200) {
      const size_t end = std::min(rows.size(), begin + 200);
      std::string sql =
          "INSERT IGNORE INTO " + QualifiedTable(dst.db, name) + " (" + list + ") VALUES ";
      std::vector<SqlParam> params;
      for (size_t i = begin; i < end; ++i) {
        sql += i > begin ? ",(" : "(";
        for (size_t k = 0; k < cols.size(); ++k) {
          sql += k ? ",?" : "?";
          if (rows[i].IsNull(k))
            params.emplace_back(nullptr);
          else
            params.emplace_back(rows[i].Bytes(k));
        }
        sql += ")";
      }
      CELLAR_ASSIGN_OR_RETURN(uint64_t n, dst.conn->Execute(sql, params));
      CELLAR_RETURN_IF_ERROR(dst.conn->Commit());
      copied += n;
    }
  }
  return copied;
}

Result<uint64_t> DeleteShardRows(const ClusterConfig& config, Side& src, uint32_t shard) {
  std::vector<std::string> tables;
  for (const auto& ds : config.datastores) tables.push_back(Cells(src.db, ds.name));
  CELLAR_ASSIGN_OR_RETURN(auto idx,
                          src.conn->Query("SELECT TABLE_NAME FROM information_schema.COLUMNS"
                                          " WHERE TABLE_SCHEMA = ? AND COLUMN_NAME = 'shard'"
                                          " AND TABLE_NAME LIKE 'idx\\\\_%'",
                                          {src.db}));
  for (const auto& t : idx) tables.push_back(QualifiedTable(src.db, t.Bytes(0)));
  uint64_t deleted = 0;
  for (const auto& table : tables)
    while (true) {
      CELLAR_ASSIGN_OR_RETURN(
          uint64_t n, src.conn->Execute("DELETE FROM " + table + " WHERE shard = ? LIMIT 5000",
                                        {uint64_t{shard}}));
      deleted += n;
      if (n < 5000) break;
    }
  return deleted;
}

}  // namespace

Result<ShardMoveReport> CopyAndFreezeShard(const ClusterConfig& current, uint32_t shard,
                                           const std::string& to_host,
                                           const MoveProgress& progress) {
  CELLAR_RETURN_IF_ERROR(CheckShard(current, shard));
  CELLAR_ASSIGN_OR_RETURN(size_t to, FindHost(current, to_host));
  const size_t from = current.HostIndexForShard(shard);
  if (from == to)
    return InvalidArgument("shard " + std::to_string(shard) + " is already on host " + to_host);
  const MysqlHostConfig& src_host = current.mysql.hosts[from];
  const MysqlHostConfig& dst_host = current.mysql.hosts[to];
  ShardMoveReport report = NewReport(shard, src_host, dst_host);
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  say("plan: shard " + std::to_string(shard) + " from " + src_host.name + " (" +
      current.HostDatabase(src_host) + ") to " + dst_host.name + " (" +
      current.HostDatabase(dst_host) + ")");
  {
    auto store = CellStore::Open(current);
    CELLAR_RETURN_IF_ERROR(store->Init());  // the target's tables
  }
  CELLAR_ASSIGN_OR_RETURN(Side src, Open(current, src_host));
  CELLAR_ASSIGN_OR_RETURN(Side dst, OpenWriter(current, dst_host));
  // Copy and catch up while the shard's writers keep going.
  for (int pass = 0; pass < kMaxCatchUpPasses; ++pass) {
    uint64_t n = 0;
    for (const auto& ds : current.datastores) {
      CELLAR_ASSIGN_OR_RETURN(uint64_t c, CopyPass(src, dst, ds.name, shard));
      n += c;
    }
    report.cells_copied += n;
    ++report.catch_up_passes;
    say("copy pass " + std::to_string(pass + 1) + ": " + std::to_string(n) + " cells");
    if (n < kSmallPass) break;
  }
  say("freezing shard " + std::to_string(shard) + " on " + src_host.name);
  CELLAR_RETURN_IF_ERROR(Freeze(current, src, shard, dst_host.name));
  for (const auto& ds : current.datastores) {
    CELLAR_ASSIGN_OR_RETURN(uint64_t c, CopyPass(src, dst, ds.name, shard));
    report.cells_copied += c;
  }
  CELLAR_RETURN_IF_ERROR(Verify(current, src, dst, shard, /*finishing=*/false, &report));
  report.from_shards_after = ShardListWith(src_host, shard, false);
  report.to_shards_after = ShardListWith(dst_host, shard, true);
  say("verified " + std::to_string(report.cells_verified) + " cells (digest " + report.digest +
      "); roll the config: " + src_host.name + " shards \"" + report.from_shards_after + "\", " +
      dst_host.name + " shards \"" + report.to_shards_after + "\", then run with --finish");
  return report;
}

Result<ShardMoveReport> FinishShardMove(const ClusterConfig& updated, uint32_t shard,
                                        const std::string& from_host,
                                        const MoveProgress& progress) {
  CELLAR_RETURN_IF_ERROR(CheckShard(updated, shard));
  CELLAR_ASSIGN_OR_RETURN(size_t from, FindHost(updated, from_host));
  const size_t to = updated.HostIndexForShard(shard);
  if (to == from)
    return FailedPrecondition("the config still puts shard " + std::to_string(shard) + " on " +
                              from_host + ": roll the config printed by the first step first");
  const MysqlHostConfig& src_host = updated.mysql.hosts[from];
  const MysqlHostConfig& dst_host = updated.mysql.hosts[to];
  ShardMoveReport report = NewReport(shard, src_host, dst_host);
  CELLAR_ASSIGN_OR_RETURN(Side src, Open(updated, src_host));
  CELLAR_ASSIGN_OR_RETURN(Side dst, OpenWriter(updated, dst_host));
  auto frozen = src.conn->Query(
      "SELECT to_host FROM " + QualifiedTable(src.db, "frozen_shards") + " WHERE shard = ?",
      {uint64_t{shard}});
  if (!frozen.ok() || frozen->empty() || (*frozen)[0].Bytes(0) != dst_host.name)
    return FailedPrecondition("shard " + std::to_string(shard) + " is not frozen on " +
                              src_host.name + " for a move to " + dst_host.name +
                              ": run the first step (without --finish) first");
  for (const auto& ds : updated.datastores) {
    CELLAR_ASSIGN_OR_RETURN(uint64_t c, CopyPass(src, dst, ds.name, shard));
    report.cells_copied += c;
  }
  CELLAR_RETURN_IF_ERROR(Verify(updated, src, dst, shard, /*finishing=*/true, &report));
  CELLAR_ASSIGN_OR_RETURN(report.index_rows_copied, CopyIndexRows(src, dst, shard));
  CELLAR_ASSIGN_OR_RETURN(report.source_rows_deleted, DeleteShardRows(updated, src, shard));
  // Unfreeze; the triggers go with the last frozen shard.
  const std::string frozen_table = QualifiedTable(src.db, "frozen_shards");
  CELLAR_RETURN_IF_ERROR(
      src.conn->Execute("DELETE FROM " + frozen_table + " WHERE shard = ?", {uint64_t{shard}})
          .status());
  CELLAR_ASSIGN_OR_RETURN(auto left, src.conn->Query("SELECT COUNT(*) FROM " + frozen_table));
  if (left[0].Uint(0) == 0)
    for (const auto& ds : updated.datastores)
      CELLAR_RETURN_IF_ERROR(src.conn->ExecuteDdl(
          "DROP TRIGGER IF EXISTS " + QualifiedTable(src.db, "cellar_frozen_" + ds.name)));
  CELLAR_RETURN_IF_ERROR(
      dst.conn
          ->Execute(
              "DELETE FROM " + QualifiedTable(dst.db, "shard_move_progress") + " WHERE shard = ?",
              {uint64_t{shard}})
          .status());
  CELLAR_RETURN_IF_ERROR(dst.conn->Commit());
  report.from_shards_after = src_host.ShardList();
  report.to_shards_after = dst_host.ShardList();
  if (progress)
    progress("shard " + std::to_string(shard) + " now on " + dst_host.name + ": " +
             std::to_string(report.index_rows_copied) + " index rows copied, " +
             std::to_string(report.source_rows_deleted) + " rows deleted from " + src_host.name);
  return report;
}

}  // namespace cellar
