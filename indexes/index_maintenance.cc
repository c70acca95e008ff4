#include "indexes/index_maintenance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <thread>

#include "base/log.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_catalog.h"
#include "indexes/index_entry.h"
#include "indexes/index_writer.h"

namespace cellar {
namespace {

constexpr int kPage = 1000;

std::string ProgressKey(const std::string& table, int version) {
  return EntryTableName(table, version);
}

// IndexWriter::ApplyBatch of `cells` (one shard's, in log order), retried
// while it reports Aborted (a deadlock or lock wait timeout with a concurrent
// writer of a row, e.g. the live worker): nothing of the batch's own host was
// committed, and what other hosts got is rewritten the same, so trying again
// is safe.
Status ApplyWithRetry(IndexWriter& writer, const IndexDefinition& def, int version,
                      const std::vector<const Cell*>& cells) {
  if (cells.empty()) return Status::Ok();
  for (int attempt = 0;; ++attempt) {
    auto r = writer.ApplyBatch(def.datastore, {IndexVersionRef{&def, version}}, cells,
                               /*record_positions=*/false);
    if (r.ok() || r.status().code() != StatusCode::kAborted || attempt >= 20) return r.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(5 << std::min(attempt, 6)));
  }
}

// The next page of `shard`'s log after `after` (up to kPage cells); empty only
// when the log is exhausted. ShardLog also answers an empty page while a
// writer of the shard's host stays open past its wait (committed cells after
// `after` are not final yet): then this waits and reads again, so a caller
// that stops at an empty page skips no committed cell. Aborted on `stop`.
Result<ShardLogPage> NextShardPage(CellStore* store, const std::string& datastore, uint32_t shard,
                                   uint64_t after, const std::atomic<bool>* stop) {
  while (true) {
    CELLAR_ASSIGN_OR_RETURN(ShardLogPage page, store->ShardLog(datastore, shard, after, kPage));
    if (!page.cells.empty()) return page;
    CELLAR_ASSIGN_OR_RETURN(uint64_t head, store->ShardHead(datastore, shard));
    if (head <= after) return page;
    if (stop && stop->load()) return Aborted("backfill interrupted; run it again to resume");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

Status BackfillIndex(CellStore* store, const IndexDefinition& def,
                     const std::function<void(const BackfillProgress&)>& on_progress,
                     const std::atomic<bool>* stop) {
  // On a cluster still in the per-shard layout the shard logs look empty.
  if (Status layout = store->CheckLayout(); layout.code() == StatusCode::kFailedPrecondition)
    return layout;
  IndexCatalog catalog(store);
  CELLAR_ASSIGN_OR_RETURN(auto writable, catalog.Writable(def.table));
  if (writable.empty()) return NotFound("index '" + def.table + "' has not been applied");
  const IndexVersion target = writable.back();
  // Build the version with the definition it was created from (`def` may be
  // an older or newer YAML than the one applied last).
  CELLAR_ASSIGN_OR_RETURN(const IndexDefinition vdef, catalog.DefinitionOf(def, target));
  const ClusterConfig& cfg = store->config();
  IndexWriter writer(store, nullptr);
  const std::string key = ProgressKey(def.table, target.version);
  const auto started = std::chrono::steady_clock::now();

  // Where each shard stands, and the total to do. Positions are added_ids of
  // the shard's host log (other shards' cells interleave), so the work done
  // is counted in cells read, and the total is the hosts' log heads.
  std::vector<uint64_t> after(cfg.shards, 0);
  std::vector<uint64_t> done(cfg.shards, 0);
  std::vector<bool> finished(cfg.shards, false);
  BackfillProgress p;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForHost(h).Acquire());
    CELLAR_ASSIGN_OR_RETURN(
        auto rows,
        lease->Query("SELECT shard, after_added_id, cells_done, finished FROM " +
                         QualifiedTable(cfg.HostDatabase(cfg.mysql.hosts[h]), "index_backfill") +
                         " WHERE table_version = ?",
                     {key}));
    for (const auto& r : rows) {
      const uint64_t s = r.Uint(0);
      // Progress of a shard that has moved to another host counts positions
      // of the old host's log: that shard starts over.
      if (s >= cfg.shards || store->HostOfShard(static_cast<uint32_t>(s)) != h) continue;
      after[s] = r.Uint(1);
      done[s] = r.Uint(2);
      finished[s] = r.Int(3) != 0;
      p.cells_done += done[s];
    }
    CELLAR_ASSIGN_OR_RETURN(uint64_t head, store->HostHead(vdef.datastore, h));
    p.cells_total += head;
  }
  p.cells_total = std::max(p.cells_total, p.cells_done);
  const uint64_t done_at_start = p.cells_done;
  const auto t0 = std::chrono::steady_clock::now();
  // Applies the next page of shard `s`; *last when the shard log is exhausted.
  auto page_of = [&](uint32_t s, bool* last) -> Status {
    CELLAR_ASSIGN_OR_RETURN(ShardLogPage page,
                            NextShardPage(store, vdef.datastore, s, after[s], stop));
    std::vector<const Cell*> indexed;
    for (const Cell& c : page.cells)
      if (vdef.FindColumnDef(c.column)) indexed.push_back(&c);
    CELLAR_RETURN_IF_ERROR(ApplyWithRetry(writer, vdef, target.version, indexed));
    *last = page.cells.size() < static_cast<size_t>(kPage);
    p.cells_done += page.cells.size();
    p.cells_total = std::max(p.cells_total, p.cells_done);  // cells written meanwhile
    done[s] += page.cells.size();
    after[s] = page.next_after;
    finished[s] = *last;
    CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(s).Acquire());
    CELLAR_RETURN_IF_ERROR(
        lease
            ->Execute("INSERT INTO " + QualifiedTable(store->DatabaseOfShard(s), "index_backfill") +
                          " (table_version, shard, after_added_id, cells_done, finished)"
                          " VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE"
                          " after_added_id = GREATEST(after_added_id, VALUES(after_added_id)),"
                          " cells_done = GREATEST(cells_done, VALUES(cells_done)),"
                          " finished = VALUES(finished)",
                      {key, int64_t{s}, after[s], done[s], int64_t{*last ? 1 : 0}})
            .status());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    p.cells_per_s = secs > 0 ? (p.cells_done - done_at_start) / secs : 0;
    p.eta_s = p.cells_per_s > 0 && p.cells_total > p.cells_done
                  ? (p.cells_total - p.cells_done) / p.cells_per_s
                  : 0;
    if (on_progress) on_progress(p);
    return Status::Ok();
  };
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    while (!finished[s]) {
      if (stop && stop->load()) return Aborted("backfill interrupted; run it again to resume");
      bool last = false;
      CELLAR_RETURN_IF_ERROR(page_of(s, &last));
    }
  }
  // Catch-up. A live worker may use a list of writable versions read up to
  // kWritableVersionsCacheMs before `target` was applied; it does not write
  // `target` for events it handles meanwhile, and the pass above may have read
  // those cells' shard before they committed. This run started after the
  // apply, so once that long has passed here every later event reaches
  // `target` through the worker: read every shard's log once more from where
  // it ended.
  const bool recent = NowMicros() - target.created_at < 60'000'000;  // else long settled
  const auto settled = started + std::chrono::milliseconds(kWritableVersionsCacheMs + 500);
  while (recent && std::chrono::steady_clock::now() < settled) {
    if (stop && stop->load()) return Aborted("backfill interrupted; run it again to resume");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    for (bool last = false; !last;) {
      if (stop && stop->load()) return Aborted("backfill interrupted; run it again to resume");
      CELLAR_RETURN_IF_ERROR(page_of(s, &last));
    }
  }
  if (target.state != IndexState::kReady)
    CELLAR_RETURN_IF_ERROR(catalog.MarkReady(def.table, target.version));
  LogInfo("index", "backfill complete",
          {{"index", def.table}, {"version", std::to_string(target.version)}});
  return Status::Ok();
}

Result<IndexCheckReport> CheckIndex(CellStore* store, const IndexDefinition& current, bool repair) {
  IndexCatalog catalog(store);
  CELLAR_ASSIGN_OR_RETURN(IndexVersion v, catalog.Serving(current.table));
  // Compare with the definition the serving version was built from.
  CELLAR_ASSIGN_OR_RETURN(const IndexDefinition def, catalog.DefinitionOf(current, v));
  const ClusterConfig& cfg = store->config();
  IndexCheckReport report;
  report.version = v.version;

  // What the latest cells call for: (row bytes, column) -> latest cell.
  struct Expect {
    Cell latest;
    bool has_entry = false;
    uint32_t target = 0;
    std::vector<SqlParam> values;  // parallel to the column_def's fields
    bool seen = false;
  };
  std::map<std::pair<std::string, std::string>, Expect> expect;
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    uint64_t after = 0;
    while (true) {
      CELLAR_ASSIGN_OR_RETURN(ShardLogPage page,
                              NextShardPage(store, def.datastore, s, after, nullptr));
      for (Cell& c : page.cells) {
        const IndexColumnDef* cd = def.FindColumnDef(c.column);
        if (!cd) continue;
        auto& e = expect[{c.row_key.ToBytes(), c.column}];
        if (e.latest.added_id != 0 && e.latest.ref_key > c.ref_key) continue;
        e.latest = std::move(c);
      }
      if (page.cells.empty()) break;
      after = page.next_after;
    }
  }
  const int64_t now = NowMicros();
  for (auto& [k, e] : expect) {
    const ColumnConfig* col = cfg.FindDatastore(def.datastore)->FindColumn(e.latest.column);
    const bool expired = col && col->ttl_ms > 0 && e.latest.created_at < now - col->ttl_ms * 1000;
    if (e.latest.tombstone || expired) continue;
    auto entry = ExtractEntry(def, *def.FindColumnDef(e.latest.column), e.latest, cfg.shards);
    if (!entry.ok()) continue;
    e.has_entry = true;
    e.target = entry->target_shard;
    e.values = std::move(entry->values);
    ++report.expected;
  }
  auto note = [&](const std::string& what, const std::string& row, const std::string& col) {
    if (report.examples.size() < 10)
      report.examples.push_back(what + " " + def.datastore + "/" + Uuid::FromBytes(row).ToString() +
                                "/" + col);
  };
  // Whether the stored field columns (from column 3 on, in AllFields order)
  // hold what the latest cell says: its column_def's fields, NULL elsewhere.
  const auto all = def.AllFields();
  auto same_values = [&](const SqlRow& r, const Expect& e) {
    const IndexColumnDef& cd = *def.FindColumnDef(e.latest.column);
    for (size_t i = 0; i < all.size(); ++i) {
      const size_t col = 3 + i;
      const SqlParam* want = nullptr;
      for (size_t k = 0; k < cd.fields.size(); ++k)
        if (cd.fields[k].path == all[i].path) want = &e.values[k];
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
  };
  // The entry's shard comes last, after the fields.
  std::string columns = "row_key, column_key, ref_key";
  for (const auto& f : all) columns += ", " + f.sql_column;
  columns += ", shard";
  const size_t shard_col = 3 + all.size();
  struct Reapply {
    const Cell* cell;
    std::optional<uint32_t> clear_shard;  // a wrong entry to delete first
  };
  std::vector<Reapply> reapply;
  // Compares entries read from a host's table with the expectation. `foreign`:
  // rows of shards the host does not own (no query reads them): all extra.
  auto compare = [&](MysqlConnection& conn, const std::string& table,
                     const std::vector<SqlRow>& rows, bool foreign) -> Status {
    for (const auto& r : rows) {
      ++report.present;
      const uint64_t s = r.Uint(shard_col);
      auto it = expect.find({r.Bytes(0), r.Bytes(1)});
      if (foreign || it == expect.end() || !it->second.has_entry || it->second.target != s) {
        ++report.extra;
        note("extra", r.Bytes(0), r.Bytes(1));
        if (repair) {
          CELLAR_RETURN_IF_ERROR(
              conn.Execute(
                      "DELETE FROM " + table +
                          " WHERE shard = ? AND row_key = ? AND column_key = ? AND ref_key = ?",
                      {s, r.Bytes(0), r.Bytes(1), r.Int(2)})
                  .status());
          ++report.repaired;
        }
        continue;
      }
      it->second.seen = true;
      // Stale: an older (or, corrupted, newer) ref_key, or values that are not
      // the latest cell's.
      if (r.Int(2) != it->second.latest.ref_key || !same_values(r, it->second)) {
        ++report.stale;
        note("stale", r.Bytes(0), r.Bytes(1));
        reapply.push_back({&it->second.latest, static_cast<uint32_t>(s)});
      }
    }
    return Status::Ok();
  };
  // The shards each host owns now (moves included).
  std::vector<std::vector<uint32_t>> owned_by(cfg.mysql.hosts.size());
  for (uint32_t s = 0; s < cfg.shards; ++s) owned_by[store->HostOfShard(s)].push_back(s);
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    const MysqlHostConfig& host = cfg.mysql.hosts[h];
    const std::string table =
        QualifiedTable(cfg.HostDatabase(host), EntryTableName(def.table, v.version));
    CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForHost(h).Acquire());
    // One owned shard at a time (a key range each), then any other shard's rows.
    for (uint32_t s : owned_by[h]) {
      CELLAR_ASSIGN_OR_RETURN(
          auto rows,
          lease->Query("SELECT " + columns + " FROM " + table + " WHERE shard = ?", {int64_t{s}}));
      CELLAR_RETURN_IF_ERROR(compare(*lease, table, rows, false));
    }
    std::string owned;
    for (uint32_t s : owned_by[h]) owned += (owned.empty() ? "" : ",") + std::to_string(s);
    CELLAR_ASSIGN_OR_RETURN(
        auto foreign,
        lease->Query("SELECT " + columns + " FROM " + table + " WHERE shard NOT IN (" +
                     (owned.empty() ? std::string("-1") : owned) + ")"));
    CELLAR_RETURN_IF_ERROR(compare(*lease, table, foreign, true));
  }
  for (auto& [k, e] : expect)
    if (e.has_entry && !e.seen) {
      ++report.missing;
      note("missing", k.first, k.second);
      reapply.push_back({&e.latest, std::nullopt});
    }
  if (repair) {
    IndexWriter writer(store, nullptr);
    for (const auto& [c, clear_shard] : reapply) {
      // A stale entry goes first: the writer never replaces an entry whose
      // ref_key is not older than the cell's (a corrupted one may be newer).
      if (clear_shard) {
        CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(*clear_shard).Acquire());
        CELLAR_RETURN_IF_ERROR(
            lease
                ->Execute("DELETE FROM " +
                              QualifiedTable(store->DatabaseOfShard(*clear_shard),
                                             EntryTableName(def.table, v.version)) +
                              " WHERE shard = ? AND row_key = ? AND column_key = ?",
                          {int64_t{*clear_shard}, c->row_key.ToBytes(), c->column})
                .status());
      }
      // Forget what the pointer says was applied, so the latest cell is applied again.
      const uint32_t src = ShardForRow(c->row_key, cfg.shards);
      CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(src).Acquire());
      CELLAR_RETURN_IF_ERROR(
          lease
              ->Execute("UPDATE " +
                            QualifiedTable(store->DatabaseOfShard(src),
                                           PointerTableName(def.table, v.version)) +
                            " SET ref_key = -1 WHERE shard = ? AND row_key = ? AND column_key = ?",
                        {int64_t{src}, c->row_key.ToBytes(), c->column})
              .status());
      CELLAR_RETURN_IF_ERROR(ApplyWithRetry(writer, def, v.version, {c}));
      ++report.repaired;
    }
  }
  return report;
}

}  // namespace cellar
