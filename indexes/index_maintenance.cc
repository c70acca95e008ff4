#include "indexes/index_maintenance.h"

#include <chrono>
#include <map>

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

}  // namespace

Status BackfillIndex(CellStore* store, const IndexDefinition& def,
                     const std::function<void(const BackfillProgress&)>& on_progress,
                     const std::atomic<bool>* stop) {
  IndexCatalog catalog(store);
  CELLAR_ASSIGN_OR_RETURN(auto writable, catalog.Writable(def.table));
  if (writable.empty()) return NotFound("index '" + def.table + "' has not been applied");
  const IndexVersion target = writable.back();
  const ClusterConfig& cfg = store->config();
  IndexWriter writer(store, nullptr);
  const std::string key = ProgressKey(def.table, target.version);

  // Where each shard stands, and the total to do.
  std::vector<uint64_t> after(cfg.shards, 0);
  std::vector<bool> finished(cfg.shards, false);
  BackfillProgress p;
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(s).Acquire());
    CELLAR_ASSIGN_OR_RETURN(
        auto rows, lease->Query("SELECT after_added_id, finished FROM " +
                                    QualifiedTable(cfg.ShardDatabase(s), "index_backfill") +
                                    " WHERE table_version = ?",
                                {key}));
    if (!rows.empty()) {
      after[s] = rows[0].Uint(0);
      finished[s] = rows[0].Int(1) != 0;
    }
    CELLAR_ASSIGN_OR_RETURN(uint64_t head, store->ShardHead(def.datastore, s));
    p.cells_total += std::max(head, after[s]);
    p.cells_done += after[s];
  }
  const uint64_t done_at_start = p.cells_done;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    while (!finished[s]) {
      if (stop && stop->load()) return Aborted("backfill interrupted; run it again to resume");
      CELLAR_ASSIGN_OR_RETURN(ShardLogPage page,
                              store->ShardLog(def.datastore, s, after[s], kPage));
      for (const Cell& c : page.cells) {
        if (!def.FindColumnDef(c.column)) continue;
        CELLAR_RETURN_IF_ERROR(writer.Apply(def, target.version, c).status());
      }
      const bool last = page.cells.size() < static_cast<size_t>(kPage);
      p.cells_done += page.next_after - after[s];
      after[s] = page.next_after;
      finished[s] = last;
      CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(s).Acquire());
      CELLAR_RETURN_IF_ERROR(
          lease
              ->Execute("INSERT INTO " + QualifiedTable(cfg.ShardDatabase(s), "index_backfill") +
                            " (table_version, after_added_id, finished) VALUES (?, ?, ?)"
                            " ON DUPLICATE KEY UPDATE after_added_id = GREATEST(after_added_id,"
                            " VALUES(after_added_id)), finished = VALUES(finished)",
                        {key, after[s], int64_t{last ? 1 : 0}})
              .status());
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      p.cells_per_s = secs > 0 ? (p.cells_done - done_at_start) / secs : 0;
      p.eta_s = p.cells_per_s > 0 && p.cells_total > p.cells_done
                    ? (p.cells_total - p.cells_done) / p.cells_per_s
                    : 0;
      if (on_progress) on_progress(p);
    }
  }
  if (target.state != IndexState::kReady)
    CELLAR_RETURN_IF_ERROR(catalog.MarkReady(def.table, target.version));
  LogInfo("index", "backfill complete",
          {{"index", def.table}, {"version", std::to_string(target.version)}});
  return Status::Ok();
}

Result<IndexCheckReport> CheckIndex(CellStore* store, const IndexDefinition& def, bool repair) {
  IndexCatalog catalog(store);
  CELLAR_ASSIGN_OR_RETURN(IndexVersion v, catalog.Serving(def.table));
  const ClusterConfig& cfg = store->config();
  IndexCheckReport report;
  report.version = v.version;

  // What the latest cells call for: (row bytes, column) -> latest cell.
  struct Expect {
    Cell latest;
    bool has_entry = false;
    uint32_t target = 0;
    bool seen = false;
  };
  std::map<std::pair<std::string, std::string>, Expect> expect;
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    uint64_t after = 0;
    while (true) {
      CELLAR_ASSIGN_OR_RETURN(ShardLogPage page, store->ShardLog(def.datastore, s, after, kPage));
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
    ++report.expected;
  }
  auto note = [&](const std::string& what, const std::string& row, const std::string& col) {
    if (report.examples.size() < 10)
      report.examples.push_back(what + " " + def.datastore + "/" + Uuid::FromBytes(row).ToString() +
                                "/" + col);
  };
  std::vector<const Cell*> reapply;
  for (uint32_t s = 0; s < cfg.shards; ++s) {
    const std::string table =
        QualifiedTable(cfg.ShardDatabase(s), EntryTableName(def.table, v.version));
    CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(s).Acquire());
    CELLAR_ASSIGN_OR_RETURN(auto rows,
                            lease->Query("SELECT row_key, column_key, ref_key FROM " + table));
    for (const auto& r : rows) {
      ++report.present;
      auto it = expect.find({r.Bytes(0), r.Bytes(1)});
      if (it == expect.end() || !it->second.has_entry || it->second.target != s) {
        ++report.extra;
        note("extra", r.Bytes(0), r.Bytes(1));
        if (repair) {
          CELLAR_RETURN_IF_ERROR(
              lease
                  ->Execute("DELETE FROM " + table +
                                " WHERE row_key = ? AND column_key = ? AND ref_key = ?",
                            {r.Bytes(0), r.Bytes(1), r.Int(2)})
                  .status());
          ++report.repaired;
        }
        continue;
      }
      it->second.seen = true;
      if (r.Int(2) != it->second.latest.ref_key) {
        ++report.stale;
        note("stale", r.Bytes(0), r.Bytes(1));
        reapply.push_back(&it->second.latest);
      }
    }
  }
  for (auto& [k, e] : expect)
    if (e.has_entry && !e.seen) {
      ++report.missing;
      note("missing", k.first, k.second);
      reapply.push_back(&e.latest);
    }
  if (repair) {
    IndexWriter writer(store, nullptr);
    for (const Cell* c : reapply) {
      // Forget what the pointer says was applied, so the latest cell is applied again.
      const uint32_t src = ShardForRow(c->row_key, cfg.shards);
      CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForShard(src).Acquire());
      CELLAR_RETURN_IF_ERROR(
          lease
              ->Execute("UPDATE " +
                            QualifiedTable(cfg.ShardDatabase(src),
                                           PointerTableName(def.table, v.version)) +
                            " SET ref_key = -1 WHERE row_key = ? AND column_key = ?",
                        {c->row_key.ToBytes(), c->column})
              .status());
      CELLAR_RETURN_IF_ERROR(writer.Apply(def, v.version, *c).status());
      ++report.repaired;
    }
  }
  return report;
}

}  // namespace cellar
