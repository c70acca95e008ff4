// The table and JSON line of `cellar-bench put` (bench_put_run.h).
#include <string>

#include "bench/bench_put_run.h"

namespace cellar::bench {
namespace {

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

// The closed-loop ceiling's keys, each behind `prefix` ("" for phase C',
// "batch_" for phase D'), with the store phase's cells/s against it.
void AddClosedLoopJson(nlohmann::ordered_json& j, const std::string& prefix,
                       const ClosedLoopCeiling& c, double cells_per_s, double raw) {
  const double closed = c.best.median_rows_per_s;
  j[prefix + "closed_loop_ceiling_rows_per_s"] = Round(closed, 1);
  j[prefix + "closed_loop_ceiling_ratio"] = Round(closed / raw, 3);
  j[prefix + "closed_loop_rows_per_transaction"] = c.rows_per_tx;
  j[prefix + "closed_loop_connections"] = c.connections;
  j[prefix + "ratio_to_closed_loop_ceiling"] = Round(cells_per_s / closed, 3);
}

}  // namespace

void PrintPutTable(const BenchCluster& cluster, const PutOptions& o, const PutRun& run) {
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
  AddBareGroupCommitRows(t, run.bare, run.closed_loop.best.median_rows_per_s, run.put.cells_per_s);
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

void PrintPutJson(const BenchCluster& cluster, const PutOptions& o, const PutRun& run) {
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
  AddClosedLoopJson(j, "", run.closed_loop, run.put.cells_per_s, raw);
  AddClosedLoopJson(j, "batch_", run.batch_closed_loop, run.batch.cells_per_s, raw);
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
  if (!run.bare.empty())
    j["bare_group_commit"] =
        BareGroupCommitJson(run.bare, run.closed_loop.best.median_rows_per_s, run.put.cells_per_s);
  j["targets_met"] = met;
  j["errors"] = put.errors + run.batch.r.errors + run.half.r.errors + run.async.r.errors;
  PrintJsonLine(j);
}

}  // namespace cellar::bench
