// `cellar-bench index`: write-commit to query-visible lag, index-entry upserts/s
// and query latency on an index of 1M entries.
//
// Kafka: with a private MariaDB the benchmark also starts a private local
// broker (librdkafka's in-memory mock cluster reached over TCP) and creates
// the change-log topics first; with --config it uses kafka.brokers and runs
// its own relay and index worker: stop the cluster's relays and index workers
// first (they would share shards and the consumer group).
//
// Two indexes over the first datastore's first column, both sharded on
// driver_uuid (fields driver_uuid UUID, city string, requested_at datetime,
// fare.total float):
//   bench_driver_index  maintained by an in-process IndexWorker (phase A);
//   bench_query_index   written directly (phases B and C), not by the worker.
//
// Phase A (lag): relay + IndexWorker running, a paced writer puts one trip
// per call at --rate writes/s for --seconds (call k starts at start + k/rate
// on --paced-threads threads; every trip has a new driver). Every
// --sample-every'th put is handed to one of --pollers threads, which query
// IndexReader::Query (by that driver, city = the trip's city) for each of
// their pending samples once per round, every --poll-ms, until the row is
// returned. Polling never holds up the writer. Two lags per sample, same
// machine wall clock:
//   - commit-ack to visible: time visible minus the time the writer's
//     CellStore::Put returned OK (the commit acknowledged). Target (issue 5,
//     checked against this p99): p99 < 50 ms. A sample is handed to a poller
//     only after its put returned, so an entry visible before that is seen
//     on the first query (counted) and never shows as a lag <= 0.
//   - txn-start (created_at) to visible: time visible minus the cell's
//     created_at. The store takes created_at when the group-commit
//     transaction STARTS (cells/internal/batch_transaction.cc), before the
//     commit-order locks, the INSERTs and the COMMIT's fsync, so this figure
//     also holds the write transaction's own duration (tens of ms under
//     load). Kept for comparison with earlier runs (JSON p50_ms / p99_ms;
//     p99_ok still refers to it).
// The worker's own commit-to-entry-written histogram (cellar_index_lag_seconds,
// phase A's writes; measured from created_at) is shown too; it answers quantiles as
// bucket upper bounds. A bare ungrouped ChangeLogConsumer reads the same cells
// meanwhile and measures both figures at arrival: the relay + Kafka part of
// the lag.
//
// Phase B (upserts/s, bench_index_upserts.cc): --batch-cells new trip cells
// applied as the index worker applies a backlog (IndexWriter::ApplyBatch in
// its lanes and batch size: upserts_per_s), then --apply-cells more one per
// transaction with IndexWriter::Apply from --apply-threads threads
// (single_apply_upserts_per_s), then the same cluster's put rate (blocking
// single puts from 32 callers): put_rate_ratio = upserts_per_s / put_rate.
//
// Phase C (queries): the entry tables of bench_query_index are emptied and
// bulk-loaded DIRECTLY with multi-row INSERTs (--entries rows over --drivers
// drivers, each row on its driver's shard, columns as IndexCatalog::Apply
// creates them) - building 1M entries through the change log is too slow for
// a benchmark run; the private server's buffer pool and redo log are raised
// first (1 GB / 512 MB; its defaults are 128 MB / 64 MB). Then --queries
// queries by driver with a city filter and a --query-days time range
// (limit 100), each run twice, alternately first:
// through IndexReader::Query, and as the same SQL text through a raw
// MysqlConnection (baseline). ratio = baseline p50 / IndexReader p50.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/uuid.h"
#include "bench/bench_broker.h"
#include "bench/bench_common.h"
#include "bench/bench_index_phases.h"
#include "bench/bench_load.h"
#include "cells/cell_store.h"
#include "changelog/relay.h"
#include "config/number_options.h"
#include "indexes/index_catalog.h"
#include "indexes/index_query.h"

namespace cellar::bench {
namespace {

using namespace index_phases;  // NOLINT: this benchmark's own phases

int RunIndexBench(const IndexBenchOptions& o) {
  if (!std::getenv("CELLAR_LOG_LEVEL")) SetLogLevel(LogLevel::kWarn);
  auto opened = OpenPipelineCluster(o.cluster, o.partitions);
  if (!opened.ok()) {
    Progress(opened.status().ToString());
    return 2;
  }
  BenchCluster cluster = std::move(opened->cluster);
  std::unique_ptr<BenchBroker> broker = std::move(opened->broker);
  const ClusterConfig& cfg = cluster.config;
  const std::string datastore = cfg.datastores[0].name;
  const std::string column = cfg.datastores[0].columns[0].name;
  auto live_def = Definition(cfg, kLiveIndex);
  auto query_def = Definition(cfg, kQueryIndex);
  if (!live_def.ok() || !query_def.ok()) {
    Progress("index definition: " +
             (!live_def.ok() ? live_def.status() : query_def.status()).ToString());
    return 2;
  }

  std::unique_ptr<CellStore> store = CellStore::Open(cfg);
  Progress("creating host databases and tables (" + std::to_string(cfg.mysql.hosts.size()) +
           " hosts, " + std::to_string(cfg.shards) + " shards)");
  if (Status s = store->Init(); !s.ok()) {
    Progress("init failed: " + s.ToString());
    return 1;
  }
  for (const auto& st : ReadRelayStatus(*store))
    if (st.owned) {
      Progress("the log of host " + st.host + " (" + st.datastore +
               ") is owned by a running relay: stop the cluster's relays first");
      return 2;
    }
  Progress("applying the indexes " + std::string(kLiveIndex) + " and " + kQueryIndex);
  IndexCatalog catalog(store.get());
  auto live_applied = catalog.Apply(*live_def);
  auto query_applied = catalog.Apply(*query_def);
  if (!live_applied.ok() || !query_applied.ok()) {
    Progress("index apply failed: " +
             (!live_applied.ok() ? live_applied.status() : query_applied.status()).ToString());
    return 1;
  }
  const int query_version = query_applied->version.version;
  if (StopRequested()) return 130;
  const std::string run = Uuid::Random().ToString().substr(0, 8);
  const IndexBenchRun b{.o = o,
                        .cluster = cluster,
                        .cfg = cfg,
                        .store = store.get(),
                        .datastore = datastore,
                        .column = column,
                        .run = run,
                        .live_def = *live_def,
                        .query_def = *query_def,
                        .query_version = query_version};
  IndexReader reader(store.get(), {*live_def, *query_def});

  // ---- Phase A: lag ----
  LagFigures lag;
  if (int rc = RunLagPhase(b, reader, &lag); rc != 0) return rc;

  // ---- Phase B: IndexWriter throughput, and the put rate ----
  // The drivers of phase B's trips and of phase C's entries.
  std::vector<Uuid> drivers(static_cast<size_t>(o.drivers));
  for (auto& d : drivers) d = Uuid::Random();
  UpsertFigures upsert;
  if (int rc = RunUpsertPhase(b, drivers, &upsert); rc != 0) return rc;

  // ---- Phase C: bulk load, then queries ----
  QueryFigures query;
  if (int rc = RunQueryPhase(b, reader, drivers, &query); rc != 0) return rc;
  store->Close();

  return PrintIndexReport(b, broker.get(), lag, upsert, query);
}

}  // namespace

void AddIndexCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<IndexBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "index",
      "indexes: write-commit to query-visible lag at a steady write rate (target p99 < 50 ms), "
      "IndexWriter upserts/s, and query latency on a bulk-loaded index of --entries entries vs "
      "the same raw SQL");
  AddClusterOptions(cmd, &o->cluster);
  cmd->add_option("--partitions", o->partitions, "kafka.partitions of the private broker")
      ->transform(DecimalInRange(1, 1024))
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "phase A writes per second")
      ->transform(DecimalInRange(1.0, 100000.0))
      ->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "phase A duration")
      ->transform(DecimalInRange(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--paced-threads", o->paced_threads,
                  "threads of the paced writer (puts in flight at most)")
      ->transform(DecimalInRange(1, 1024))
      ->capture_default_str();
  cmd->add_option("--sample-every", o->sample_every,
                  "poll the index for visibility after every k-th put")
      ->transform(DecimalInRange(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--poll-ms", o->poll_ms, "pause between visibility query rounds")
      ->transform(DecimalInRange(0, 1000))
      ->capture_default_str();
  cmd->add_option("--pollers", o->pollers, "threads polling the index for sampled puts")
      ->transform(DecimalInRange(1, 64))
      ->capture_default_str();
  cmd->add_option("--batch-cells", o->batch_cells,
                  "cells applied with IndexWriter::ApplyBatch in phase B")
      ->transform(DecimalInRange(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--put-cells", o->put_cells, "single puts timing the put rate in phase B")
      ->transform(DecimalInRange(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--apply-cells", o->apply_cells,
                  "cells applied one at a time with IndexWriter::Apply in phase B")
      ->transform(DecimalInRange(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--apply-threads", o->apply_threads, "threads calling IndexWriter::Apply")
      ->transform(DecimalInRange(1, 1024))
      ->capture_default_str();
  cmd->add_option("--entries", o->entries, "entries bulk-loaded for the query phase")
      ->transform(DecimalInRange(1, 100000000))
      ->capture_default_str();
  cmd->add_option("--drivers", o->drivers, "distinct shard-field values (drivers)")
      ->transform(DecimalInRange(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--rows-per-insert", o->rows_per_insert, "rows per bulk-load INSERT")
      ->transform(DecimalInRange(1, 5000))
      ->capture_default_str();
  cmd->add_option("--load-connections", o->load_connections, "bulk-load connections per host")
      ->transform(DecimalInRange(1, 64))
      ->capture_default_str();
  cmd->add_option("--queries", o->queries, "timed queries (each also run as raw SQL)")
      ->transform(DecimalInRange(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--query-days", o->query_days, "time range of a query: the last D days")
      ->transform(DecimalInRange(1, 3650))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "seconds to wait for the first entry (warm-up)")
      ->transform(DecimalInRange(1, 86400))
      ->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = RunIndexBench(*o); });
}

}  // namespace cellar::bench
