// `cellar-bench put`: group-committed puts against raw SQL on the same server.
//
// Storage is the host log (cells/cell_store.h): one cells table per
// (host, datastore) holding every shard of the host, and a write fence row per
// writer connection (cells/internal/write_fence.h). Every phase writes rows of
// random shards into those tables, with the same columns and EncodeBody bytes.
//
// Phase A (baseline): N rows written with prepared 100-row INSERT statements
// (autocommit, one statement per transaction) straight into the host cells
// tables (`shard` column set), through cellar::MysqlConnection.
// --raw-connections connections per MySQL host run in parallel (default 4, kept
// so that the baseline stays comparable with earlier results; the group
// commit's default is 2 writer threads per host). Bodies are
// encoded before the clock starts. The phase runs --raw-rounds times (fresh
// rows each time) and the median round's rate is the baseline: the rate of a
// sub-second phase on a shared machine is noisy.
//
// Phase A' (only with --single-row-baseline): N single-row autocommit INSERTs
// from C connections per host, i.e. what the callers would get with no group
// commit at all.
//
// Phase C (the design's ceiling, plain SQL, no Cellar code): W connections per
// host (W = writer threads per host), each registered in write_fence
// (committed), each transaction ONE prepared autocommit
// --ceiling-rows-per-tx-row INSERT ... RETURNING into the host cells table
// whose first row locks the connection's fence row itself
// (internal::FencedCreatedAt). That is exactly what the group commit sends when
// it finds that many cells of one datastore waiting, so cells/s against it is
// what Cellar's own overhead (queueing, validation, encoding, waking callers)
// costs. Same rounds and median as phase A.
//
// Phase C' (the closed-loop ceiling, plain SQL): as phase C, but with exactly
// C rows in flight per host: W connections, C / W rows per transaction, for
// W = 1 and W = the writer threads per host; the faster counts. C callers each
// blocked in Put() never offer the server more than C cells at once, so no
// group commit of theirs can beat this; phase C's W x 32 rows in flight are
// out of their reach. One connection is measured too because it commits all C
// rows with one fsync, which on a slow disk beats two connections of C / 2.
// cells/s against it is Cellar's own overhead for blocking callers.
//
// Phase D' (put_batch's closed-loop ceiling, plain SQL): as phase C', with the
// C x --batch-cells-per-row rows that C callers blocked in PutBatch offer at
// once, at most group_commit.max_batch_cells per transaction (what one group
// commit takes). cells/s of phase D against it is Cellar's own overhead for
// put_batch.
//
// Phase B (the store): C caller threads each call CellStore::Put for one cell
// at a time (distinct random rows, trip-like bodies). The clock covers the
// whole Put: validation, encoding, queueing and the group-committed
// transaction. Per-put latency gives p50/p99/max. Each PutResult's
// (host, created_at) identifies the transaction that committed it (every cell
// of one transaction gets the same created_at), which yields the transaction
// sizes the group committer achieved. Phases B and D run --store-rounds
// rounds of N fresh cells each and the median round counts, as phase A's
// median round does (one sub-second round alone takes whatever the shared
// machine's noise does to it).
//
// Phase D (put_batch): the same C callers each call CellStore::PutBatch with
// one row of --batch-cells-per-row cells (one column, ref_keys 0..k-1). The
// requests are built before the phase, so its CPU figures are the calls'.
//
// Phase E (latency at half the maximum rate): C callers put --half-rate-cells
// cells paced at half phase B's cells/s; a put's latency runs from when it was
// due, so falling behind counts.
//
// Phase F (--async-window K > 0): the same C callers each keep up to K
// CellStore::PutAsync calls in flight, so the group commit can fill its
// transactions as phase C does. Latency runs from PutAsync to its callback.
//
// Targets (issue 13, same run): single puts >= 0.5 x raw and >= 2 x the
// single-row baseline; put_batch >= 0.8 x raw; p99 <= 20 ms at half rate.
//
// For each phase the table also shows where the time goes: client and server
// CPU per row (server CPU only for the private MariaDB), SQL statements per
// row, statement prepares and InnoDB fsyncs (GLOBAL_STATUS deltas; with
// --config they include whatever else the servers did meanwhile).
#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_put_run.h"
#include "cells/cell_store.h"
#include "config/number_options.h"

namespace cellar::bench {
namespace {

// ---- Store phases -------------------------------------------------------------

template <typename Run>
StorePhase TimeStorePhase(const BenchCluster& cluster, const MetricsRegistry& metrics, Run run) {
  StorePhase p;
  const WriterTime writer_before = WriterTime::Take(metrics);
  Usage before = TakeUsage(cluster);
  p.r = run();
  Usage after = TakeUsage(cluster);
  p.writer = WriterTimePerTransaction::Between(writer_before, WriterTime::Take(metrics));
  p.ran = true;
  p.usage.Add(before, after);
  p.cells_per_s = p.r.seconds > 0 ? p.r.rows / p.r.seconds : 0;
  std::vector<double>& lat = p.r.latencies_ms;  // sorted by Percentile
  p.p50 = Percentile(lat, 50);
  p.p99 = Percentile(lat, 99);
  p.max_ms = lat.empty() ? 0 : lat.back();
  return p;
}

// `rounds` rounds of run(round), each on its own cells: the median round by
// cells/s (the lower middle one of an even count), with every round's rate in
// round_rates and every round's errors counted. Stops at an interrupted round.
template <typename Run>
StorePhase TimeStoreRounds(const BenchCluster& cluster, const MetricsRegistry& metrics, int rounds,
                           Run run) {
  std::vector<StorePhase> done;
  for (int i = 0; i < std::max(1, rounds); ++i) {
    done.push_back(TimeStorePhase(cluster, metrics, [&] { return run(static_cast<size_t>(i)); }));
    if (done.back().r.interrupted) return done.back();
  }
  std::vector<double> rates;
  for (const StorePhase& p : done) rates.push_back(p.cells_per_s);
  StorePhase median = done[MedianIndex(rates)];
  median.round_rates = std::move(rates);
  median.r.errors = 0;
  for (const StorePhase& p : done) {
    if (p.r.errors > 0 && median.r.errors == 0) median.r.first_error = p.r.first_error;
    median.r.errors += p.r.errors;
  }
  return median;
}

// ---- The run --------------------------------------------------------------------

// `rows_in_flight` rows per host in plain SQL (fenced autocommit INSERT ...
// RETURNING, as `fused`) over 1 and over the writer threads' count of
// connections, at most `max_rows_per_tx` per transaction. 0, or the exit code
// of a failed round.
int MeasureClosedLoopCeiling(const BenchCluster& cluster, const PutOptions& o,
                             const std::string& label, int rows_in_flight,
                             const RawPhaseOptions& fused, std::mt19937_64& rng,
                             ClosedLoopCeiling& out, int max_rows_per_tx = 0) {
  const ClusterConfig& cfg = cluster.config;
  const std::string datastore = cfg.datastores[0].name;
  const std::string column = cfg.datastores[0].columns[0].name;
  out.rows_in_flight = rows_in_flight;
  const int writers = std::max(1, cfg.group_commit.writer_threads_per_host);
  std::vector<int> connection_counts = {1};
  if (writers > 1) connection_counts.push_back(writers);
  for (int w : connection_counts) {
    if (w > rows_in_flight) continue;
    ClosedLoopCeiling::Try c;
    c.connections = w;
    c.rows_per_tx = std::max(1, rows_in_flight / w);
    if (max_rows_per_tx > 0) c.rows_per_tx = std::min(c.rows_per_tx, max_rows_per_tx);
    RawPhaseOptions options = fused;
    options.connections_per_host = w;
    c.rounds = RunRawRounds(cluster, label + " W=" + std::to_string(w), o.raw_rounds, options, [&] {
      return PlanFusedFenceStatements(cfg, datastore, column, o.cells, c.rows_per_tx, o.body_bytes,
                                      rng);
    });
    if (c.rounds.exit_code != 0) return c.rounds.exit_code;
    if (c.rounds.median_rows_per_s > out.best.median_rows_per_s) {
      out.best = c.rounds;
      out.rows_per_tx = c.rows_per_tx;
      out.connections = w;
    }
    out.tried.push_back(std::move(c));
  }
  return 0;
}

// Phases A, C and A' (raw SQL). 0, or the exit code of a failed phase.
int RunRawPhases(const BenchCluster& cluster, const PutOptions& o, std::mt19937_64& rng,
                 PutRun& run) {
  const ClusterConfig& cfg = cluster.config;
  const std::string datastore = cfg.datastores[0].name;
  const std::string column = cfg.datastores[0].columns[0].name;
  run.raw = RunRawRounds(cluster, "phase A", o.raw_rounds,
                         {.connections_per_host = o.raw_connections}, [&] {
                           return PlanRawStatements(cfg, datastore, column, o.cells,
                                                    o.raw_rows_per_insert, o.body_bytes, rng);
                         });
  if (run.raw.exit_code != 0) return run.raw.exit_code;

  // Phases C and C' send what the group commit sends: one autocommit INSERT
  // whose first row locks the writer's fence row (FencedCreatedAt).
  const RawPhaseOptions fused = {.connections_per_host = cfg.group_commit.writer_threads_per_host,
                                 .register_writers = true,
                                 .keep_autocommit = true};
  run.ceiling = RunRawRounds(cluster, "phase C", o.raw_rounds, fused, [&] {
    return PlanFusedFenceStatements(cfg, datastore, column, o.cells, o.ceiling_rows_per_tx,
                                    o.body_bytes, rng);
  });
  if (run.ceiling.exit_code != 0) return run.ceiling.exit_code;

  if (int rc =
          MeasureClosedLoopCeiling(cluster, o, "phase C'", o.callers, fused, rng, run.closed_loop);
      rc != 0)
    return rc;
  if (int rc =
          MeasureClosedLoopCeiling(cluster, o, "phase D'", o.callers * o.batch_cells_per_row, fused,
                                   rng, run.batch_closed_loop, cfg.group_commit.max_batch_cells);
      rc != 0)
    return rc;

  if (o.closed_loop_designs) {
    int rc = 0;
    run.designs =
        RunClosedLoopDesigns(cluster, o.callers, o.cells, o.body_bytes, o.raw_rounds, rng, &rc);
    if (rc != 0) return rc;
  }

  if (o.bare_group_commit) {
    int rc = 0;
    run.bare =
        RunBareGroupCommits(cluster, o.callers, o.cells, o.body_bytes, o.raw_rounds, rng, &rc);
    if (rc != 0) return rc;
  }

  if (!o.single_row_baseline) return 0;
  RawWork statements = PlanRawStatements(cfg, datastore, column, o.cells, 1, o.body_bytes, rng);
  Progress("phase A': " + std::to_string(o.cells) + " single-row autocommit INSERTs over " +
           std::to_string(o.callers) + " connection(s) per host");
  run.single = RunRawPhase(cfg, statements, {.connections_per_host = o.callers});
  if (run.single->interrupted) {
    Progress("interrupted");
    return 130;
  }
  if (run.single->errors > 0) {
    Progress("phase A' failed (" + std::to_string(run.single->errors) +
             " errors), first: " + run.single->first_error);
    return 1;
  }
  return 0;
}

// Phases B, D and E (the store). 0, or 130 when interrupted.
int RunStorePhases(const BenchCluster& cluster, const PutOptions& o, CellStore& store,
                   const MetricsRegistry& metrics, std::mt19937_64& rng, PutRun& run) {
  const ClusterConfig& cfg = cluster.config;
  const std::string datastore = cfg.datastores[0].name;
  const std::string column = cfg.datastores[0].columns[0].name;
  const int half_cells = o.half_rate_cells > 0 ? o.half_rate_cells : std::max(1, o.cells / 2);
  Progress("generating trip cells for phases B, D and E");
  const size_t rounds = static_cast<size_t>(std::max(1, o.store_rounds));
  uint64_t unused_json = 0, unused_encoded = 0;
  std::vector<std::vector<CellWrite>> cells;                    // phase B, one set per round
  std::vector<std::vector<std::vector<CellWrite>>> batch_rows;  // phase D, one set per round
  for (size_t i = 0; i < rounds; ++i) {
    // The first round's bodies are the ones the table's body sizes describe.
    cells.push_back(MakeTripCells(o.cells, 1, column, o.body_bytes, rng,
                                  i == 0 ? &run.json_bytes : &unused_json,
                                  i == 0 ? &run.encoded_bytes : &unused_encoded));
    batch_rows.push_back(
        SplitIntoRows(MakeTripCells(o.cells, o.batch_cells_per_row, column, o.body_bytes, rng,
                                    &unused_json, &unused_encoded),
                      o.batch_cells_per_row));
  }
  run.cells = cells[0].size();
  std::vector<CellWrite> half_cells_v =
      MakeTripCells(half_cells, 1, column, o.body_bytes, rng, &unused_json, &unused_encoded);
  if (StopRequested()) return 130;

  if (o.warm_up_cells > 0) {
    Progress("warm-up: " + std::to_string(o.warm_up_cells) +
             " single puts and put_batch cells, untimed");
    std::vector<CellWrite> single =
        MakeTripCells(o.warm_up_cells, 1, column, o.body_bytes, rng, &unused_json, &unused_encoded);
    const std::vector<std::vector<CellWrite>> rows =
        SplitIntoRows(MakeTripCells(o.warm_up_cells, o.batch_cells_per_row, column, o.body_bytes,
                                    rng, &unused_json, &unused_encoded),
                      o.batch_cells_per_row);
    if (RunPutPhase(store, datastore, single, o.callers).interrupted ||
        RunPutBatchPhase(store, datastore, rows, o.callers).interrupted)
      return 130;
  }
  Progress("phase B: " + std::to_string(o.callers) + " callers doing single puts, " +
           std::to_string(rounds) + " round(s)");
  run.put = TimeStoreRounds(cluster, metrics, o.store_rounds, [&](size_t round) {
    return RunPutPhase(store, datastore, cells[round], o.callers);
  });
  if (run.put.r.interrupted) return 130;

  Progress("phase D: " + std::to_string(o.callers) + " callers doing put_batch of " +
           std::to_string(o.batch_cells_per_row) + " cells per row, " + std::to_string(rounds) +
           " round(s)");
  run.batch = TimeStoreRounds(cluster, metrics, o.store_rounds, [&](size_t round) {
    return RunPutBatchPhase(store, datastore, batch_rows[round], o.callers);
  });
  if (run.batch.r.interrupted) return 130;

  run.half_rate = run.put.cells_per_s / 2;
  if (run.half_rate <= 0) return 0;
  Progress("phase E: " + std::to_string(half_cells) + " single puts paced at " +
           FormatNumber(run.half_rate, 0) + " cells/s");
  run.half = TimeStorePhase(cluster, metrics, [&] {
    return RunPutPhase(store, datastore, half_cells_v, o.callers, run.half_rate);
  });
  if (run.half.r.interrupted) return 130;

  if (o.async_window <= 0) return 0;
  std::vector<CellWrite> async_cells =
      MakeTripCells(o.cells, 1, column, o.body_bytes, rng, &unused_json, &unused_encoded);
  Progress("phase F: " + std::to_string(o.callers) + " callers doing PutAsync, up to " +
           std::to_string(o.async_window) + " in flight each");
  run.async = TimeStorePhase(cluster, metrics, [&] {
    return RunPutAsyncPhase(store, datastore, async_cells, o.callers, o.async_window);
  });
  return run.async.r.interrupted ? 130 : 0;
}

int RunPut(const PutOptions& o) {
  auto cluster_or = OpenBenchCluster(o.cluster);
  if (!cluster_or.ok()) {
    Progress(cluster_or.status().ToString());
    return 2;
  }
  BenchCluster cluster = std::move(cluster_or).value();
  const ClusterConfig& cfg = cluster.config;

  MetricsRegistry metrics;  // the group commit's writer time per phase
  std::unique_ptr<CellStore> store = CellStore::Open(cfg, &metrics);
  Progress("creating host databases and tables (" + std::to_string(cfg.mysql.hosts.size()) +
           " host(s), " + std::to_string(cfg.shards) + " shards)");
  if (Status s = store->Init(); !s.ok()) {
    Progress("init failed: " + s.ToString());
    return 1;
  }
  if (StopRequested()) return 130;

  std::mt19937_64 rng(std::random_device{}());
  PutRun run;
  if (int rc = RunRawPhases(cluster, o, rng, run); rc != 0) return rc;
  if (int rc = RunStorePhases(cluster, o, *store, metrics, rng, run); rc != 0) {
    Progress("interrupted");
    return rc;
  }
  store->Close();

  PrintPutTable(cluster, o, run);
  PrintPutJson(cluster, o, run);
  return run.put.r.errors + run.batch.r.errors + run.half.r.errors + run.async.r.errors ? 1 : 0;
}

}  // namespace

void AddPutCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PutOptions>();
  CLI::App* cmd = app.add_subcommand(
      "put",
      "group-committed puts and put_batch from C callers vs raw 100-row INSERTs and the "
      "design's plain-SQL ceiling on the same server (writes into the first datastore's first "
      "column)");
  AddClusterOptions(cmd, &o->cluster);
  cmd->add_option("--cells", o->cells, "cells N written by each phase")
      ->transform(DecimalInRange(1, 100000000))
      ->capture_default_str();
  cmd->add_option("--callers", o->callers, "concurrent caller threads C doing puts")
      ->transform(DecimalInRange(1, 4096))
      ->capture_default_str();
  cmd->add_option("--body-bytes", o->body_bytes,
                  "approximate JSON size of a trip body (padded with a route string)")
      ->transform(DecimalInRange(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--raw-connections", o->raw_connections,
                  "parallel connections per host for the raw INSERT baseline")
      ->transform(DecimalInRange(1, 256))
      ->capture_default_str();
  cmd->add_option("--raw-rounds", o->raw_rounds,
                  "rounds of N rows of phases A, C, C' and D'; the median round's rate counts")
      ->transform(DecimalInRange(1, 100))
      ->capture_default_str();
  cmd->add_option("--store-rounds", o->store_rounds,
                  "rounds of N cells of phases B and D; the median round's figures count")
      ->transform(DecimalInRange(1, 100))
      ->capture_default_str();
  cmd->add_flag("--single-row-baseline", o->single_row_baseline,
                "also time N single-row autocommit INSERTs from C connections (no group commit)");
  cmd->add_option("--ceiling-rows-per-tx", o->ceiling_rows_per_tx,
                  "cells per transaction of the plain-SQL ceiling (phase C)")
      ->transform(DecimalInRange(1, 10000))
      ->capture_default_str();
  cmd->add_option("--batch-cells-per-row", o->batch_cells_per_row,
                  "cells of one row per put_batch call (phase D)")
      ->transform(DecimalInRange(1, 1000))
      ->capture_default_str();
  cmd->add_option("--half-rate-cells", o->half_rate_cells,
                  "puts of the half-rate latency phase E (0: N / 2)")
      ->transform(DecimalInRange(0, 100000000))
      ->capture_default_str();
  cmd->add_option("--warm-up-cells", o->warm_up_cells,
                  "untimed single puts and put_batch cells before phase B (0: none)")
      ->transform(DecimalInRange(0, 100000000))
      ->capture_default_str();
  cmd->add_option("--async-window", o->async_window,
                  "PutAsync calls each caller keeps in flight in phase F (0: skip phase F)")
      ->transform(DecimalInRange(0, 100000))
      ->capture_default_str();
  cmd->add_flag("--closed-loop-designs", o->closed_loop_designs,
                "also run phase G: C rows in flight in plain SQL over 1, 2, 4 and 8 connections, "
                "fenced INSERT ... RETURNING and bare autocommit INSERT");
  cmd->add_flag("--bare-group-commit", o->bare_group_commit,
                "also run phase H: C blocked callers through a bare group commit (a queue, "
                "the writers' SQL, one wake-up per batch; no Cellar code), the bound of single "
                "puts on this machine");
  cmd->callback([o, exit_code] { *exit_code = RunPut(*o); });
}

}  // namespace cellar::bench
