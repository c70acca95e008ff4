// CheckIndex (index_maintenance.h): compares an index version with the cells
// one page at a time, and repairs a (row, column) only under its pointer's
// lock, from the latest cell read under that lock.
//
// Pass 1, the cells: per host, pages of the latest version of each (row,
// column) (CellStore::HostLatestPage). A version that calls for an entry is
// looked up where that entry lives: none is "missing", one with another
// ref_key or other values is "stale".
// Pass 2, the entries: per host and shard, pages of the entry table; an entry
// its row's pointer does not point at is "extra" (a stray copy, or a row that
// has no entry any more). Entries of shards the host does not own are extra.
//
// Repair of a (row, column) (RepairRow): in one transaction on the row's
// host, the pointer row is locked (created if missing), the column's latest
// version read, and the index made to say what it says: the pointed-to entry
// and the stray are deleted, the latest version's entry written, the pointer
// moved to it (never below the ref_key it had). The live worker, backfill and
// other repairs lock the same pointer first, so a version committed after the
// read is applied after the repair (its ref_key is higher) and nothing written
// meanwhile is undone or deleted. Memory: one page of cells or entries, and the
// rows of a page to repair.
#include <cmath>
#include <map>
#include <optional>
#include <thread>

#include "base/log.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_catalog.h"
#include "indexes/index_entry.h"
#include "indexes/index_maintenance.h"

namespace cellar {
namespace {

using RowColumn = std::pair<std::string, std::string>;  // row key bytes, column

class IndexChecker {
 public:
  IndexChecker(CellStore* store, const IndexDefinition& def, int version,
               const IndexCheckOptions& options, IndexCheckReport* report)
      : store_(store),
        cfg_(store->config()),
        def_(def),
        version_(version),
        options_(options),
        report_(report),
        fields_(def.AllFields()) {
    columns_ = "row_key, column_key, ref_key";
    for (const auto& f : fields_) columns_ += ", " + f.sql_column;
    columns_ += ", shard, created_at";
  }

  Status CheckCells();
  Status CheckEntries();
  // The report's examples: up to 10, the kinds found taking turns.
  void TakeExamples() {
    for (size_t i = 0; report_->examples.size() < kExamples; ++i) {
      bool any = false;
      for (const char* kind : {"missing", "stale", "extra"})
        if (i < examples_[kind].size() && report_->examples.size() < kExamples) {
          report_->examples.push_back(examples_[kind][i]);
          any = true;
        }
      if (!any) break;
    }
  }

 private:
  std::string EntryTable(size_t host) const {
    return QualifiedTable(cfg_.HostDatabase(cfg_.mysql.hosts[host]),
                          EntryTableName(def_.table, version_));
  }
  std::string PointerTable(size_t host) const {
    return QualifiedTable(cfg_.HostDatabase(cfg_.mysql.hosts[host]),
                          PointerTableName(def_.table, version_));
  }
  // The entry `cell` calls for; nullopt for a tombstone, a version past its
  // TTL or a body without valid fields.
  std::optional<IndexEntry> Expected(const Cell& cell) const;
  bool SameValues(const SqlRow& r, const IndexEntry& e) const;
  // Up to kExamples examples of each kind, by kind (TakeExamples shows them).
  void Note(const std::string& what, const std::string& row, const std::string& column) {
    auto& kind = examples_[what];
    if (kind.size() < kExamples)
      kind.push_back(what + " " + def_.datastore + "/" + Uuid::FromBytes(row).ToString() + "/" +
                     column);
  }
  // Rows of `keys` ((shard, row, column) triples) selected from `table` on
  // `host` with `select` ("SELECT ... FROM t WHERE "), in one statement.
  Result<std::vector<SqlRow>> SelectKeys(
      size_t host, const std::string& select,
      const std::vector<std::tuple<uint32_t, std::string, std::string>>& keys);
  Status RepairRow(const RowColumn& key, std::optional<uint32_t> stray);
  Status Repair(const RowColumn& key, std::optional<uint32_t> stray) {
    if (!options_.repair) return Status::Ok();
    for (int attempt = 0;; ++attempt) {
      Status s = RepairRow(key, stray);
      // Aborted: a deadlock with a concurrent writer of the row: nothing of
      // this attempt committed on the row's host, and again is safe.
      if (s.ok()) ++report_->repaired;
      if (s.ok() || s.code() != StatusCode::kAborted || attempt >= 20) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(5 << std::min(attempt, 6)));
    }
  }

  CellStore* const store_;
  const ClusterConfig& cfg_;
  const IndexDefinition& def_;
  const int version_;
  const IndexCheckOptions& options_;
  IndexCheckReport* const report_;
  const std::vector<IndexField> fields_;
  std::string columns_;  // row_key, column_key, ref_key, every field, shard, created_at
  static constexpr size_t kExamples = 10;
  std::map<std::string, std::vector<std::string>> examples_;
};

std::optional<IndexEntry> IndexChecker::Expected(const Cell& cell) const {
  const IndexColumnDef* cd = def_.FindColumnDef(cell.column);
  if (!cd || cell.tombstone) return std::nullopt;
  const ColumnConfig* col = cfg_.FindDatastore(def_.datastore)->FindColumn(cell.column);
  if (col && col->ttl_ms > 0 && cell.created_at < NowMicros() - col->ttl_ms * 1000)
    return std::nullopt;
  auto entry = ExtractEntry(def_, *cd, cell, cfg_.shards);
  if (!entry.ok()) return std::nullopt;
  return std::move(entry).value();
}

// Whether the stored field columns (from column 3 on, in AllFields order)
// hold the entry's values: its column_def's fields, NULL elsewhere.
bool IndexChecker::SameValues(const SqlRow& r, const IndexEntry& e) const {
  const IndexColumnDef& cd = *def_.FindColumnDef(e.column_key);
  for (size_t i = 0; i < fields_.size(); ++i) {
    const size_t col = 3 + i;
    const SqlParam* want = nullptr;
    for (size_t k = 0; k < cd.fields.size(); ++k)
      if (cd.fields[k].path == fields_[i].path) want = &e.values[k];
    if (!want) {
      if (!r.IsNull(col)) return false;
      continue;
    }
    if (r.IsNull(col)) return false;
    if (auto* d = std::get_if<double>(want)) {
      // Stored DOUBLEs come back as text: allow for its rounding only.
      const double got = r.Double(col);
      if (std::fabs(got - *d) > 1e-12 * std::max(1.0, std::fabs(*d))) return false;
    } else if (auto* i64 = std::get_if<int64_t>(want)) {
      if (r.Int(col) != *i64) return false;
    } else if (auto* str = std::get_if<std::string>(want)) {
      if (r.Bytes(col) != *str) return false;
    }
  }
  return true;
}

Result<std::vector<SqlRow>> IndexChecker::SelectKeys(
    size_t host, const std::string& select,
    const std::vector<std::tuple<uint32_t, std::string, std::string>>& keys) {
  if (keys.empty()) return std::vector<SqlRow>{};
  std::string sql = select + "(shard, row_key, column_key) IN (";
  std::vector<SqlParam> params;
  for (size_t i = 0; i < keys.size(); ++i) {
    sql += i ? ", (?, ?, ?)" : "(?, ?, ?)";
    params.emplace_back(int64_t{std::get<0>(keys[i])});
    params.emplace_back(std::get<1>(keys[i]));
    params.emplace_back(std::get<2>(keys[i]));
  }
  CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(host).Acquire());
  return lease->Query(sql + ")", params);
}

Status IndexChecker::CheckCells() {
  for (size_t h = 0; h < cfg_.mysql.hosts.size(); ++h) {
    std::string after_row, after_column;
    while (true) {
      CELLAR_ASSIGN_OR_RETURN(
          std::vector<Cell> page,
          store_->HostLatestPage(def_.datastore, h, after_row, after_column, options_.page));
      if (page.empty()) break;
      after_row = page.back().row_key.ToBytes();
      after_column = page.back().column;
      if (options_.after_page_read) options_.after_page_read();
      // The entries the page's versions call for, by the host they live on.
      std::map<RowColumn, IndexEntry> expected;
      std::map<size_t, std::vector<std::tuple<uint32_t, std::string, std::string>>> by_host;
      for (const Cell& c : page) {
        if (store_->HostOfShard(c.shard) != h) continue;  // a moved shard's leftover
        std::optional<IndexEntry> e = Expected(c);
        if (!e) continue;
        ++report_->expected;
        by_host[store_->HostOfShard(e->target_shard)].emplace_back(e->target_shard,
                                                                   c.row_key.ToBytes(), c.column);
        expected.emplace(RowColumn{c.row_key.ToBytes(), c.column}, std::move(*e));
      }
      std::map<RowColumn, bool> found;  // -> whether it is right
      for (const auto& [host, keys] : by_host) {
        CELLAR_ASSIGN_OR_RETURN(
            auto rows,
            SelectKeys(host, "SELECT " + columns_ + " FROM " + EntryTable(host) + " WHERE ", keys));
        for (const SqlRow& r : rows) {
          auto it = expected.find({r.Bytes(0), r.Bytes(1)});
          if (it == expected.end() || r.Uint(3 + fields_.size()) != it->second.target_shard)
            continue;
          found[it->first] = r.Int(2) == it->second.ref_key && SameValues(r, it->second);
        }
      }
      for (const auto& [key, entry] : expected) {
        auto f = found.find(key);
        if (f != found.end() && f->second) continue;
        if (f == found.end()) {
          ++report_->missing;
          Note("missing", key.first, key.second);
        } else {
          ++report_->stale;
          Note("stale", key.first, key.second);
        }
        CELLAR_RETURN_IF_ERROR(Repair(key, std::nullopt));
      }
    }
  }
  return Status::Ok();
}

Status IndexChecker::CheckEntries() {
  std::vector<std::vector<uint32_t>> owned_by(cfg_.mysql.hosts.size());
  for (uint32_t s = 0; s < cfg_.shards; ++s) owned_by[store_->HostOfShard(s)].push_back(s);
  for (size_t h = 0; h < cfg_.mysql.hosts.size(); ++h) {
    const std::string table = EntryTable(h);
    std::string owned;
    for (uint32_t s : owned_by[h]) owned += (owned.empty() ? "" : ",") + std::to_string(s);
    // The owned shards one by one (a key range each), then every other
    // shard's rows (left by a shard move; no query reads them: all extra).
    std::vector<std::optional<uint32_t>> ranges(owned_by[h].begin(), owned_by[h].end());
    ranges.push_back(std::nullopt);
    for (const std::optional<uint32_t>& shard : ranges) {
      int64_t after_shard = -1;
      std::string after_row, after_column;
      while (true) {
        std::string sql = "SELECT " + columns_ + " FROM " + table + " WHERE ";
        std::vector<SqlParam> params;
        if (shard) {
          sql += "shard = ? AND (row_key > ? OR (row_key = ? AND column_key > ?))";
          params = {int64_t{*shard}, after_row, after_row, after_column};
        } else {
          sql += "shard NOT IN (" + (owned.empty() ? std::string("-1") : owned) +
                 ") AND (shard > ? OR (shard = ? AND (row_key > ? OR (row_key = ? AND"
                 " column_key > ?))))";
          params = {after_shard, after_shard, after_row, after_row, after_column};
        }
        sql += " ORDER BY shard, row_key, column_key LIMIT " + std::to_string(options_.page);
        std::vector<SqlRow> rows;
        {
          CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(h).Acquire());
          CELLAR_ASSIGN_OR_RETURN(rows, lease->Query(sql, params));
        }
        if (rows.empty()) break;
        const size_t shard_col = 3 + fields_.size();
        after_shard = static_cast<int64_t>(rows.back().Uint(shard_col));
        after_row = rows.back().Bytes(0);
        after_column = rows.back().Bytes(1);
        if (options_.after_page_read) options_.after_page_read();
        report_->present += rows.size();
        // Where each entry's row points, read on the rows' hosts.
        std::map<size_t, std::vector<std::tuple<uint32_t, std::string, std::string>>> by_host;
        for (const SqlRow& r : rows) {
          const uint32_t src = ShardForRow(Uuid::FromBytes(r.Bytes(0)), cfg_.shards);
          by_host[store_->HostOfShard(src)].emplace_back(src, r.Bytes(0), r.Bytes(1));
        }
        std::map<RowColumn, std::optional<uint32_t>> points_at;
        for (const auto& [host, keys] : by_host) {
          CELLAR_ASSIGN_OR_RETURN(auto pointers,
                                  SelectKeys(host,
                                             "SELECT row_key, column_key, target_shard FROM " +
                                                 PointerTable(host) + " WHERE ",
                                             keys));
          for (const SqlRow& p : pointers)
            points_at[{p.Bytes(0), p.Bytes(1)}] =
                p.IsNull(2) ? std::nullopt : std::optional<uint32_t>(p.Uint(2));
        }
        const int64_t now = NowMicros();
        for (const SqlRow& r : rows) {
          const uint32_t at = static_cast<uint32_t>(r.Uint(shard_col));
          const RowColumn key{r.Bytes(0), r.Bytes(1)};
          // An entry of a version past its column's TTL is extra even where
          // its pointer points (purge removes it with the cell).
          const ColumnConfig* col = cfg_.FindDatastore(def_.datastore)->FindColumn(key.second);
          const bool expired =
              col && col->ttl_ms > 0 && r.Int(shard_col + 1) < now - col->ttl_ms * 1000;
          auto p = points_at.find(key);
          if (shard && !expired && p != points_at.end() && p->second == at) continue;
          ++report_->extra;
          Note("extra", key.first, key.second);
          if (shard) {
            CELLAR_RETURN_IF_ERROR(Repair(key, at));
          } else if (options_.repair) {
            // On a host that does not own the shard: no writer puts entries
            // there, so it goes without a lock.
            CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(h).Acquire());
            CELLAR_RETURN_IF_ERROR(
                lease
                    ->Execute("DELETE FROM " + table +
                                  " WHERE shard = ? AND row_key = ? AND column_key = ? AND "
                                  "ref_key = ?",
                              {int64_t{at}, key.first, key.second, r.Int(2)})
                    .status());
            ++report_->repaired;
          }
        }
      }
    }
  }
  return Status::Ok();
}

Status IndexChecker::RepairRow(const RowColumn& key, std::optional<uint32_t> stray) {
  const auto& [row_bytes, column] = key;
  const Uuid row = Uuid::FromBytes(row_bytes);
  const uint32_t src = ShardForRow(row, cfg_.shards);
  const size_t src_host = store_->HostOfShard(src);
  const std::string pointer = PointerTable(src_host);
  CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(src_host).Acquire());
  MysqlConnection& c = *lease;
  CELLAR_RETURN_IF_ERROR(c.Begin());
  auto fail = [&](Status s) {
    c.Rollback();
    return s;
  };
  // Lock the pointer as a writer does (created if missing: ref_key -1, no entry).
  if (auto s =
          c.Execute("INSERT INTO " + pointer +
                        " (shard, row_key, column_key, ref_key, target_shard)"
                        " VALUES (?, ?, ?, -1, NULL) ON DUPLICATE KEY UPDATE ref_key = ref_key",
                    {int64_t{src}, row_bytes, column});
      !s.ok())
    return fail(s.status());
  auto ptr = c.Query("SELECT ref_key, target_shard FROM " + pointer +
                         " WHERE shard = ? AND row_key = ? AND column_key = ? FOR UPDATE",
                     {int64_t{src}, row_bytes, column});
  if (!ptr.ok()) return fail(ptr.status());
  if (ptr->empty()) return fail(Internal("index pointer vanished under its lock"));
  const int64_t applied = (*ptr)[0].Int(0);
  const std::optional<uint32_t> pointed =
      (*ptr)[0].IsNull(1) ? std::nullopt : std::optional<uint32_t>((*ptr)[0].Uint(1));
  // The latest version, read once the lock is held: any version committed
  // later is applied after this transaction.
  VersionQuery newest;
  newest.limit = 1;
  auto latest = store_->Versions(def_.datastore, row, column, newest);
  if (!latest.ok()) return fail(latest.status());
  std::optional<IndexEntry> want;
  int64_t ref = applied;
  if (!latest->empty() && latest->front().ref_key >= applied) {
    want = Expected(latest->front());
    ref = latest->front().ref_key;
  }
  const std::optional<uint32_t> target =
      want ? std::optional<uint32_t>(want->target_shard) : std::nullopt;
  // Entries on another host than the row's are written autocommitted while
  // the lock is held (as the writer does); on the row's host, in its
  // transaction.
  auto on_shard = [&](uint32_t shard, const std::string& sql,
                      const std::vector<SqlParam>& params) -> Status {
    const size_t host = store_->HostOfShard(shard);
    if (host == src_host) return c.Execute(sql, params).status();
    CELLAR_ASSIGN_OR_RETURN(auto other, store_->PoolForHost(host).Acquire());
    return other->Execute(sql, params).status();
  };
  auto erase = [&](uint32_t shard) {
    return on_shard(shard,
                    "DELETE FROM " + EntryTable(store_->HostOfShard(shard)) +
                        " WHERE shard = ? AND row_key = ? AND column_key = ?",
                    {int64_t{shard}, row_bytes, column});
  };
  for (std::optional<uint32_t> old : {pointed, stray})
    if (old && old != target)
      if (Status s = erase(*old); !s.ok()) return fail(s);
  if (want) {
    if (Status s = erase(*target); !s.ok()) return fail(s);
    const IndexColumnDef& cd = *def_.FindColumnDef(column);
    std::string cols = "shard, row_key, column_key, ref_key, added_id, source_shard, created_at";
    std::string marks = "?, ?, ?, ?, ?, ?, ?";
    for (const auto& f : cd.fields) {
      cols += ", " + f.sql_column;
      marks += ", ?";
    }
    std::vector<SqlParam> params{
        int64_t{*target},          row_bytes, column, want->ref_key, want->added_id, int64_t{src},
        latest->front().created_at};
    params.insert(params.end(), want->values.begin(), want->values.end());
    if (Status s = on_shard(*target,
                            "INSERT INTO " + EntryTable(store_->HostOfShard(*target)) + " (" +
                                cols + ") VALUES (" + marks + ")",
                            params);
        !s.ok())
      return fail(s);
  }
  std::vector<SqlParam> update{ref};
  update.push_back(target ? SqlParam(int64_t{*target}) : SqlParam(nullptr));
  update.insert(update.end(), {int64_t{src}, row_bytes, column});
  if (auto s = c.Execute("UPDATE " + pointer +
                             " SET ref_key = ?, target_shard = ?"
                             " WHERE shard = ? AND row_key = ? AND column_key = ?",
                         update);
      !s.ok())
    return fail(s.status());
  return c.Commit();
}

}  // namespace

Result<IndexCheckReport> CheckIndex(CellStore* store, const IndexDefinition& current,
                                    const IndexCheckOptions& options) {
  if (options.page < 1 || options.page > 10000)
    return InvalidArgument("check page must be between 1 and 10000, got " +
                           std::to_string(options.page));
  IndexCatalog catalog(store);
  CELLAR_ASSIGN_OR_RETURN(IndexVersion v, catalog.Serving(current.table));
  // Compare with the definition the serving version was built from.
  CELLAR_ASSIGN_OR_RETURN(const IndexDefinition def, catalog.DefinitionOf(current, v));
  IndexCheckReport report;
  report.version = v.version;
  IndexChecker checker(store, def, v.version, options, &report);
  CELLAR_RETURN_IF_ERROR(checker.CheckCells());
  CELLAR_RETURN_IF_ERROR(checker.CheckEntries());
  checker.TakeExamples();
  if (report.repaired > 0)
    LogInfo("index", "check repaired entries",
            {{"index", def.table},
             {"version", std::to_string(v.version)},
             {"repaired", std::to_string(report.repaired)}});
  return report;
}

}  // namespace cellar
