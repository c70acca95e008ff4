// Phase B of `cellar-bench index` (see bench_index.cc): index-entry upserts/s.
//   1. group apply, as the index worker applies a backlog: --batch-cells new
//      trip cells split in the worker's lanes (host, shard mod lanes_per_host),
//      each lane's cells in batches of max_batch through IndexWriter::ApplyBatch,
//      one thread per lane (the worker runs one batch per lane at a time);
//   2. single apply: --apply-cells more through IndexWriter::Apply from
//      --apply-threads threads (one transaction per cell, for comparison);
//   3. the same cluster's put rate: blocking single puts from 32 callers, as
//      `cellar-bench put` measures it (issue 16: group apply >= 1.5x of it);
//   4. single-row autocommit upserts time what one redo-log flush costs.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_common.h"
#include "bench/bench_index_phases.h"
#include "bench/bench_put_store.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_writer.h"

namespace cellar::bench::index_phases {
namespace {

constexpr int kPutRateCallers = 32;  // as `cellar-bench put`

}  // namespace

int RunUpsertPhase(const IndexBenchRun& b, const std::vector<Uuid>& drivers, UpsertFigures* out) {
  const IndexBenchOptions& o = b.o;
  const ClusterConfig& cfg = b.cfg;
  CellStore* const store = b.store;
  const std::string& column = b.column;
  std::mt19937_64 rng(std::random_device{}());
  uint64_t added_id = 1;
  // New trips of `drivers`, with made-up log positions in order.
  auto TripCells = [&](int n) {
    std::vector<Cell> cells(static_cast<size_t>(n));
    for (auto& c : cells) {
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
    return cells;
  };
  IndexWriter writer(store, nullptr);
  std::mutex mu;
  std::string first_error;
  std::atomic<uint64_t> upserted{0}, apply_errors{0};
  auto count = [&](const Status& s, IndexApply outcome) {
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (apply_errors++ == 0) first_error = s.ToString();
    } else if (outcome == IndexApply::kUpserted) {
      upserted++;
    }
  };

  // 1. Group apply in the worker's lanes and batch size.
  const IndexWorkerOptions worker_defaults;
  const size_t lanes_per_host = static_cast<size_t>(std::max(1, worker_defaults.lanes_per_host));
  const size_t max_batch = static_cast<size_t>(std::max(1, worker_defaults.max_batch));
  std::vector<Cell> batch_cells = TripCells(o.batch_cells);
  std::map<std::pair<size_t, size_t>, std::vector<const Cell*>> lanes;
  for (const Cell& c : batch_cells)
    lanes[{cfg.HostIndexForShard(c.shard), c.shard % lanes_per_host}].push_back(&c);
  const std::vector<IndexVersionRef> versions = {IndexVersionRef{&b.query_def, b.query_version}};
  Progress("phase B: IndexWriter::ApplyBatch of " + std::to_string(batch_cells.size()) +
           " cells in " + std::to_string(lanes.size()) + " lanes, batches of " +
           std::to_string(max_batch));
  std::vector<double> batch_ms;
  Stopwatch batch_clock;
  {
    std::vector<std::jthread> pool;
    for (auto& [lane, cells] : lanes)
      pool.emplace_back([&, cells = &cells] {
        for (size_t start = 0; start < cells->size() && !StopRequested(); start += max_batch) {
          std::vector<const Cell*> batch(cells->begin() + static_cast<std::ptrdiff_t>(start),
                                         cells->begin() + static_cast<std::ptrdiff_t>(std::min(
                                                              cells->size(), start + max_batch)));
          Stopwatch one;
          auto r = writer.ApplyBatch(b.datastore, versions, batch, /*record_positions=*/true);
          const double ms = one.Millis();
          {
            std::lock_guard<std::mutex> lock(mu);
            batch_ms.push_back(ms);
          }
          if (!r.ok()) {
            count(r.status(), IndexApply::kSkipped);
            continue;
          }
          for (const auto& outcome : *r) count(Status::Ok(), outcome[0].outcome);
        }
      });
  }
  const double batch_s = batch_clock.Seconds();
  if (StopRequested()) return 130;
  const uint64_t batch_upserted = upserted.exchange(0);

  // 2. One cell per transaction.
  Progress("phase B: IndexWriter::Apply of " + std::to_string(o.apply_cells) + " cells from " +
           std::to_string(o.apply_threads) + " threads");
  std::vector<Cell> apply_cells = TripCells(o.apply_cells);
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
          count(r.status(), r.ok() ? r->outcome : IndexApply::kSkipped);
        }
      });
  }
  const double apply_s = apply_clock.Seconds();
  if (StopRequested()) return 130;
  const double single_upserts_per_s = upserted / apply_s;
  const double apply_p50 = Percentile(apply_ms, 50), apply_p99 = Percentile(apply_ms, 99);

  // 3. The same cluster's put rate.
  Progress("phase B: put rate, " + std::to_string(o.put_cells) + " single puts from " +
           std::to_string(kPutRateCallers) + " callers");
  std::mt19937_64 put_rng(std::random_device{}());
  uint64_t unused_json = 0, unused_encoded = 0;
  const std::vector<CellWrite> put_cells =
      MakeTripCells(o.put_cells, 1, column, 400, put_rng, &unused_json, &unused_encoded);
  const StorePhaseResult puts = RunPutPhase(*store, b.datastore, put_cells, kPutRateCallers);
  if (StopRequested()) return 130;
  const double put_rate = puts.seconds > 0 ? puts.rows / puts.seconds : 0;

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
  if (apply_errors)
    Progress("phase B: " + std::to_string(apply_errors.load()) +
             " applies failed, the first: " + first_error);
  out->batch_cells = batch_cells.size();
  out->lanes = lanes.size();
  out->max_batch = max_batch;
  out->batch_s = batch_s;
  out->upserts_per_s = batch_upserted / batch_s;
  out->batch_p50 = Percentile(batch_ms, 50);
  out->batch_p99 = Percentile(batch_ms, 99);
  out->put_rate = put_rate;
  out->put_errors = puts.errors;
  out->put_rate_ratio = put_rate > 0 ? out->upserts_per_s / put_rate : 0;
  out->cells = apply_cells.size();
  out->apply_errors = apply_errors.load() + puts.errors;
  out->apply_s = apply_s;
  out->single_upserts_per_s = single_upserts_per_s;
  out->apply_p50 = apply_p50;
  out->apply_p99 = apply_p99;
  out->flush_p50 = flush_p50;
  return 0;
}

}  // namespace cellar::bench::index_phases
