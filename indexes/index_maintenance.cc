#include "indexes/index_maintenance.h"

#include <algorithm>
#include <chrono>
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

}  // namespace cellar
