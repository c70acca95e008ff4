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

#include "bench/bench_common.h"
#include "bench/bench_put_designs.h"
#include "bench/bench_put_phases.h"
#include "bench/bench_put_raw.h"
#include "bench/bench_put_store.h"
#include "cells/cell_store.h"
#include "config/number_options.h"

namespace cellar::bench {
namespace {

struct PutOptions {
  ClusterOptions cluster;
  int cells = 20000;
  int callers = 32;
  int body_bytes = 400;
  int raw_connections = 4;  // per MySQL host
  int raw_rows_per_insert = 100;
  int raw_rounds = 3;  // the median round is the baseline (the machine may be shared)
  // Rounds of N cells of phases B and D; the median round counts, as for the
  // baseline (a single sub-second round takes whatever the machine's noise
  // does to it, the baseline's median does not).
  int store_rounds = 3;
  bool single_row_baseline = false;
  int ceiling_rows_per_tx = 32;  // cells per transaction of the plain-SQL ceiling
  int batch_cells_per_row = 10;
  int half_rate_cells = 0;  // 0: N / 2
  int async_window = 8;     // PutAsync calls in flight per caller in phase F (0: no phase F)
  // Untimed puts and put_batch cells before phase B (0: none), as the
  // baseline's median round follows a first round: a service's writers are
  // connected and have prepared their statements (one per batch size).
  int warm_up_cells = 5000;
  bool closed_loop_designs = false;  // phase G: plain-SQL closed-loop variants
};

// The targets.
constexpr double kTargetRatio = 0.5;
constexpr double kTargetSingleRowRatio = 2.0;
constexpr double kTargetBatchRatio = 0.8;
constexpr double kTargetHalfRateP99Ms = 20.0;

// ---- Store phases -------------------------------------------------------------

// A store phase with what it used and its latency percentiles.
struct StorePhase {
  StorePhaseResult r;
  UsageDelta usage;
  double cells_per_s = 0;
  double p50 = 0, p99 = 0, max_ms = 0;
  bool ran = false;
  std::vector<double> round_rates;  // cells/s of every round (TimeStoreRounds)
  WriterTimePerTransaction writer;
};

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

double CellsPerTransaction(const StorePhaseResult& r) {
  return r.transactions ? static_cast<double>(r.rows) / r.transactions : 0;
}

void AddStorePhaseRows(Table& t, const StorePhase& p, const std::string& call) {
  const StorePhaseResult& r = p.r;
  if (p.round_rates.size() > 1)
    t.Add("rounds of N cells", std::to_string(p.round_rates.size()) +
                                   " (cells/s: " + JoinRates(p.round_rates) +
                                   "; the median round's figures follow)");
  t.Add("cells written", std::to_string(r.rows));
  t.Add("errors",
        std::to_string(r.errors) + (r.errors ? " (first: " + r.first_error + ")" : std::string()));
  t.Add("seconds", FormatNumber(r.seconds, 3));
  t.Add("cells/s", FormatNumber(p.cells_per_s, 0));
  t.Add(call + " latency p50 ms", FormatNumber(p.p50, 2));
  t.Add(call + " latency p99 ms", FormatNumber(p.p99, 2));
  t.Add(call + " latency max ms", FormatNumber(p.max_ms, 2));
  t.Add("transactions", std::to_string(r.transactions) + " (" +
                            FormatNumber(r.seconds > 0 ? r.transactions / r.seconds : 0, 0) +
                            "/s, " + FormatNumber(CellsPerTransaction(r), 2) + " cells each)");
  t.Add("cells per transaction (as seen by a cell)", FormatNumber(r.cell_weighted_transaction, 2));
  t.Add("largest transaction", std::to_string(r.max_transaction) + " cells");
  t.Add("single-cell transactions",
        FormatNumber(r.transactions ? 100.0 * r.single_cell_transactions / r.transactions : 0, 1) +
            " %");
  if (p.writer.transactions > 0)
    t.Add("writer thread time per transaction (us)",
          "waiting " + FormatNumber(p.writer.waiting_us, 0) + ", committing " +
              FormatNumber(p.writer.committing_us, 0) + ", answering " +
              FormatNumber(p.writer.answering_us, 0));
  if (r.rows > 0) AddUsageRows(t, p.usage, static_cast<double>(r.rows), r.seconds);
}

// ---- The run --------------------------------------------------------------------

// A closed-loop ceiling in plain SQL (phases C' and D'): a fixed number of rows
// in flight per host, over W connections of (rows in flight) / W rows per
// transaction, for W = 1 and W = the writer threads per host; the faster counts.
struct ClosedLoopCeiling {
  struct Try {
    int connections = 0;
    int rows_per_tx = 0;
    RawRounds rounds;
  };
  std::vector<Try> tried;
  RawRounds best;
  int rows_per_tx = 0;  // of the faster
  int connections = 0;  // of the faster
  int rows_in_flight = 0;
};

struct PutRun {
  RawRounds raw, ceiling;
  ClosedLoopCeiling closed_loop;          // phase C': C rows in flight
  ClosedLoopCeiling batch_closed_loop;    // phase D': C x k rows in flight
  std::vector<ClosedLoopDesign> designs;  // phase G (--closed-loop-designs)
  std::optional<PhaseResult> single;      // with --single-row-baseline
  StorePhase put, batch, half, async;
  double half_rate = 0;                                   // cells/s phase E was paced at
  uint64_t cells = 0, json_bytes = 0, encoded_bytes = 0;  // of phase B's cells
};

double SingleRowRate(const PutRun& run) {
  return run.single && run.single->seconds > 0 ? run.single->rows / run.single->seconds : 0;
}

// "0.612 (target >= 0.5: met)".
std::string Judged(double value, int digits, const std::string& target, bool met) {
  return FormatNumber(value, digits) + " (target " + target + ": " + (met ? "met" : "missed") + ")";
}

void AddClosedLoopRows(Table& t, const std::string& section, const std::string& who,
                       const ClosedLoopCeiling& c) {
  t.Section(section);
  t.Add("transactions",
        "fenced INSERT ... RETURNING on W connection(s) per host, the rows in "
        "flight shared among them: what " +
            who + " can offer at once");
  for (const ClosedLoopCeiling::Try& w : c.tried)
    t.Add("W=" + std::to_string(w.connections) + ", " + std::to_string(w.rows_per_tx) +
              " rows/tx, rows/s",
          FormatNumber(w.rounds.median_rows_per_s, 0) + " (rounds: " + JoinRates(w.rounds.rates) +
              ")");
  t.Add("closed-loop ceiling rows/s (median round)",
        FormatNumber(c.best.median_rows_per_s, 0) + " (W=" + std::to_string(c.connections) + ")");
  AddUsageRows(t, c.best.usage, static_cast<double>(c.best.total.rows), c.best.total.seconds);
}

void PrintTable(const BenchCluster& cluster, const PutOptions& o, const PutRun& run) {
  const ClusterConfig& cfg = cluster.config;
  const double raw = run.raw.median_rows_per_s;
  const double ceiling = run.ceiling.median_rows_per_s;
  Table t("cellar-bench put");
  t.Section("settings");
  DescribeCluster(cluster, t);
  t.Add("datastore / column", cfg.datastores[0].name + " / " + cfg.datastores[0].columns[0].name);
  t.Add("cells (N)", std::to_string(o.cells));
  t.Add("callers (C)", std::to_string(o.callers));
  t.Add("warm-up before phase B (untimed)", std::to_string(o.warm_up_cells) + " single puts, " +
                                                std::to_string(o.warm_up_cells) +
                                                " put_batch cells");
  t.Add("body JSON bytes (mean)", FormatNumber(static_cast<double>(run.json_bytes) / run.cells, 1));
  t.Add("body stored bytes (mean)",
        FormatNumber(static_cast<double>(run.encoded_bytes) / run.cells, 1));

  t.Section("phase A: raw multi-row INSERT into the host table (baseline)");
  t.Add("rows per INSERT", std::to_string(o.raw_rows_per_insert) +
                               " of random shards of the host (prepared, autocommit)");
  t.Add("connections", std::to_string(o.raw_connections) +
                           " per host (kept from earlier versions so results compare)");
  t.Add("rounds of N rows",
        std::to_string(run.raw.rates.size()) + " (rows/s: " + JoinRates(run.raw.rates) + ")");
  t.Add("rows written", std::to_string(run.raw.total.rows));
  t.Add("seconds", FormatNumber(run.raw.total.seconds, 3));
  t.Add("raw rows/s (median round)", FormatNumber(raw, 0));
  AddUsageRows(t, run.raw.usage, static_cast<double>(run.raw.total.rows), run.raw.total.seconds);
  if (run.single) {
    t.Section("phase A': raw single-row autocommit INSERT (no group commit)");
    t.Add("connections", std::to_string(o.callers) + " per host (= callers)");
    t.Add("rows written", std::to_string(run.single->rows));
    t.Add("seconds", FormatNumber(run.single->seconds, 3));
    t.Add("single-row rows/s", FormatNumber(SingleRowRate(run), 0));
  }
  t.Section(
      "phase C: the design's ceiling in plain SQL (one autocommit INSERT ... RETURNING that locks "
      "its write fence row)");
  t.Add("transactions", "one autocommit " + std::to_string(o.ceiling_rows_per_tx) +
                            "-row INSERT ... RETURNING of random shards, its first row locking "
                            "the fence row; " +
                            std::to_string(cfg.group_commit.writer_threads_per_host) +
                            " registered connection(s) per host (= writer threads)");
  t.Add("rounds of N rows", std::to_string(run.ceiling.rates.size()) +
                                " (rows/s: " + JoinRates(run.ceiling.rates) + ")");
  t.Add("ceiling rows/s (median round)", FormatNumber(ceiling, 0));
  AddUsageRows(t, run.ceiling.usage, static_cast<double>(run.ceiling.total.rows),
               run.ceiling.total.seconds);

  AddClosedLoopRows(t,
                    "phase C': closed-loop ceiling in plain SQL (as phase C, " +
                        std::to_string(o.callers) + " rows in flight per host)",
                    "C blocked callers", run.closed_loop);
  AddClosedLoopRows(t,
                    "phase D': put_batch's closed-loop ceiling in plain SQL (as phase C, " +
                        std::to_string(run.batch_closed_loop.rows_in_flight) +
                        " rows in flight per host)",
                    "C callers blocked in put_batch", run.batch_closed_loop);
  AddClosedLoopDesignRows(t, run.designs, run.raw.median_rows_per_s);

  t.Section("phase B: CellStore::Put, group commit, " + std::to_string(o.callers) + " callers");
  AddStorePhaseRows(t, run.put, "put");
  t.Section("phase D: CellStore::PutBatch, one row of " + std::to_string(o.batch_cells_per_row) +
            " cells per call, " + std::to_string(o.callers) + " callers");
  AddStorePhaseRows(t, run.batch, "put_batch");
  if (run.half.ran) {
    t.Section("phase E: CellStore::Put paced at half of phase B's cells/s");
    t.Add("paced at",
          FormatNumber(run.half_rate, 0) + " cells/s (latency from when a put was due)");
    AddStorePhaseRows(t, run.half, "put");
  }
  if (run.async.ran) {
    t.Section("phase F: CellStore::PutAsync, " + std::to_string(o.callers) + " callers x " +
              std::to_string(o.async_window) + " puts in flight");
    AddStorePhaseRows(t, run.async, "put");
  }

  const double ratio = run.put.cells_per_s / raw;
  const double batch_ratio = run.batch.cells_per_s / raw;
  t.Section("targets (same run)");
  t.Add("single puts / raw rows/s",
        Judged(ratio, 3, ">= " + FormatNumber(kTargetRatio, 1), ratio >= kTargetRatio));
  if (run.single) {
    const double single_ratio = run.put.cells_per_s / SingleRowRate(run);
    t.Add("single puts / single-row rows/s",
          Judged(single_ratio, 2, ">= " + FormatNumber(kTargetSingleRowRatio, 1),
                 single_ratio >= kTargetSingleRowRatio));
  } else {
    t.Add("single puts / single-row rows/s", "not measured (--single-row-baseline)");
  }
  t.Add("put_batch cells/s / raw rows/s",
        Judged(batch_ratio, 3, ">= " + FormatNumber(kTargetBatchRatio, 1),
               batch_ratio >= kTargetBatchRatio));
  if (run.half.ran)
    t.Add("put p99 ms at half rate",
          Judged(run.half.p99, 2, "<= " + FormatNumber(kTargetHalfRateP99Ms, 0),
                 run.half.p99 <= kTargetHalfRateP99Ms));
  if (run.async.ran) {
    const double async_ratio = run.async.cells_per_s / raw;
    t.Add(
        "async puts / raw rows/s (phase F)",
        Judged(async_ratio, 3, ">= " + FormatNumber(kTargetRatio, 1), async_ratio >= kTargetRatio));
    if (run.single) {
      const double r = run.async.cells_per_s / SingleRowRate(run);
      t.Add(
          "async puts / single-row rows/s (phase F)",
          Judged(r, 2, ">= " + FormatNumber(kTargetSingleRowRatio, 1), r >= kTargetSingleRowRatio));
    }
  }
  t.Section("result");
  t.Add("ratio (cells/s / raw rows/s)", FormatNumber(ratio, 3));
  t.Add("closed-loop ceiling / raw rows/s",
        FormatNumber(run.closed_loop.best.median_rows_per_s / raw, 3) + " (the best " +
            std::to_string(o.callers) + " blocked callers can get, in plain SQL)");
  t.Add("cells/s / closed-loop ceiling",
        FormatNumber(run.put.cells_per_s / run.closed_loop.best.median_rows_per_s, 3) +
            " (1 - this = Cellar's own overhead for blocking callers)");
  const double batch_closed = run.batch_closed_loop.best.median_rows_per_s;
  t.Add("put_batch closed-loop ceiling / raw rows/s",
        FormatNumber(batch_closed / raw, 3) + " (the best " + std::to_string(o.callers) +
            " callers blocked in put_batch can get, in plain SQL)");
  t.Add("put_batch cells/s / its closed-loop ceiling",
        FormatNumber(run.batch.cells_per_s / batch_closed, 3) +
            " (1 - this = Cellar's own overhead for put_batch)");
  t.Add("ceiling / raw rows/s", FormatNumber(ceiling / raw, 3) + " (the design's own best, at " +
                                    std::to_string(o.ceiling_rows_per_tx) +
                                    " cells per transaction)");
  t.Add("cells/s / ceiling rows/s", FormatNumber(run.put.cells_per_s / ceiling, 3) +
                                        " (1 - this = Cellar's own overhead; phase B had " +
                                        FormatNumber(CellsPerTransaction(run.put.r), 2) +
                                        " cells per transaction)");
  t.Add("compression ratio (JSON / stored)",
        FormatNumber(static_cast<double>(run.json_bytes) / run.encoded_bytes, 2));
  t.Print();
}

void PrintJson(const BenchCluster& cluster, const PutOptions& o, const PutRun& run) {
  const ClusterConfig& cfg = cluster.config;
  const double raw = run.raw.median_rows_per_s;
  const double ceiling = run.ceiling.median_rows_per_s;
  const StorePhaseResult& put = run.put.r;
  const double ratio = run.put.cells_per_s / raw;
  const double batch_ratio = run.batch.cells_per_s / raw;
  bool met = ratio >= kTargetRatio && batch_ratio >= kTargetBatchRatio;
  if (run.single) met = met && run.put.cells_per_s >= kTargetSingleRowRatio * SingleRowRate(run);
  if (run.half.ran) met = met && run.half.p99 <= kTargetHalfRateP99Ms;

  nlohmann::ordered_json j;
  j["bench"] = "put";
  j["cells"] = o.cells;
  j["callers"] = o.callers;
  j["cells_per_s"] = Round(run.put.cells_per_s, 1);
  j["raw_rows_per_s"] = Round(raw, 1);
  j["ratio"] = Round(ratio, 3);
  j["p50_ms"] = Round(run.put.p50, 3);
  j["p99_ms"] = Round(run.put.p99, 3);
  j["compression_ratio"] =
      Round(static_cast<double>(run.json_bytes) / static_cast<double>(run.encoded_bytes), 3);
  j["max_ms"] = Round(run.put.max_ms, 3);
  j["shards"] = cfg.shards;
  j["raw_connections"] = o.raw_connections;
  j["max_batch_cells"] = cfg.group_commit.max_batch_cells;
  j["writer_threads"] = cfg.group_commit.writer_threads_per_host;
  // Cells per INSERT statement: one INSERT per transaction in the host layout.
  j["mean_batch_cells"] = Round(CellsPerTransaction(put), 2);
  j["ceiling_rows_per_s"] = Round(ceiling, 1);
  j["ceiling_ratio"] = Round(ceiling / raw, 3);
  j["ratio_to_ceiling"] = Round(run.put.cells_per_s / ceiling, 3);
  j["transactions"] = put.transactions;
  j["cells_per_transaction"] = Round(CellsPerTransaction(put), 2);
  if (run.single) {
    j["single_row_rows_per_s"] = Round(SingleRowRate(run), 1);
    j["single_row_ratio"] = Round(run.put.cells_per_s / SingleRowRate(run), 3);
  }
  j["ceiling_rows_per_transaction"] = o.ceiling_rows_per_tx;
  j["batch_cells_per_row"] = o.batch_cells_per_row;
  j["batch_cells_per_s"] = Round(run.batch.cells_per_s, 1);
  j["batch_ratio"] = Round(batch_ratio, 3);
  j["batch_p99_ms"] = Round(run.batch.p99, 3);
  // Where phase B's and D's writer threads spent a transaction, in us.
  j["writer_waiting_us_per_tx"] = Round(run.put.writer.waiting_us, 1);
  j["writer_committing_us_per_tx"] = Round(run.put.writer.committing_us, 1);
  j["writer_answering_us_per_tx"] = Round(run.put.writer.answering_us, 1);
  j["batch_writer_waiting_us_per_tx"] = Round(run.batch.writer.waiting_us, 1);
  j["batch_writer_committing_us_per_tx"] = Round(run.batch.writer.committing_us, 1);
  j["batch_writer_answering_us_per_tx"] = Round(run.batch.writer.answering_us, 1);
  if (run.half.ran) {
    j["half_rate_cells_per_s"] = Round(run.half.cells_per_s, 1);
    j["half_rate_p50_ms"] = Round(run.half.p50, 3);
    j["half_rate_p99_ms"] = Round(run.half.p99, 3);
  }
  const double closed = run.closed_loop.best.median_rows_per_s;
  j["closed_loop_ceiling_rows_per_s"] = Round(closed, 1);
  j["closed_loop_ceiling_ratio"] = Round(closed / raw, 3);
  j["closed_loop_rows_per_transaction"] = run.closed_loop.rows_per_tx;
  j["closed_loop_connections"] = run.closed_loop.connections;
  j["ratio_to_closed_loop_ceiling"] = Round(run.put.cells_per_s / closed, 3);
  const double batch_closed = run.batch_closed_loop.best.median_rows_per_s;
  j["batch_closed_loop_ceiling_rows_per_s"] = Round(batch_closed, 1);
  j["batch_closed_loop_ceiling_ratio"] = Round(batch_closed / raw, 3);
  j["batch_closed_loop_rows_per_transaction"] = run.batch_closed_loop.rows_per_tx;
  j["batch_closed_loop_connections"] = run.batch_closed_loop.connections;
  j["batch_ratio_to_closed_loop_ceiling"] = Round(run.batch.cells_per_s / batch_closed, 3);
  j["warm_up_cells"] = o.warm_up_cells;
  j["store_rounds"] = o.store_rounds;
  if (run.async.ran) {
    j["async_window"] = o.async_window;
    j["async_cells_per_s"] = Round(run.async.cells_per_s, 1);
    j["async_ratio"] = Round(run.async.cells_per_s / raw, 3);
    j["async_p50_ms"] = Round(run.async.p50, 3);
    j["async_p99_ms"] = Round(run.async.p99, 3);
    j["async_cells_per_transaction"] = Round(CellsPerTransaction(run.async.r), 2);
    if (run.single)
      j["async_single_row_ratio"] = Round(run.async.cells_per_s / SingleRowRate(run), 3);
  }
  if (!run.designs.empty()) j["closed_loop_designs"] = ClosedLoopDesignsJson(run.designs, raw);
  j["targets_met"] = met;
  j["errors"] = put.errors + run.batch.r.errors + run.half.r.errors + run.async.r.errors;
  PrintJsonLine(j);
}

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

  PrintTable(cluster, o, run);
  PrintJson(cluster, o, run);
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
  cmd->callback([o, exit_code] { *exit_code = RunPut(*o); });
}

}  // namespace cellar::bench
