#include "cells/internal/batch_transaction.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "cells/body_codec.h"
#include "cells/internal/cells_table.h"
#include "cells/internal/write_fence.h"
#include "cells/log_position.h"

namespace cellar::internal {

std::vector<size_t> InsertRowCounts(size_t cells) {
  return StatementRowCounts(cells, kMaxInsertRows, kExactInsertRows, kInsertLargeStep);
}

bool FitsOneInsert(size_t cells) {
  return FitsOneStatement(cells, kMaxInsertRows, kExactInsertRows, kInsertLargeStep);
}

size_t UnitsForOneStatement(const std::vector<WriteUnit*>& units) {
  size_t total = 0;
  for (const WriteUnit* u : units) total += u->cells.size();
  if (total == 0 || FitsOneInsert(total)) return units.size();
  size_t prefix = total;
  for (size_t k = units.size() - 1; k >= 1; --k) {
    prefix -= units[k]->cells.size();
    if (total - prefix > total / 4) break;
    if (!units[k]->joins_previous && FitsOneInsert(prefix)) return k;
  }
  return units.size();
}

namespace {

// A cell's address in one datastore's table. The column is a view of a string
// that outlives the map holding the key (a unit's cell, a look-up row kept in
// the function's scope): planning a batch copies no strings and allocates
// nothing per cell but the hash maps' nodes.
struct Address {
  Uuid row;
  std::string_view column;
  int64_t ref = 0;
  bool operator==(const Address&) const = default;
};
struct AddressHash {
  size_t operator()(const Address& a) const {
    size_t h = UuidHash{}(a.row);
    h ^= std::hash<std::string_view>{}(a.column) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= static_cast<size_t>(a.ref) * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
    return h;
  }
};
template <typename V>
using AddressMap = std::unordered_map<Address, V, AddressHash>;

Address AddressOf(const PendingCell& c) { return Address{c.row_key, c.column, c.ref_key}; }

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

constexpr size_t kLookupChunk = 128;  // addresses per look-up SELECT, at most

// Fills `out` with the stored cells at the units' addresses; the keys' views
// point into `rows_kept`, which must outlive `out`.
Status LoadExisting(MysqlConnection& conn, const std::string& table,
                    const std::vector<WriteUnit*>& units, std::vector<SqlRow>* rows_kept,
                    AddressMap<Existing>* out) {
  std::vector<const PendingCell*> all;
  for (auto* u : units)
    if (!u->erase)
      for (auto& c : u->cells) all.push_back(&c);
  size_t begin = 0;
  for (size_t count : StatementRowCounts(all.size(), kLookupChunk)) {
    const size_t end = begin + count;
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
    for (auto& r : rows) rows_kept->push_back(std::move(r));
    begin = end;
  }
  out->reserve(rows_kept->size());
  for (const auto& r : *rows_kept) {
    Existing e{r.Bytes(3), r.Int(4) != 0, r.Uint(5), r.Int(6)};
    out->emplace(Address{Uuid::FromBytes(r.Bytes(0)), r.Bytes(1), r.Int(2)}, std::move(e));
  }
  return Status::Ok();
}

// One version of the erased column as the erase sees it: stored (committed)
// or planned earlier in this transaction (planned_index >= 0).
struct EraseCandidate {
  int64_t ref_key = 0;
  bool tombstone = false;
  Existing stored;
  long planned_index = -1;
};

// What an erase unit does: write a tombstone at ref_key, or nothing (`same`
// is the tombstone that already is the latest version), or fail with `error`.
struct EraseDecision {
  Status error;
  bool write = false;
  int64_t ref_key = 0;
  EraseCandidate same;
};

std::string Kind(const EraseCandidate& v) { return v.tombstone ? "a tombstone" : "live"; }

// The erase contract of CellStore::Erase (cell_store.h). "Latest" is the
// highest-ref_key unexpired version, as for Latest(); a new tombstone goes
// above every stored version, expired or not (their addresses are taken until
// purged). The top versions are read with FOR UPDATE, so an erase waits for a
// concurrent transaction that is inserting above them instead of deciding on
// a stale latest.
Result<EraseDecision> DecideErase(MysqlConnection& conn, const std::string& table,
                                  const std::string& datastore, const WriteUnit& u,
                                  const AddressMap<Planned>& planned, MicrosSinceEpoch now) {
  const PendingCell& t = u.cells[0];
  const std::string row = t.row_key.ToBytes();
  const MicrosSinceEpoch visible_since = u.ttl_ms > 0 ? now - u.ttl_ms * 1000 : 0;
  CELLAR_ASSIGN_OR_RETURN(
      auto rows, conn.Query("SELECT ref_key, tombstone, added_id, created_at FROM " + table +
                                " WHERE row_key = ? AND column_name = ? AND created_at >= ?"
                                " ORDER BY ref_key DESC LIMIT 2 FOR UPDATE",
                            {row, t.column, visible_since}));
  std::vector<EraseCandidate> top;
  std::optional<int64_t> max_ref;  // highest ref_key stored or planned, expired included
  for (const auto& r : rows) {
    EraseCandidate v;
    v.ref_key = r.Int(0);
    v.tombstone = r.Int(1) != 0;
    v.stored = Existing{"", v.tombstone, r.Uint(2), r.Int(3)};
    max_ref = std::max(max_ref.value_or(v.ref_key), v.ref_key);
    top.push_back(v);
  }
  if (u.ttl_ms > 0) {  // expired versions may sit above the visible ones
    CELLAR_ASSIGN_OR_RETURN(auto m, conn.Query("SELECT MAX(ref_key) FROM " + table +
                                                   " WHERE row_key = ? AND column_name = ?",
                                               {row, t.column}));
    if (!m.empty() && !m[0].IsNull(0)) max_ref = std::max(max_ref.value_or(0), m[0].Int(0));
  }
  for (const auto& [addr, p] : planned)
    if (addr.row == t.row_key && addr.column == t.column) {
      EraseCandidate v;
      v.ref_key = addr.ref;
      v.tombstone = p.cell->tombstone;
      v.planned_index = static_cast<long>(p.insert_index);
      max_ref = std::max(max_ref.value_or(v.ref_key), v.ref_key);
      top.push_back(v);
    }
  std::sort(top.begin(), top.end(),
            [](const EraseCandidate& a, const EraseCandidate& b) { return a.ref_key > b.ref_key; });

  EraseDecision d;
  auto write_new = [&] {
    d.write = true;
    d.ref_key = max_ref ? *max_ref + 1 : 0;
    return d;
  };
  auto already = [&](const EraseCandidate& v) {
    d.same = v;
    d.ref_key = v.ref_key;
    return d;
  };
  if (!u.expected_ref_key) {
    if (!top.empty() && top[0].tombstone) return already(top[0]);
    return write_new();
  }
  const int64_t k = *u.expected_ref_key;
  const std::string where = datastore + "/" + t.row_key.ToString() + "/" + t.column;
  if (top.empty())
    d.error = Conflict("erase of " + where + " expected latest ref_key " + std::to_string(k) +
                       ", but the column has no version; nothing was written");
  else if (top[0].ref_key == k)
    return top[0].tombstone ? already(top[0]) : write_new();
  else if (top[0].tombstone && top[0].ref_key > k &&
           (top[0].ref_key - 1 == k || (top.size() > 1 && top[1].ref_key == k)))
    return already(top[0]);  // a tombstone directly above k: this very erase, retried
  else
    d.error = Conflict("erase of " + where + " expected latest ref_key " + std::to_string(k) +
                       ", but the latest is ref_key " + std::to_string(top[0].ref_key) + " (" +
                       Kind(top[0]) + "); nothing was written");
  return d;
}

}  // namespace

Status ApplyDatastoreBatch(MysqlConnection& conn, const std::string& database,
                           const std::string& datastore, const std::vector<WriteUnit*>& units,
                           bool look_up_existing, bool single_statement, MicrosSinceEpoch now) {
  const std::string table = QualifiedTable(database, CellsTableName(datastore));
  auto fail = [&](Status s) { return s; };
  std::vector<uint32_t> insert_shard;  // shard of inserts[i]

  std::vector<SqlRow> existing_rows;  // the keys of `existing` view into these
  AddressMap<Existing> existing;
  const size_t erases = static_cast<size_t>(
      std::count_if(units.begin(), units.end(), [](auto* u) { return u->erase; }));
  const bool has_erase = erases > 0;
  if (look_up_existing || has_erase)
    if (Status s = LoadExisting(conn, table, units, &existing_rows, &existing); !s.ok())
      return fail(s);
  size_t total_cells = 0;
  for (const WriteUnit* u : units) total_cells += u->cells.size();

  // Tombstones get their ref_key here. Reserved, so inserts' pointers to them stay valid.
  std::vector<PendingCell> erase_cells;
  erase_cells.reserve(erases);
  std::vector<const PendingCell*> inserts;
  inserts.reserve(total_cells);
  insert_shard.reserve(total_cells);
  AddressMap<Planned> planned;
  planned.reserve(total_cells);
  // Per unit: for each cell, either an existing match (index -1 into inserts) or a planned insert.
  struct Decision {
    std::vector<long> insert_index;  // -1: existed already
    std::vector<Existing> found;
    int64_t erase_ref = 0;       // an erase: the tombstone's ref_key
    bool erase_created = false;  // an erase: false when the latest already was its tombstone
  };
  std::vector<Decision> decisions(units.size());

  for (size_t ui = 0; ui < units.size(); ++ui) {
    WriteUnit* u = units[ui];
    Decision& d = decisions[ui];
    std::vector<const PendingCell*> cells;
    if (u->erase) {
      auto e = DecideErase(conn, table, datastore, *u, planned, now);
      if (!e.ok()) return fail(e.status());
      u->results.clear();
      if (!e->error.ok()) {
        u->results.emplace_back(e->error);
        continue;
      }
      d.erase_ref = e->ref_key;
      d.erase_created = e->write;
      if (!e->write) {  // the latest already is a tombstone: nothing to write
        d.insert_index.assign(1, e->same.planned_index);
        d.found.assign(1, e->same.stored);
        continue;
      }
      PendingCell t = u->cells[0];
      t.ref_key = e->ref_key;
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
      const Address addr = AddressOf(c);
      auto where = [&] { return CellAddress(datastore, c.row_key, c.column, c.ref_key); };
      auto it = existing.empty() ? existing.end() : existing.find(addr);
      if (it != existing.end()) {
        if (!SameBody(c, it->second.encoded_body, it->second.tombstone)) {
          unit_error = Conflict("cell " + where() + " already exists with a different body");
          bad_cell = ci;
        } else {
          d.found[ci] = it->second;
        }
      } else if (auto pit = planned.find(addr); pit != planned.end()) {
        if (!SameBody(c, pit->second.cell->encoded_body, pit->second.cell->tombstone)) {
          unit_error = Conflict("cell " + where() + " is being written with a different body");
          bad_cell = ci;
        } else {
          d.insert_index[ci] = static_cast<long>(pit->second.insert_index);
        }
      } else {
        for (const auto& [prev_ci, prev_addr] : new_cells)
          if (prev_addr == addr &&
              !SameBody(c, cells[prev_ci]->encoded_body, cells[prev_ci]->tombstone)) {
            unit_error =
                InvalidArgument("cell " + where() + " appears twice with different bodies");
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
      insert_shard.push_back(u->shard);
    }
  }

  // added_id of each planned insert, from multi-row INSERT ... RETURNING
  // statements of ladder sizes (InsertRowCounts); one when single_statement.
  std::vector<uint64_t> ids(inserts.size(), 0);
  const std::vector<size_t> counts = single_statement && !inserts.empty()
                                         ? std::vector<size_t>{inserts.size()}
                                         : InsertRowCounts(inserts.size());
  size_t start = 0;
  for (size_t count : counts) {
    std::string sql =
        "INSERT INTO " + table +
        " (shard, row_key, column_name, ref_key, body, tombstone, created_at) VALUES ";
    // The cells' bytes are bound without copies: the units outlive the call.
    std::vector<SqlParamView> params;
    params.reserve(count * 7);
    for (size_t i = start; i < start + count; ++i) {
      // The first row locks the write fence before any added_id exists (in
      // later statements of the transaction it holds it already).
      sql += i > start ? ",(?,?,?,?,?,?,?)" : "(?,?,?,?,?,?," + FencedCreatedAt(database) + ")";
      const PendingCell& c = *inserts[i];
      params.emplace_back(uint64_t{insert_shard[i]});
      params.emplace_back(c.row_key.BytesView());
      params.emplace_back(std::string_view(c.column));
      params.emplace_back(c.ref_key);
      params.emplace_back(std::string_view(c.encoded_body));
      params.emplace_back(int64_t{c.tombstone ? 1 : 0});
      params.emplace_back(now);
    }
    sql += " RETURNING row_key, column_name, ref_key, added_id";
    // Conflict here (duplicate key) means a cell exists that was not looked
    // up: the caller retries the transaction with look_up_existing.
    auto rows = conn.QueryBorrowed(sql, params);
    if (!rows.ok()) return FencedInsertStatus(rows.status(), database);
    // MariaDB returns a multi-row INSERT's rows in VALUES order; each row's
    // address is still checked, and any other order is matched by address.
    auto same_address = [](const SqlRow& r, const PendingCell& c) {
      return r.Int(2) == c.ref_key && r.Bytes(1) == c.column && r.Bytes(0) == c.row_key.BytesView();
    };
    bool in_order = rows->size() == count;
    for (size_t i = 0; in_order && i < count; ++i) {
      in_order = same_address((*rows)[i], *inserts[start + i]);
      if (in_order) ids[start + i] = (*rows)[i].Uint(3);
    }
    if (!in_order) {
      AddressMap<uint64_t> by_address;
      for (const auto& r : *rows)
        by_address[Address{Uuid::FromBytes(r.Bytes(0)), r.Bytes(1), r.Int(2)}] = r.Uint(3);
      for (size_t i = start; i < start + count; ++i) {
        auto it = by_address.find(AddressOf(*inserts[i]));
        if (it == by_address.end()) return Internal("INSERT ... RETURNING missed a row");
        ids[i] = it->second;
      }
    }
    start += count;
  }

  for (size_t ui = 0; ui < units.size(); ++ui) {
    WriteUnit* u = units[ui];
    if (!u->results.empty()) continue;  // failed unit, already reported
    const Decision& d = decisions[ui];
    u->results.reserve(d.insert_index.size());
    for (size_t ci = 0; ci < d.insert_index.size(); ++ci) {
      PutResult r;
      r.shard = u->shard;
      if (d.insert_index[ci] >= 0) {
        const PendingCell* c = inserts[d.insert_index[ci]];
        r.added_id = ids[d.insert_index[ci]];
        r.created_at = now;
        r.ref_key = c->ref_key;
        // The first claimant created it; a duplicate inside the batch is a retry.
        const PendingCell* mine = u->erase ? nullptr : &u->cells[ci];
        r.created = u->erase ? d.erase_created : mine == c;
      } else {
        r.added_id = d.found[ci].added_id;
        r.created_at = d.found[ci].created_at;
        r.ref_key = u->erase ? d.erase_ref : u->cells[ci].ref_key;
        r.created = false;
      }
      // Named by this host: the shard may move to another one later.
      r.position = EncodeLogPosition(database, datastore, u->shard, r.added_id);
      u->results.emplace_back(r);
    }
  }
  return Status::Ok();
}

}  // namespace cellar::internal

namespace cellar::internal {
namespace {

// True when the transaction is the one INSERT of one datastore, which then
// runs as an autocommit statement: no reads first (no look-up, no erase) and
// a cell count on the statement ladder.
bool SingleStatement(const std::vector<DatastoreBatch>& batches, bool look_up) {
  if (look_up || batches.size() != 1) return false;
  size_t cells = 0;
  for (const WriteUnit* u : batches[0].units) {
    if (u->erase) return false;
    cells += u->cells.size();
  }
  return cells <= kExactInsertRows || FitsOneInsert(cells);
}

// One transaction over `batches`; with look_up, existing cells are read first.
// Its INSERTs lock the write fence themselves (FencedCreatedAt).
Status RunOnce(MysqlConnection& conn, const std::string& database,
               std::vector<DatastoreBatch>& batches, bool look_up) {
  const bool autocommit = SingleStatement(batches, look_up);
  if (!autocommit) CELLAR_RETURN_IF_ERROR(conn.Begin());
  auto abort = [&](Status s) {
    conn.Rollback();  // an autocommit statement that failed is rolled back already
    for (auto& b : batches)
      for (auto* u : b.units) u->results.clear();
    return s;
  };
  const MicrosSinceEpoch now = NowMicros();
  for (auto& b : batches) {
    Status st = ApplyDatastoreBatch(conn, database, b.datastore, b.units, look_up,
                                    /*single_statement=*/autocommit, now);
    if (!st.ok()) return abort(st);
  }
  if (!autocommit)
    if (Status st = conn.Commit(); !st.ok()) return abort(st);
  return Status::Ok();
}

}  // namespace

Status RunGroupTransaction(MysqlConnection& conn, const std::string& database,
                           std::vector<DatastoreBatch>& batches) {
  for (bool look_up : {false, true}) {
    Status st = RunOnce(conn, database, batches, look_up);
    if (st.ok()) return st;
    // A duplicate key on the optimistic pass: some cell exists already. Redo
    // the transaction, this time reading existing cells first.
    if (look_up || st.code() != StatusCode::kConflict) return st;
  }
  return Internal("unreachable");
}

}  // namespace cellar::internal
