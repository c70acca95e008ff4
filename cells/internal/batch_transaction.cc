#include "cells/internal/batch_transaction.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "cells/body_codec.h"
#include "cells/internal/cells_table.h"

namespace cellar::internal {
namespace {

using Address = std::tuple<std::string, std::string, int64_t>;  // raw row bytes, column, ref

struct Existing {
  std::string encoded_body;
  bool tombstone = false;
  uint64_t added_id = 0;
  MicrosSinceEpoch created_at = 0;
};

// A planned insert: index into the flattened insert list.
struct Planned {
  const PendingCell* cell;
  size_t insert_index;
};

bool SameBody(const PendingCell& want, const std::string& stored_encoded, bool stored_tombstone) {
  if (want.tombstone || stored_tombstone) return want.tombstone && stored_tombstone;
  if (want.encoded_body == stored_encoded) return true;
  // Encodings may differ across codec versions; compare the JSON values.
  auto stored = DecodeBody(stored_encoded);
  auto wanted = DecodeBody(want.encoded_body);
  return stored.ok() && wanted.ok() && *stored == *wanted;
}

constexpr size_t kLookupChunk = 128;

Status MissingCommitOrderRow(const std::string& datastore, uint32_t shard) {
  return Internal("shard " + std::to_string(shard) + " has no commit_order row for '" + datastore +
                  "': run `cellar init`");
}

Status LoadExisting(MysqlConnection& conn, const std::string& table,
                    const std::vector<WriteUnit*>& units, std::map<Address, Existing>* out) {
  std::vector<const PendingCell*> all;
  for (auto* u : units)
    if (!u->erase)
      for (auto& c : u->cells) all.push_back(&c);
  for (size_t begin = 0; begin < all.size(); begin += kLookupChunk) {
    size_t end = std::min(all.size(), begin + kLookupChunk);
    std::string sql =
        "SELECT row_key, column_name, ref_key, body, tombstone, added_id, created_at"
        " FROM " +
        table + " WHERE ";
    std::vector<SqlParam> params;
    for (size_t i = begin; i < end; ++i) {
      if (i > begin) sql += " OR ";
      sql += "(row_key = ? AND column_name = ? AND ref_key = ?)";
      params.emplace_back(all[i]->row_key.ToBytes());
      params.emplace_back(all[i]->column);
      params.emplace_back(all[i]->ref_key);
    }
    CELLAR_ASSIGN_OR_RETURN(auto rows, conn.Query(sql, params));
    for (const auto& r : rows) {
      Existing e{r.Bytes(3), r.Int(4) != 0, r.Uint(5), r.Int(6)};
      out->emplace(Address{r.Bytes(0), r.Bytes(1), r.Int(2)}, std::move(e));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ApplyShardBatch(MysqlConnection& conn, const std::string& database,
                       const std::string& datastore, uint32_t shard,
                       const std::vector<WriteUnit*>& units, bool look_up_existing,
                       MicrosSinceEpoch now, CommitLock lock) {
  const std::string table = QualifiedTable(database, CellsTableName(datastore));
  auto fail = [&](Status s) { return s; };

  std::map<Address, Existing> existing;
  bool has_erase = false;
  for (auto* u : units) has_erase |= u->erase;
  if (look_up_existing || has_erase)
    if (Status s = LoadExisting(conn, table, units, &existing); !s.ok()) return fail(s);

  std::vector<PendingCell> erase_cells;  // tombstones get their ref_key here
  erase_cells.reserve(units.size());
  std::vector<const PendingCell*> inserts;
  std::map<Address, Planned> planned;
  // Per unit: for each cell, either an existing match (index -1 into inserts) or a planned insert.
  struct Decision {
    std::vector<long> insert_index;  // -1: existed already
    std::vector<Existing> found;
  };
  std::vector<Decision> decisions(units.size());

  for (size_t ui = 0; ui < units.size(); ++ui) {
    WriteUnit* u = units[ui];
    Decision& d = decisions[ui];
    std::vector<const PendingCell*> cells;
    if (u->erase) {
      PendingCell t = u->cells[0];
      auto rows =
          conn.Query("SELECT MAX(ref_key) FROM " + table + " WHERE row_key = ? AND column_name = ?",
                     {t.row_key.ToBytes(), t.column});
      if (!rows.ok()) return fail(rows.status());
      int64_t next = (*rows)[0].IsNull(0) ? 0 : (*rows)[0].Int(0) + 1;
      for (const auto& [addr, p] : planned)
        if (std::get<0>(addr) == t.row_key.ToBytes() && std::get<1>(addr) == t.column)
          next = std::max(next, std::get<2>(addr) + 1);
      t.ref_key = next;
      erase_cells.push_back(std::move(t));
      cells.push_back(&erase_cells.back());
    } else {
      for (auto& c : u->cells) cells.push_back(&c);
    }
    // Decide the whole unit before planning any of it.
    Status unit_error;
    size_t bad_cell = 0;
    d.insert_index.assign(cells.size(), -1);
    d.found.assign(cells.size(), Existing{});
    std::vector<std::pair<size_t, Address>> new_cells;
    for (size_t ci = 0; ci < cells.size() && unit_error.ok(); ++ci) {
      const PendingCell& c = *cells[ci];
      Address addr{c.row_key.ToBytes(), c.column, c.ref_key};
      const std::string where = CellAddress(datastore, c.row_key, c.column, c.ref_key);
      if (auto it = existing.find(addr); it != existing.end()) {
        if (!SameBody(c, it->second.encoded_body, it->second.tombstone)) {
          unit_error = Conflict("cell " + where + " already exists with a different body");
          bad_cell = ci;
        } else {
          d.found[ci] = it->second;
        }
      } else if (auto pit = planned.find(addr); pit != planned.end()) {
        if (!SameBody(c, pit->second.cell->encoded_body, pit->second.cell->tombstone)) {
          unit_error = Conflict("cell " + where + " is being written with a different body");
          bad_cell = ci;
        } else {
          d.insert_index[ci] = static_cast<long>(pit->second.insert_index);
        }
      } else {
        for (const auto& [prev_ci, prev_addr] : new_cells)
          if (prev_addr == addr &&
              !SameBody(c, cells[prev_ci]->encoded_body, cells[prev_ci]->tombstone)) {
            unit_error = InvalidArgument("cell " + where + " appears twice with different bodies");
            bad_cell = ci;
          }
        new_cells.emplace_back(ci, addr);
      }
    }
    u->results.clear();
    if (!unit_error.ok()) {
      for (size_t ci = 0; ci < cells.size(); ++ci)
        u->results.emplace_back(
            ci == bad_cell
                ? unit_error
                : Aborted("not written: another cell of row " + cells[ci]->row_key.ToString() +
                          " in the batch failed (" + unit_error.ToString() + ")"));
      continue;
    }
    for (const auto& [ci, addr] : new_cells) {
      if (auto pit = planned.find(addr); pit != planned.end()) {
        d.insert_index[ci] = static_cast<long>(pit->second.insert_index);
        continue;
      }
      planned.emplace(addr, Planned{cells[ci], inserts.size()});
      d.insert_index[ci] = static_cast<long>(inserts.size());
      inserts.push_back(cells[ci]);
    }
  }

  // added_id of each planned insert: INSERT ... RETURNING on MariaDB (10.5+),
  // LAST_INSERT_ID() on MySQL.
  std::vector<uint64_t> ids(inserts.size(), 0);
  if (!inserts.empty()) {
    std::string sql =
        "INSERT INTO " + table + " (row_key, column_name, ref_key, body, tombstone, created_at) ";
    std::vector<SqlParam> params;
    params.reserve(inserts.size() * 6 + 1);
    if (lock == CommitLock::kHeld) {
      sql += "VALUES ";
      for (size_t i = 0; i < inserts.size(); ++i) sql += i ? ",(?,?,?,?,?,?)" : "(?,?,?,?,?,?)";
    } else {
      // Reading commit_order FOR UPDATE takes the commit lock before the rows
      // are inserted. Several rows come from a derived table; its byte columns
      // are cast to BINARY, or it would store them as utf8mb4 text.
      const std::string row = "CAST(? AS BINARY), ?, ?, CAST(? AS BINARY), ?, ?";
      const std::string commit_order = QualifiedTable(database, "commit_order");
      if (inserts.size() == 1) {
        sql += "SELECT " + row + " FROM " + commit_order + " WHERE datastore = ?";
      } else {
        sql += "SELECT v.* FROM " + commit_order +
               " c, (SELECT CAST(? AS BINARY) AS r, ? AS n, ? AS k, CAST(? AS BINARY) AS b,"
               " ? AS t, ? AS a";
        for (size_t i = 1; i < inserts.size(); ++i) sql += " UNION ALL SELECT " + row;
        sql += ") v WHERE c.datastore = ?";
      }
    }
    if (lock != CommitLock::kHeld)
      sql += lock == CommitLock::kTakeNoWait ? " FOR UPDATE NOWAIT" : " FOR UPDATE";
    for (size_t i = 0; i < inserts.size(); ++i) {
      const PendingCell& c = *inserts[i];
      params.emplace_back(c.row_key.ToBytes());
      params.emplace_back(c.column);
      params.emplace_back(c.ref_key);
      params.emplace_back(c.encoded_body);
      params.emplace_back(int64_t{c.tombstone ? 1 : 0});
      params.emplace_back(now);
    }
    if (lock != CommitLock::kHeld) params.emplace_back(datastore);
    if (!conn.supports_returning()) {
      // MySQL: the commit lock is held, so no other INSERT into this table
      // runs and the statement's ids are consecutive (step = increment).
      auto inserted = conn.Execute(sql, params);
      if (!inserted.ok()) return fail(inserted.status());
      auto first = conn.LastInsertId();
      if (!first.ok()) return fail(first.status());
      for (size_t i = 0; i < inserts.size(); ++i)
        ids[i] = *first + i * conn.auto_increment_increment();
    } else {
      sql += " RETURNING row_key, column_name, ref_key, added_id";
      // Conflict here (duplicate key) means a cell exists that was not looked
      // up: the caller retries the transaction with look_up_existing.
      auto rows = conn.Query(sql, params);
      if (!rows.ok()) return fail(rows.status());
      if (rows->empty() && lock != CommitLock::kHeld)  // the SELECT found no commit_order row
        return fail(MissingCommitOrderRow(datastore, shard));
      std::map<Address, uint64_t> by_address;
      for (const auto& r : *rows) by_address[Address{r.Bytes(0), r.Bytes(1), r.Int(2)}] = r.Uint(3);
      for (size_t i = 0; i < inserts.size(); ++i) {
        auto it = by_address.find(
            Address{inserts[i]->row_key.ToBytes(), inserts[i]->column, inserts[i]->ref_key});
        if (it == by_address.end()) return fail(Internal("INSERT ... RETURNING missed a row"));
        ids[i] = it->second;
      }
    }
  }

  for (size_t ui = 0; ui < units.size(); ++ui) {
    WriteUnit* u = units[ui];
    if (!u->results.empty()) continue;  // failed unit, already reported
    const Decision& d = decisions[ui];
    for (size_t ci = 0; ci < d.insert_index.size(); ++ci) {
      PutResult r;
      r.shard = shard;
      if (d.insert_index[ci] >= 0) {
        const PendingCell* c = inserts[d.insert_index[ci]];
        r.added_id = ids[d.insert_index[ci]];
        r.created_at = now;
        r.ref_key = c->ref_key;
        // The first claimant created it; a duplicate inside the batch is a retry.
        const PendingCell* mine = u->erase ? nullptr : &u->cells[ci];
        r.created = u->erase || mine == c;
      } else {
        r.added_id = d.found[ci].added_id;
        r.created_at = d.found[ci].created_at;
        r.ref_key = u->cells[ci].ref_key;
        r.created = false;
      }
      u->results.emplace_back(r);
    }
  }
  return Status::Ok();
}

}  // namespace cellar::internal

namespace cellar::internal {

Status LockShardForCommit(MysqlConnection& conn, const std::string& database,
                          const std::string& datastore, uint32_t shard, bool nowait) {
  auto locked =
      conn.Query("SELECT datastore FROM `" + database +
                     "`.`commit_order` WHERE datastore = ? FOR UPDATE" + (nowait ? " NOWAIT" : ""),
                 {datastore});
  if (!locked.ok()) return locked.status();
  if (locked->empty()) return MissingCommitOrderRow(datastore, shard);
  return Status::Ok();
}

namespace {

// One transaction over `batches`. With try_locks, shards whose commit lock is
// held elsewhere are moved to *busy instead of waited for.
Status RunOnce(MysqlConnection& conn, const std::string& prefix, std::vector<ShardBatch*>& batches,
               bool look_up, bool try_locks, std::vector<ShardBatch*>* busy) {
  CELLAR_RETURN_IF_ERROR(conn.Begin());
  auto abort = [&](Status s) {
    conn.Rollback();
    for (auto* b : batches)
      for (auto* u : b->units) u->results.clear();
    return s;
  };
  std::vector<ShardBatch*> locked;
  // Fast path (MariaDB, nothing to read first): each shard's INSERT takes the
  // shard's commit lock itself, one statement per shard.
  bool has_erase = false;
  for (auto* b : batches)
    for (auto* u : b->units) has_erase |= u->erase;
  if (!look_up && !has_erase && conn.supports_returning()) {
    const MicrosSinceEpoch now = NowMicros();
    const CommitLock lock = try_locks ? CommitLock::kTakeNoWait : CommitLock::kTake;
    for (auto* b : batches) {
      Status st = ApplyShardBatch(conn, prefix + "_s" + std::to_string(b->shard), b->datastore,
                                  b->shard, b->units, /*look_up_existing=*/false, now, lock);
      if (st.ok()) {
        locked.push_back(b);
      } else if (try_locks && st.code() == StatusCode::kAborted) {
        for (auto* u : b->units) u->results.clear();
        busy->push_back(b);  // another writer is committing this shard: don't wait here
      } else {
        return abort(st);
      }
    }
    if (Status st = conn.Commit(); !st.ok()) return abort(st);
    batches = std::move(locked);
    return Status::Ok();
  }
  for (auto* b : batches) {
    Status st = LockShardForCommit(conn, prefix + "_s" + std::to_string(b->shard), b->datastore,
                                   b->shard, try_locks);
    if (st.ok()) {
      locked.push_back(b);
    } else if (try_locks && st.code() == StatusCode::kAborted) {
      busy->push_back(b);  // another writer is committing this shard: don't wait here
    } else {
      return abort(st);
    }
  }
  const MicrosSinceEpoch now = NowMicros();
  for (auto* b : locked) {
    Status st = ApplyShardBatch(conn, prefix + "_s" + std::to_string(b->shard), b->datastore,
                                b->shard, b->units, look_up, now);
    if (!st.ok()) return abort(st);
  }
  if (Status st = conn.Commit(); !st.ok()) return abort(st);
  batches = std::move(locked);
  return Status::Ok();
}

// Runs `batches` optimistically, then with look-up after a duplicate key.
Status RunWithLookupFallback(MysqlConnection& conn, const std::string& prefix,
                             std::vector<ShardBatch*> batches, bool try_locks,
                             std::vector<ShardBatch*>* busy) {
  for (bool look_up : {false, true}) {
    std::vector<ShardBatch*> attempt = batches;
    std::vector<ShardBatch*> busy_now;
    Status st = RunOnce(conn, prefix, attempt, look_up, try_locks, &busy_now);
    if (st.ok()) {
      busy->insert(busy->end(), busy_now.begin(), busy_now.end());
      return st;
    }
    // A duplicate key on the optimistic pass: some cell exists already. Redo
    // the transaction, this time reading existing cells first.
    if (look_up || st.code() != StatusCode::kConflict) return st;
  }
  return Internal("unreachable");
}

}  // namespace

Status RunGroupTransaction(MysqlConnection& conn, const std::string& database_prefix,
                           std::vector<ShardBatch*>& batches, std::vector<ShardBatch*>* busy) {
  std::sort(batches.begin(), batches.end(), [](const ShardBatch* a, const ShardBatch* b) {
    return std::tie(a->shard, a->datastore) < std::tie(b->shard, b->datastore);
  });
  // Several shards: take their commit locks without waiting, so one shard
  // that another writer is committing does not hold up the rest.
  const bool try_locks = batches.size() > 1;
  std::vector<ShardBatch*> all = batches;
  Status st = RunWithLookupFallback(conn, database_prefix, all, try_locks, busy);
  if (st.ok()) {
    batches.erase(std::remove_if(batches.begin(), batches.end(),
                                 [&](ShardBatch* b) {
                                   return std::find(busy->begin(), busy->end(), b) != busy->end();
                                 }),
                  batches.end());
  } else {
    busy->clear();
  }
  return st;
}

}  // namespace cellar::internal
