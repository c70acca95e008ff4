#include "cells/shard_move.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "cells/cell_store.h"
#include "cells/host_topology.h"
#include "cells/internal/cells_table.h"
#include "cells/internal/write_fence.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "cells/shard_placement.h"

namespace cellar {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kChunk = 1000;
constexpr int kFenceWaitSeconds = 10;
constexpr int kMaxCatchUpPasses = 20;
constexpr uint64_t kSmallPass = 100;  // a pass this small means the copy caught up
constexpr const char* kFrozenError = "cellar-frozen-shard";

Result<size_t> FindHost(const ClusterConfig& config, const std::string& name) {
  for (size_t i = 0; i < config.mysql.hosts.size(); ++i)
    if (config.mysql.hosts[i].name == name) return i;
  return InvalidArgument("unknown host '" + name + "' (not in mysql.hosts)");
}

struct Side {
  std::string db;
  std::unique_ptr<MysqlConnection> conn;
};

// A plain (autocommit) connection to `host`'s primary, past the freeze
// triggers (@cellar_shard_move).
Result<Side> Open(const ClusterConfig& config, size_t host) {
  CELLAR_ASSIGN_OR_RETURN(auto conn, ConnectCurrentPrimary(config, host));
  // DDL (the freeze triggers) waits for open transactions' metadata locks: bounded.
  CELLAR_RETURN_IF_ERROR(conn->ExecuteDdl("SET SESSION lock_wait_timeout = 30"));
  CELLAR_RETURN_IF_ERROR(conn->ExecuteDdl("SET @cellar_shard_move = 1"));
  const std::string db = config.HostDatabase(config.mysql.hosts[host]);
  CELLAR_RETURN_IF_ERROR(conn->ExecuteDdl(CreateShardPlacementSql(db)));
  return Side{db, std::move(conn)};
}

// The target as a registered writer (write_fence.h) with implicit transactions.
Result<Side> OpenWriter(const ClusterConfig& config, size_t host) {
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

Status CheckShard(const ClusterConfig& config, uint32_t shard) {
  if (shard < config.shards) return Status::Ok();
  return InvalidArgument("shard " + std::to_string(shard) + " out of range: the cluster has " +
                         std::to_string(config.shards) + " shards");
}

std::string Cells(const std::string& db, const std::string& ds) {
  return QualifiedTable(db, internal::CellsTableName(ds));
}

std::string FrozenTable(const std::string& db) { return QualifiedTable(db, "frozen_shards"); }

Status CreateFrozenTable(MysqlConnection& c, const std::string& db) {
  return c.ExecuteDdl(
      "CREATE TABLE IF NOT EXISTS " + FrozenTable(db) +
      " (shard INT UNSIGNED NOT NULL PRIMARY KEY, to_host VARCHAR(64) NOT NULL) ENGINE=InnoDB");
}

// A BEFORE trigger `name` on `table` refusing rows whose shard (each of
// `shard_exprs`, e.g. NEW.shard) is frozen, unless the session is a mover's.
Status CreateFreezeTrigger(MysqlConnection& c, const std::string& db, const std::string& name,
                           const std::string& event, const std::string& table,
                           const std::vector<std::string>& shard_exprs) {
  std::string frozen_rows;
  for (const std::string& e : shard_exprs)
    frozen_rows += std::string(frozen_rows.empty() ? "" : " OR ") + "shard = " + e;
  return c.ExecuteDdl("CREATE OR REPLACE TRIGGER " + QualifiedTable(db, name) + " BEFORE " + event +
                      " ON " + QualifiedTable(db, table) +
                      " FOR EACH ROW BEGIN IF @cellar_shard_move IS NULL AND EXISTS (SELECT 1"
                      " FROM " +
                      FrozenTable(db) + " WHERE " + frozen_rows +
                      ") THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + kFrozenError +
                      "'; END IF; END");
}

// The freeze triggers of an idx_* table: inserts (and upserts), updates and
// deletes of a frozen shard's rows. Named by a hash: table names are long.
Status FenceIndexTable(MysqlConnection& c, const std::string& db, const std::string& table) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(Fnv1a64(table)));
  CELLAR_RETURN_IF_ERROR(CreateFreezeTrigger(c, db, std::string("cellar_frozen_i_") + hash,
                                             "INSERT", table, {"NEW.shard"}));
  CELLAR_RETURN_IF_ERROR(CreateFreezeTrigger(c, db, std::string("cellar_frozen_u_") + hash,
                                             "UPDATE", table, {"NEW.shard", "OLD.shard"}));
  return CreateFreezeTrigger(c, db, std::string("cellar_frozen_d_") + hash, "DELETE", table,
                             {"OLD.shard"});
}

// The idx_* tables of `db` (every table with a shard column named idx_...).
Result<std::vector<std::string>> IndexTables(MysqlConnection& c, const std::string& db) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query("SELECT TABLE_NAME FROM information_schema.COLUMNS"
                                             " WHERE TABLE_SCHEMA = ? AND COLUMN_NAME = 'shard'"
                                             " AND TABLE_NAME LIKE 'idx\\\\_%' ORDER BY TABLE_NAME",
                                             {db}));
  std::vector<std::string> tables;
  for (const auto& r : rows) tables.push_back(r.Bytes(0));
  return tables;
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
  CELLAR_RETURN_IF_ERROR(CreateFrozenTable(c, src.db));
  CELLAR_RETURN_IF_ERROR(c.Execute("INSERT INTO " + FrozenTable(src.db) +
                                       " (shard, to_host) VALUES (?, ?)"
                                       " ON DUPLICATE KEY UPDATE to_host = VALUES(to_host)",
                                   {uint64_t{shard}, to})
                             .status());
  for (const auto& ds : config.datastores)
    CELLAR_RETURN_IF_ERROR(CreateFreezeTrigger(c, src.db, "cellar_frozen_" + ds.name, "INSERT",
                                               internal::CellsTableName(ds.name), {"NEW.shard"}));
  CELLAR_ASSIGN_OR_RETURN(auto tables, IndexTables(c, src.db));
  for (const std::string& t : tables) CELLAR_RETURN_IF_ERROR(FenceIndexTable(c, src.db, t));
  // Writers that inserted the shard's cells before the freeze end first.
  return internal::WaitForOpenWriters(c, src.db, kFenceWaitSeconds);
}

// Copies the shard's rows of every idx_* table with a shard column.
Result<uint64_t> CopyIndexRows(Side& src, Side& dst, uint32_t shard) {
  CELLAR_ASSIGN_OR_RETURN(auto tables, IndexTables(*src.conn, src.db));
  uint64_t copied = 0;
  for (const std::string& name : tables) {
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

// Deletes the shard's rows from the source: cells, idx_* and index positions.
Result<uint64_t> DeleteShardRows(const ClusterConfig& config, Side& src, uint32_t shard) {
  std::vector<std::string> tables;
  for (const auto& ds : config.datastores) tables.push_back(Cells(src.db, ds.name));
  CELLAR_ASSIGN_OR_RETURN(auto idx, IndexTables(*src.conn, src.db));
  for (const auto& t : idx) tables.push_back(QualifiedTable(src.db, t));
  CELLAR_ASSIGN_OR_RETURN(
      auto positions,
      src.conn->Query("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?"
                      " AND TABLE_NAME = 'index_positions'",
                      {src.db}));
  if (positions[0].Uint(0) > 0) tables.push_back(QualifiedTable(src.db, "index_positions"));
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

// Every host's placement rows. Unavailable when a host cannot be reached.
Result<std::vector<ShardPlacementRow>> AllPlacementRows(const ClusterConfig& config) {
  std::vector<ShardPlacementRow> all;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
    auto conn = ConnectCurrentPrimary(config, h);
    if (!conn.ok())
      return Unavailable("host " + config.mysql.hosts[h].name +
                         " cannot say where shards are: " + conn.status().message());
    CELLAR_ASSIGN_OR_RETURN(auto rows,
                            ReadShardPlacement(**conn, config.HostDatabase(config.mysql.hosts[h])));
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

// Step 6: after two topology refreshes, verifies again and deletes the
// shard's rows from the source, then the target's progress rows.
Status DeleteSource(const ClusterConfig& config, Side& src, Side& dst, uint32_t shard,
                    ShardMoveReport* report) {
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * config.mysql.topology_refresh_ms));
  CELLAR_RETURN_IF_ERROR(Verify(config, src, dst, shard, /*finishing=*/true, report));
  CELLAR_ASSIGN_OR_RETURN(report->source_rows_deleted, DeleteShardRows(config, src, shard));
  CELLAR_RETURN_IF_ERROR(
      dst.conn
          ->Execute(
              "DELETE FROM " + QualifiedTable(dst.db, "shard_move_progress") + " WHERE shard = ?",
              {uint64_t{shard}})
          .status());
  return dst.conn->Commit();
}

// The source of a move of `shard` to host `to` that recorded its placement
// but did not delete the source's rows (the target still has its progress
// rows; the source has the shard frozen for `to`); nullopt when none.
Result<std::optional<size_t>> UnfinishedMoveSource(const ClusterConfig& config, uint32_t shard,
                                                   size_t to) {
  CELLAR_ASSIGN_OR_RETURN(Side dst, Open(config, to));
  CELLAR_ASSIGN_OR_RETURN(
      auto progress,
      dst.conn->Query("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?"
                      " AND TABLE_NAME = 'shard_move_progress'",
                      {dst.db}));
  if (progress[0].Uint(0) == 0) return std::optional<size_t>();
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      dst.conn->Query("SELECT COUNT(*) FROM " + QualifiedTable(dst.db, "shard_move_progress") +
                          " WHERE shard = ?",
                      {uint64_t{shard}}));
  if (rows[0].Uint(0) == 0) return std::optional<size_t>();
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
    if (h == to) continue;
    CELLAR_ASSIGN_OR_RETURN(Side src, Open(config, h));
    CELLAR_RETURN_IF_ERROR(CreateFrozenTable(*src.conn, src.db));
    CELLAR_ASSIGN_OR_RETURN(auto frozen,
                            src.conn->Query("SELECT COUNT(*) FROM " + FrozenTable(src.db) +
                                                " WHERE shard = ? AND to_host = ?",
                                            {uint64_t{shard}, config.mysql.hosts[to].name}));
    if (frozen[0].Uint(0) > 0) return std::optional<size_t>(h);
  }
  return std::optional<size_t>();
}

}  // namespace

Result<std::vector<uint32_t>> CurrentShardHosts(const ClusterConfig& config) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, AllPlacementRows(config));
  return ResolveShardHosts(config, rows);
}

Status FenceNewShardTable(MysqlConnection& conn, const std::string& database,
                          const std::string& table) {
  CELLAR_ASSIGN_OR_RETURN(
      auto exists,
      conn.Query("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?"
                 " AND TABLE_NAME = 'frozen_shards'",
                 {database}));
  if (exists[0].Uint(0) == 0) return Status::Ok();
  CELLAR_ASSIGN_OR_RETURN(auto frozen, conn.Query("SELECT COUNT(*) FROM " + FrozenTable(database)));
  if (frozen[0].Uint(0) == 0) return Status::Ok();
  return FenceIndexTable(conn, database, table);
}

Result<ShardMoveReport> MoveShard(const ClusterConfig& config, uint32_t shard,
                                  const std::string& to_host, const MoveProgress& progress) {
  CELLAR_RETURN_IF_ERROR(CheckShard(config, shard));
  CELLAR_ASSIGN_OR_RETURN(const size_t to, FindHost(config, to_host));
  CELLAR_ASSIGN_OR_RETURN(auto placement_rows, AllPlacementRows(config));
  const size_t from = ResolveShardHosts(config, placement_rows)[shard];
  if (from == to) {
    // A move that placed the shard but failed to delete it from the source
    // (a host down, a lock wait) is finished by running it again.
    CELLAR_ASSIGN_OR_RETURN(std::optional<size_t> unfinished,
                            UnfinishedMoveSource(config, shard, to));
    if (!unfinished)
      return InvalidArgument("shard " + std::to_string(shard) + " is already on host " + to_host);
    ShardMoveReport report;
    report.shard = shard;
    report.from_host = config.mysql.hosts[*unfinished].name;
    report.to_host = to_host;
    if (progress)
      progress("finishing the move of shard " + std::to_string(shard) + " from " +
               report.from_host + ": deleting it there");
    CELLAR_ASSIGN_OR_RETURN(Side src, Open(config, *unfinished));
    CELLAR_ASSIGN_OR_RETURN(Side dst, OpenWriter(config, to));
    CELLAR_RETURN_IF_ERROR(DeleteSource(config, src, dst, shard, &report));
    if (progress)
      progress("deleted " + std::to_string(report.source_rows_deleted) + " rows of shard " +
               std::to_string(shard) + " from " + report.from_host);
    return report;
  }
  uint64_t move_seq = 1;
  for (const ShardPlacementRow& r : placement_rows)
    if (r.shard == shard) move_seq = std::max(move_seq, r.move_seq + 1);
  const MysqlHostConfig& src_host = config.mysql.hosts[from];
  const MysqlHostConfig& dst_host = config.mysql.hosts[to];
  ShardMoveReport report;
  report.shard = shard;
  report.from_host = src_host.name;
  report.to_host = dst_host.name;
  report.move_seq = move_seq;
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  const std::string what = "shard " + std::to_string(shard);
  say("plan: " + what + " from " + src_host.name + " (" + config.HostDatabase(src_host) + ") to " +
      dst_host.name + " (" + config.HostDatabase(dst_host) + "), move " + std::to_string(move_seq));
  {
    auto store = CellStore::Open(config);
    CELLAR_RETURN_IF_ERROR(store->Init());  // the target's tables
  }
  CELLAR_ASSIGN_OR_RETURN(Side src, Open(config, from));
  CELLAR_ASSIGN_OR_RETURN(Side dst, OpenWriter(config, to));
  // 1. Copy and catch up while the shard's writers keep going.
  for (int pass = 0; pass < kMaxCatchUpPasses; ++pass) {
    uint64_t n = 0;
    for (const auto& ds : config.datastores) {
      CELLAR_ASSIGN_OR_RETURN(uint64_t c, CopyPass(src, dst, ds.name, shard));
      n += c;
    }
    report.cells_copied += n;
    ++report.catch_up_passes;
    say("copy pass " + std::to_string(pass + 1) + ": " + std::to_string(n) + " cells");
    if (n < kSmallPass) break;
  }
  // 2. Freeze; 3. the last cells, verified.
  CELLAR_RETURN_IF_ERROR(Freeze(config, src, shard, dst_host.name));
  const Clock::time_point frozen_at = Clock::now();
  say("frozen: " + what + " on " + src_host.name + " refuses writes");
  for (const auto& ds : config.datastores) {
    CELLAR_ASSIGN_OR_RETURN(uint64_t c, CopyPass(src, dst, ds.name, shard));
    report.cells_copied += c;
  }
  CELLAR_RETURN_IF_ERROR(Verify(config, src, dst, shard, /*finishing=*/false, &report));
  say("verified " + std::to_string(report.cells_verified) + " cells (digest " + report.digest +
      ")");
  // 4. Index rows; 5. the placement, the target first.
  CELLAR_ASSIGN_OR_RETURN(report.index_rows_copied, CopyIndexRows(src, dst, shard));
  CELLAR_RETURN_IF_ERROR(CreateFrozenTable(*dst.conn, dst.db));
  CELLAR_RETURN_IF_ERROR(
      dst.conn
          ->Execute("DELETE FROM " + FrozenTable(dst.db) + " WHERE shard = ?", {uint64_t{shard}})
          .status());
  CELLAR_RETURN_IF_ERROR(dst.conn->Commit());
  const ShardPlacementRow row{shard, dst_host.name, move_seq};
  CELLAR_RETURN_IF_ERROR(WriteShardPlacement(*dst.conn, dst.db, row));
  CELLAR_RETURN_IF_ERROR(dst.conn->Commit());
  CELLAR_RETURN_IF_ERROR(WriteShardPlacement(*src.conn, src.db, row));
  report.frozen_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - frozen_at).count();
  say("placed: " + what + " on " + dst_host.name + " (" + std::to_string(report.index_rows_copied) +
      " index rows copied; writes refused for " + std::to_string(report.frozen_ms) + " ms)");
  // 6. Once every process reads the new placement, the source's rows go.
  CELLAR_RETURN_IF_ERROR(DeleteSource(config, src, dst, shard, &report));
  say("deleted " + std::to_string(report.source_rows_deleted) + " rows of " + what + " from " +
      src_host.name + "; it stays frozen there");
  return report;
}

}  // namespace cellar
