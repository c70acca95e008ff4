// Phase B of `cellar-bench index` (see bench_index.cc): index-entry upserts/s.
// New trip cells are applied with IndexWriter::Apply from --apply-threads
// threads (the worker's pool size), then single-row autocommit upserts time
// what one redo-log flush costs on this server.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_common.h"
#include "bench/bench_index_phases.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_writer.h"

namespace cellar::bench::index_phases {

int RunUpsertPhase(const IndexBenchRun& b, const std::vector<Uuid>& drivers, UpsertFigures* out) {
  const IndexBenchOptions& o = b.o;
  const ClusterConfig& cfg = b.cfg;
  CellStore* const store = b.store;
  const std::string& column = b.column;
  Progress("phase B: IndexWriter::Apply of " + std::to_string(o.apply_cells) + " cells from " +
           std::to_string(o.apply_threads) + " threads");
  std::vector<Cell> apply_cells(static_cast<size_t>(o.apply_cells));
  {
    std::mt19937_64 rng(std::random_device{}());
    uint64_t added_id = 1;
    for (auto& c : apply_cells) {
      c.row_key = Uuid::Random();
      c.column = column;
      c.ref_key = 0;
      c.created_at = NowMicros();
      c.body = TripBody(drivers[rng() % drivers.size()], kCities[rng() % std::size(kCities)],
                        c.created_at - static_cast<int64_t>(rng() % (30 * kDayMicros)),
                        Round(5 + static_cast<double>(rng() % 10000) / 100.0, 2));
      c.shard = ShardForRow(c.row_key, cfg.shards);
      c.added_id = added_id++;
    }
  }
  IndexWriter writer(store, nullptr);
  std::mutex mu;
  std::string first_error;
  std::atomic<uint64_t> upserted{0}, apply_errors{0};
  std::atomic<size_t> next_apply{0};
  std::vector<double> apply_ms(apply_cells.size(), 0);
  Stopwatch apply_clock;
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < o.apply_threads; ++t)
      pool.emplace_back([&] {
        while (!StopRequested()) {
          const size_t i = next_apply.fetch_add(1);
          if (i >= apply_cells.size()) break;
          Stopwatch one;
          auto r = writer.Apply(b.query_def, b.query_version, apply_cells[i]);
          apply_ms[i] = one.Millis();
          if (!r.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            if (apply_errors++ == 0) first_error = r.status().ToString();
          } else if (r->outcome == IndexApply::kUpserted) {
            upserted++;
          }
        }
      });
  }
  const double apply_s = apply_clock.Seconds();
  if (StopRequested()) return 130;
  const double upserts_per_s = upserted / apply_s;
  const double apply_p50 = Percentile(apply_ms, 50), apply_p99 = Percentile(apply_ms, 99);
  // What one redo-log flush costs here: single-row autocommit upserts into a
  // scratch table (an Apply commits twice: the entry upsert and the pointer
  // transaction).
  std::vector<double> flush_ms;
  {
    auto lease = store->PoolForShard(0).Acquire();
    if (lease.ok()) {
      const std::string scratch =
          QualifiedTable(cfg.DatabaseForShard(0), "bench_flush_probe_" + b.run);
      if ((*lease)
              ->ExecuteDdl("CREATE TABLE IF NOT EXISTS " + scratch +
                           " (id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB")
              .ok()) {
        for (int i = 0; i < 50 && !StopRequested(); ++i) {
          Stopwatch one;
          if ((*lease)
                  ->Execute("INSERT INTO " + scratch +
                                " (id, n) VALUES (1, ?) ON DUPLICATE KEY UPDATE n = VALUES(n)",
                            {int64_t{i}})
                  .ok())
            flush_ms.push_back(one.Millis());
        }
        (*lease)->ExecuteDdl("DROP TABLE IF EXISTS " + scratch).IgnoreError();
      }
    }
  }
  const double flush_p50 = Percentile(flush_ms, 50);
  out->cells = apply_cells.size();
  out->apply_errors = apply_errors.load();
  out->apply_s = apply_s;
  out->upserts_per_s = upserts_per_s;
  out->apply_p50 = apply_p50;
  out->apply_p99 = apply_p99;
  out->flush_p50 = flush_p50;
  return 0;
}

}  // namespace cellar::bench::index_phases
