// IndexWriter::ApplyBatch (index_writer.h): many cell versions of one host's
// rows, to every index version given, in one transaction of that host.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "base/log.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_catalog.h"
#include "indexes/index_entry.h"
#include "indexes/index_positions.h"
#include "indexes/index_writer.h"

namespace cellar {
namespace {

// Rows per multi-row statement: keeps every statement well under the
// server's 65,535 placeholders whatever the number of fields.
constexpr size_t kRowsPerStatement = 500;

// A pointer row: (shard of the row, row key bytes, column).
using PointerKey = std::tuple<uint32_t, std::string, std::string>;

// What a batch does to one pointer, applied in memory in log order.
struct PointerState {
  int64_t applied = -1;                  // ref_key applied (as locked, then as moved)
  std::optional<uint32_t> target;        // shard of the entry, if any
  std::optional<uint32_t> first_target;  // as locked: where the stored entry is
  std::optional<IndexEntry> entry;       // the end state's entry
  // Shards an entry of any version applied in this batch maps to. A failed
  // earlier attempt of this batch (or of a prefix of it) may have committed
  // an entry there on another host (step 4) without moving the pointer, so
  // the end state removes every one but its own, not only first_target.
  std::set<uint32_t> passed_targets;
  size_t cell = 0;     // the cell of the end state
  bool moved = false;  // some cell was applied
  // The end state if the pointer is new (as if at -1), and whether step 1
  // created it so.
  int64_t fresh_applied = -1;
  std::optional<uint32_t> fresh_target;
  bool created = false;
};

// Entry writes bound for one host: deletes of entries that moved away or are
// gone, then upserts (grouped by column: each column_def has its own fields).
struct HostWrites {
  struct Delete {
    uint32_t shard;
    std::string row, column;
    int64_t below_ref_key;
  };
  std::vector<Delete> deletes;
  std::map<std::string, std::vector<std::pair<const IndexEntry*, const Cell*>>> upserts;
};

Status WriteEntries(MysqlConnection& conn, const std::string& table, const IndexDefinition& def,
                    const HostWrites& w) {
  if (!w.deletes.empty())
    CELLAR_RETURN_IF_ERROR(ExecuteRows(
        conn, "DELETE FROM " + table + " WHERE ", w.deletes.size(), kRowsPerStatement, " OR ", "",
        [&](size_t i, std::vector<SqlParam>& p) {
          const auto& d = w.deletes[i];
          p.insert(p.end(), {int64_t{d.shard}, d.row, d.column, d.below_ref_key});
          return std::string("(shard = ? AND row_key = ? AND column_key = ? AND ref_key < ?)");
        }));
  for (const auto& upsert : w.upserts) {
    // Named, not structured bindings: the row lambda below captures them
    // (clang 14, the thread-safety build's compiler, cannot capture bindings).
    const std::string& column = upsert.first;
    const auto& rows = upsert.second;
    const IndexColumnDef* cd = def.FindColumnDef(column);
    std::string cols = "shard, row_key, column_key, ref_key, added_id, source_shard, created_at";
    std::string marks = "?, ?, ?, ?, ?, ?, ?";
    std::string updates;
    for (const auto& f : cd->fields) {
      cols += ", " + f.sql_column;
      marks += ", ?";
      updates += f.sql_column + " = IF(VALUES(ref_key) > ref_key, VALUES(" + f.sql_column + "), " +
                 f.sql_column + "), ";
    }
    updates +=
        "added_id = IF(VALUES(ref_key) > ref_key, VALUES(added_id), added_id), "
        "created_at = IF(VALUES(ref_key) > ref_key, VALUES(created_at), created_at), "
        "ref_key = GREATEST(ref_key, VALUES(ref_key))";
    CELLAR_RETURN_IF_ERROR(ExecuteRows(
        conn, "INSERT INTO " + table + " (" + cols + ") VALUES ", rows.size(), kRowsPerStatement,
        ", ", " ON DUPLICATE KEY UPDATE " + updates, [&](size_t i, std::vector<SqlParam>& p) {
          const auto& [e, cell] = rows[i];
          p.insert(p.end(), {int64_t{e->target_shard}, e->row_key.ToBytes(), e->column_key,
                             e->ref_key, e->added_id, int64_t{e->source_shard}, cell->created_at});
          p.insert(p.end(), e->values.begin(), e->values.end());
          return "(" + marks + ")";
        }));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::vector<IndexApplyResult>>> IndexWriter::ApplyBatch(
    const std::string& datastore, const std::vector<IndexVersionRef>& versions,
    const std::vector<const Cell*>& cells, bool record_positions) {
  std::vector<std::vector<IndexApplyResult>> out(cells.size(),
                                                 std::vector<IndexApplyResult>(versions.size()));
  if (cells.empty()) return out;
  // Step 1 tells created pointers by their ref_key (>= 0); the store never
  // writes a negative one.
  for (const Cell* cell : cells)
    if (cell->ref_key < 0)
      return InvalidArgument("index batch cell " + cell->Address(datastore) +
                             " has a negative ref_key");
  const ClusterConfig& cfg = store_->config();
  std::vector<uint32_t> src(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) src[i] = ShardForRow(cells[i]->row_key, cfg.shards);
  // Hosts as the placement says now, resolved once: a shard moved since the
  // batch was formed (cells/shard_placement.h) splits it by host (a row's
  // versions stay together and in order).
  std::map<uint32_t, size_t> host_of;
  for (uint32_t s : src) host_of.emplace(s, store_->HostOfShard(s));
  auto host_index = [&](uint32_t shard) {
    auto it = host_of.find(shard);
    return it != host_of.end() ? it->second
                               : host_of.emplace(shard, store_->HostOfShard(shard)).first->second;
  };
  const size_t host = host_index(src[0]);
  if (std::any_of(src.begin(), src.end(), [&](uint32_t s) { return host_index(s) != host; })) {
    std::map<size_t, std::vector<size_t>> by_host;  // host -> indexes into cells
    for (size_t i = 0; i < cells.size(); ++i) by_host[host_index(src[i])].push_back(i);
    for (const auto& [h, members] : by_host) {
      std::vector<const Cell*> part;
      for (size_t i : members) part.push_back(cells[i]);
      CELLAR_ASSIGN_OR_RETURN(auto r, ApplyBatch(datastore, versions, part, record_positions));
      for (size_t k = 0; k < members.size(); ++k) out[members[k]] = std::move(r[k]);
    }
    return out;
  }
  const std::string db = cfg.HostDatabase(cfg.mysql.hosts[host]);
  const DatastoreConfig* ds = cfg.FindDatastore(datastore);
  const int64_t now = NowMicros();

  CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(host).Acquire());
  MysqlConnection& c = *lease;
  CELLAR_RETURN_IF_ERROR(c.Begin());
  auto fail = [&](Status s) -> Result<std::vector<std::vector<IndexApplyResult>>> {
    c.Rollback();
    return s;
  };

  // Each cell's entry per version does not depend on the pointers: extracted once.
  struct Outcome {
    PointerState* pointer = nullptr;  // null when the version does not index the column
    std::optional<IndexEntry> entry;
    Status skipped;  // why an indexed, live cell has no entry
  };
  struct VersionWork {
    std::map<PointerKey, PointerState> pointers;
    std::map<size_t, HostWrites> writes;  // by host of the entry's shard
    std::vector<Outcome> outcomes;        // by cell
  };
  std::vector<VersionWork> work(versions.size());
  for (size_t v = 0; v < versions.size(); ++v) {
    const IndexDefinition& def = *versions[v].def;
    auto& pointers = work[v].pointers;
    auto& outcomes = work[v].outcomes;
    outcomes.resize(cells.size());
    for (size_t i = 0; i < cells.size(); ++i) {
      const Cell& cell = *cells[i];
      const IndexColumnDef* cd = def.FindColumnDef(cell.column);
      if (!cd) continue;
      Outcome& o = outcomes[i];
      o.pointer = &pointers[{src[i], cell.row_key.ToBytes(), cell.column}];
      // An expired version (its column's TTL passed) has no entry, like a
      // tombstone: a purge may be deleting it, and reads no longer see it.
      const ColumnConfig* col = ds ? ds->FindColumn(cell.column) : nullptr;
      const bool expired = col && col->ttl_ms > 0 && cell.created_at < now - col->ttl_ms * 1000;
      if (!cell.tombstone && !expired) {
        auto e = ExtractEntry(def, *cd, cell, cfg.shards);
        if (e.ok())
          o.entry = std::move(e).value();
        else
          o.skipped = e.status();
      }
      // A pointer seen for the first time ends where the highest ref_key of
      // its cells puts it (the first such cell in log order; the others are
      // stale): its end state, known before the pointer is read.
      PointerState& p = *o.pointer;
      if (cell.ref_key > p.fresh_applied) {
        p.fresh_applied = cell.ref_key;
        p.fresh_target = o.entry ? std::optional<uint32_t>(o.entry->target_shard) : std::nullopt;
      }
    }
    if (pointers.empty()) continue;
    const std::string pointer =
        QualifiedTable(db, PointerTableName(def.table, versions[v].version));
    // 1. Lock and read the pointers, in key order (so two batches lock in one
    // order), in statements of up to kRowsPerStatement keys (StatementRowCounts).
    // A missing pointer is created in its end state (a fresh row needs no
    // second write: most rows of a trip log are new). An existing one is
    // locked by the update, which stores its ref_key as -ref_key - 2 (<= -1,
    // and ref_keys are >= 0), so RETURNING (the row as it is after the
    // statement) tells an existing pointer from a created one even when both
    // hold the same values; step 5 writes every existing pointer back, moved
    // or not, in this transaction. Not INSERT IGNORE: on an existing row that
    // takes a shared lock, and two writers of one row upgrading it later
    // deadlock. ON DUPLICATE KEY UPDATE locks the row exclusively at once, by
    // its primary key: no scan, no gap lock.
    std::vector<std::pair<const PointerKey*, const PointerState*>> keys;
    keys.reserve(pointers.size());
    for (const auto& [k, st] : pointers) keys.emplace_back(&k, &st);
    size_t start = 0;
    for (size_t count : StatementRowCounts(keys.size(), kRowsPerStatement)) {
      const size_t end = start + count;
      std::string sql =
          "INSERT INTO " + pointer + " (shard, row_key, column_key, ref_key, target_shard) VALUES ";
      std::vector<SqlParam> params;
      params.reserve(5 * count);
      for (size_t i = start; i < end; ++i) {
        const auto& [shard, row, column] = *keys[i].first;
        const PointerState& p = *keys[i].second;
        sql += i > start ? ", (?, ?, ?, ?, ?)" : "(?, ?, ?, ?, ?)";
        params.insert(params.end(),
                      {int64_t{shard}, row, column, p.fresh_applied,
                       p.fresh_target ? SqlParam(int64_t{*p.fresh_target}) : SqlParam(nullptr)});
      }
      auto rows = c.Query(sql +
                              " ON DUPLICATE KEY UPDATE ref_key = -ref_key - 2"
                              " RETURNING shard, row_key, column_key, ref_key, target_shard",
                          params);
      if (!rows.ok()) return fail(rows.status());
      for (const auto& r : *rows) {
        auto it = pointers.find({static_cast<uint32_t>(r.Uint(0)), r.Bytes(1), r.Bytes(2)});
        if (it == pointers.end()) continue;
        if (r.Int(3) >= 0) {  // created in its end state: as if it had been at -1
          it->second.created = true;
          continue;
        }
        it->second.applied = -r.Int(3) - 2;
        if (!r.IsNull(4)) it->second.target = it->second.first_target = r.Uint(4);
      }
      if (rows->size() != end - start)
        return fail(Internal("index pointer lock returned " + std::to_string(rows->size()) +
                             " rows for " + std::to_string(end - start) + " pointers"));
      start = end;
    }
    // 2. Apply the cells in log order, in memory.
    for (size_t i = 0; i < cells.size(); ++i) {
      const Cell& cell = *cells[i];
      Outcome& o = outcomes[i];
      if (o.pointer == nullptr) continue;
      PointerState& p = *o.pointer;
      IndexApplyResult& result = out[i][v];
      if (p.applied >= cell.ref_key) {
        result = {IndexApply::kStale, ""};
        continue;
      }
      result = {IndexApply::kRemoved, ""};
      if (o.entry) {
        p.passed_targets.insert(o.entry->target_shard);
        result = {IndexApply::kUpserted, ""};
      } else if (!o.skipped.ok()) {
        result = {IndexApply::kSkipped, o.skipped.message()};
        if (probe_) probe_->Skipped(def.table).Increment();
        LogInfo("index", "no entry for cell",
                {{"index", def.table},
                 {"cell", cell.Address(datastore)},
                 {"reason", o.skipped.message()}});
      }
      p.applied = cell.ref_key;
      p.target = o.entry ? std::optional<uint32_t>(o.entry->target_shard) : std::nullopt;
      p.entry = std::move(o.entry);
      p.cell = i;
      p.moved = true;
    }
    for (const auto& [k, p] : pointers)
      if (p.created && (p.applied != p.fresh_applied || p.target != p.fresh_target))
        return fail(Internal("index pointer created in an end state its cells do not reach"));
    // 3. The end state's entry writes, by host: the stored entry goes when
    // the row's entry is gone or lives on another shard now; the new one is
    // upserted (version-checked) in its shard.
    for (const auto& [k, p] : pointers) {
      if (!p.moved) continue;
      const auto& [shard, row, column] = k;
      std::set<uint32_t> stale = p.passed_targets;
      if (p.first_target) stale.insert(*p.first_target);
      if (p.target) stale.erase(*p.target);
      for (uint32_t target : stale)
        work[v].writes[host_index(target)].deletes.push_back({target, row, column, p.applied});
      if (p.entry)
        work[v].writes[host_index(p.entry->target_shard)].upserts[column].push_back(
            {&*p.entry, cells[p.cell]});
    }
  }
  // 4. Entries on other hosts first, each host in one short transaction that
  // holds no lock while this one waits: nothing of this host is written yet.
  for (size_t v = 0; v < versions.size(); ++v) {
    for (const auto& [h, w] : work[v].writes) {
      if (h == host) continue;
      const std::string table =
          QualifiedTable(cfg.HostDatabase(cfg.mysql.hosts[h]),
                         EntryTableName(versions[v].def->table, versions[v].version));
      auto other = store_->PoolForHost(h).Acquire();
      if (!other.ok()) return fail(other.status());
      MysqlConnection& oc = **other;
      Status s = oc.Begin();
      if (s.ok()) s = WriteEntries(oc, table, *versions[v].def, w);
      if (s.ok()) s = oc.Commit();
      if (!s.ok()) {
        oc.Rollback();
        return fail(s);
      }
    }
  }
  // 5. This host's entries, the pointers and the positions, then commit.
  for (size_t v = 0; v < versions.size(); ++v) {
    const IndexDefinition& def = *versions[v].def;
    auto mine = work[v].writes.find(host);
    if (mine != work[v].writes.end()) {
      Status s = WriteEntries(c, QualifiedTable(db, EntryTableName(def.table, versions[v].version)),
                              def, mine->second);
      if (!s.ok()) return fail(s);
    }
    // Every pointer step 1 found (and marked): its end state, or its stored
    // state back when no cell moved it. Created ones are in theirs already.
    std::vector<std::pair<const PointerKey*, const PointerState*>> moved;
    for (const auto& [k, p] : work[v].pointers)
      if (!p.created) moved.emplace_back(&k, &p);
    if (moved.empty()) continue;
    Status s = ExecuteRows(
        c,
        "INSERT INTO " + QualifiedTable(db, PointerTableName(def.table, versions[v].version)) +
            " (shard, row_key, column_key, ref_key, target_shard) VALUES ",
        moved.size(), kRowsPerStatement, ", ",
        " ON DUPLICATE KEY UPDATE ref_key = VALUES(ref_key), target_shard = VALUES(target_shard)",
        [&](size_t i, std::vector<SqlParam>& p) {
          const auto& [shard, row, column] = *moved[i].first;
          const PointerState& st = *moved[i].second;
          p.insert(p.end(), {int64_t{shard}, row, column, st.applied,
                             st.target ? SqlParam(int64_t{*st.target}) : SqlParam(nullptr)});
          return std::string("(?, ?, ?, ?, ?)");
        });
    if (!s.ok()) return fail(s);
  }
  if (record_positions) {
    std::map<uint32_t, uint64_t> highest;
    for (size_t i = 0; i < cells.size(); ++i)
      highest[src[i]] = std::max(highest[src[i]], cells[i]->added_id);
    if (Status s = RecordIndexPositions(c, db, datastore, highest); !s.ok()) return fail(s);
  }
  CELLAR_RETURN_IF_ERROR(c.Commit());
  return out;
}

}  // namespace cellar
