// The end of `cellar-bench index` (see bench_index.cc): the table of every
// phase's figures on stdout, then the closing JSON line.
#include <algorithm>
#include <string>
#include <thread>

#include "bench/bench_common.h"
#include "bench/bench_index_phases.h"
#include "indexes/index_worker.h"

namespace cellar::bench::index_phases {

int PrintIndexReport(const IndexBenchRun& b, const BenchBroker* broker, const LagFigures& lag,
                     const UpsertFigures& upsert, const QueryFigures& query) {
  const IndexBenchOptions& o = b.o;
  const BenchCluster& cluster = b.cluster;
  const ClusterConfig& cfg = b.cfg;
  const int query_version = b.query_version;
  Table t("cellar-bench index");
  t.Section("settings");
  DescribeCluster(cluster, t);
  t.Add("kafka", DescribeKafka(broker, cfg.kafka.brokers));
  t.Add("kafka.partitions", std::to_string(cfg.kafka.partitions));
  t.Add("relay.poll_min_ms / poll_max_ms",
        std::to_string(cfg.relay.poll_min_ms) + " / " + std::to_string(cfg.relay.poll_max_ms));
  t.Add("indexes", std::string(kLiveIndex) + " (worker), " + kQueryIndex + " v" +
                       std::to_string(query_version) + " (direct)");
  t.Add("fields",
        "driver_uuid UUID (shard field), city string, requested_at datetime, "
        "fare.total float");
  t.Add("index worker concurrency", std::to_string(IndexWorkerOptions{}.concurrency));
  t.Section("phase A: write-commit to query-visible lag");
  t.Add("warm-up (first entry visible, group join, worker caught up)",
        FormatNumber(lag.warmup_s, 2) + " s");
  t.Add("target rate", FormatNumber(o.rate, 0) + " writes/s for " + FormatNumber(o.seconds, 1) +
                           " s (" + std::to_string(o.paced_threads) + " paced writer threads)");
  t.Add("writes", std::to_string(lag.writes - static_cast<int64_t>(lag.put_errors)) + " ok, " +
                      std::to_string(lag.put_errors) + " failed");
  t.Add("achieved rate", FormatNumber(lag.achieved, 1) + " writes/s (" +
                             std::to_string(lag.paced.late) + " started > 10 ms late)");
  t.Add("put latency p50 / p99 ms",
        FormatNumber(lag.put_p50, 2) + " / " + FormatNumber(lag.put_p99, 2));
  t.Add("sampled puts (every " + std::to_string(o.sample_every) + "th)",
        std::to_string(lag.samples) + " visible, " + std::to_string(lag.not_visible) +
            " not within 10 s; " + std::to_string(o.pollers) +
            " pollers query each pending "
            "sample every " +
            std::to_string(o.poll_ms) + " ms (" +
            FormatNumber(lag.samples ? static_cast<double>(lag.total_polls) / lag.samples : 0, 1) +
            " queries per sample)");
  t.Add("txn-start (created_at) to visible p50 ms", FormatNumber(lag.lag_p50, 2));
  t.Add("txn-start (created_at) to visible p99 ms", FormatNumber(lag.lag_p99, 2));
  t.Add("txn-start (created_at) to visible max ms", FormatNumber(lag.lag_max, 2));
  t.Add("commit-ack to visible p50 / p99 ms",
        FormatNumber(lag.ack_p50, 2) + " / " + FormatNumber(lag.ack_p99, 2) +
            (lag.ack_p99 < kTargetP99Ms ? " (meets" : " (MISSES") + " the target < " +
            FormatNumber(kTargetP99Ms, 0) + " ms p99)");
  t.Add("commit-ack to visible max ms", FormatNumber(lag.ack_max, 2));
  t.Add("visible before their put returned", "0 observable (polling starts when Put returns); " +
                                                 std::to_string(lag.first_poll_visible) + " of " +
                                                 std::to_string(lag.samples) +
                                                 " visible on their first query");
  t.Add("bare consumer: txn-start to consume p50 / p99 ms",
        FormatNumber(lag.tap_p50, 2) + " / " + FormatNumber(lag.tap_p99, 2) + " (" +
            std::to_string(lag.tap_events) + " events of the same cells)");
  t.Add("bare consumer: commit-ack to consume p50 / p99 ms",
        FormatNumber(lag.tap_ack_p50, 2) + " / " + FormatNumber(lag.tap_ack_p99, 2) + " (" +
            std::to_string(lag.tap_arrived_before_ack) +
            " arrived before their put returned; relay + Kafka, the rest is the worker)");
  if (lag.server_cpu_before && lag.server_cpu_after) {
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    t.Add("CPU busy, client + server",
          FormatNumber(100.0 * (lag.client_cpu + *lag.server_cpu_after - *lag.server_cpu_before) /
                           (lag.paced.seconds * cores),
                       0) +
              " % of " + FormatNumber(cores, 0) + " cores");
  }
  t.Add("worker histogram p50 / p99 (phase A writes)",
        "<= " + FormatNumber(lag.worker_p50, 1) + " / <= " + FormatNumber(lag.worker_p99, 1) +
            " ms (bucket upper bounds, txn-start (created_at) to entry written)");
  t.Section("phase B: index-entry upserts (IndexWriter)");
  t.Add("group apply: cells", std::to_string(upsert.batch_cells) + " in " +
                                  std::to_string(upsert.lanes) + " lanes (one thread each), " +
                                  "ApplyBatch of " + std::to_string(upsert.max_batch) + " at most");
  t.Add("group apply: seconds", FormatNumber(upsert.batch_s, 3));
  t.Add("group apply: upserts/s", FormatNumber(upsert.upserts_per_s, 0));
  t.Add("group apply: ApplyBatch p50 / p99 ms",
        FormatNumber(upsert.batch_p50, 2) + " / " + FormatNumber(upsert.batch_p99, 2));
  t.Add("put rate of this cluster (32 callers, single puts)",
        FormatNumber(upsert.put_rate, 0) + " cells/s" +
            (upsert.put_errors ? " (" + std::to_string(upsert.put_errors) + " failed)" : ""));
  t.Add("put_rate_ratio (group apply upserts/s / put rate)",
        FormatNumber(upsert.put_rate_ratio, 3) + " (issue 16 target >= 1.5)");
  t.Add("single apply: cells", std::to_string(upsert.cells) + " from " +
                                   std::to_string(o.apply_threads) + " threads (" +
                                   std::to_string(upsert.apply_errors) + " errors in phase B)");
  t.Add("single apply: upserts/s", FormatNumber(upsert.single_upserts_per_s, 0));
  t.Add("single apply: Apply latency p50 / p99 ms",
        FormatNumber(upsert.apply_p50, 2) + " / " + FormatNumber(upsert.apply_p99, 2));
  t.Add("one autocommit upsert p50 ms",
        FormatNumber(upsert.flush_p50, 2) + " (redo-log flush; an Apply commits twice)");
  t.Section("phase C: queries on an index of " + FormatNumber(o.entries, 0) + " entries");
  t.Add("entries", FormatNumber(static_cast<double>(query.load_rows), 0) +
                       " bulk-loaded DIRECTLY into the entry tables (multi-row INSERT, not the "
                       "change log)");
  t.Add("bulk load", FormatNumber(query.load_seconds, 2) + " s (" +
                         FormatNumber(query.load_rows / query.load_seconds, 0) + " rows/s, " +
                         std::to_string(o.rows_per_insert) + " rows per INSERT, " +
                         std::to_string(o.load_connections) + " connections per host)");
  t.Add("private server memory", query.server_memory);
  t.Add("bulk load CPU, client / server",
        FormatNumber(query.load_client_cpu, 1) + " s / " +
            (query.load_server_before && query.load_server_after
                 ? FormatNumber(*query.load_server_after - *query.load_server_before, 1) + " s"
                 : std::string("n/a")));
  t.Add("drivers", std::to_string(o.drivers) + " (" +
                       FormatNumber(static_cast<double>(o.entries) / o.drivers, 0) +
                       " entries each), 8 cities, requested_at over 30 days");
  t.Add("query", "driver = ?, city = ?, requested_at >= now - " + std::to_string(o.query_days) +
                     " d, newest first, limit 100");
  t.Add("queries", std::to_string(query.timed) + " timed after " + std::to_string(query.warmup) +
                       " warm-up; " + FormatNumber(query.mean_hits, 1) + " hits each (mean); " +
                       std::to_string(query.mismatches) + " result-size mismatches, " +
                       std::to_string(query.query_errors) + " errors");
  t.Add("IndexReader::Query p50 / p99 ms",
        FormatNumber(query.q_p50, 3) + " / " + FormatNumber(query.q_p99, 3));
  t.Add("raw SQL (MysqlConnection) p50 / p99 ms",
        FormatNumber(query.raw_p50, 3) + " / " + FormatNumber(query.raw_p99, 3));
  t.Add("ratio (raw p50 / IndexReader p50)", FormatNumber(query.ratio, 3));
  t.Print();

  nlohmann::ordered_json j;
  j["bench"] = "index";
  AddBrokerKeys(j, broker);
  j["p50_ms"] = Round(lag.lag_p50, 3);
  j["p99_ms"] = Round(lag.lag_p99, 3);
  j["max_ms"] = Round(lag.lag_max, 3);
  j["ack_p50_ms"] = Round(lag.ack_p50, 3);
  j["ack_p99_ms"] = Round(lag.ack_p99, 3);
  j["ack_max_ms"] = Round(lag.ack_max, 3);
  j["arrived_before_ack"] = 0;  // not observable: polling starts when Put returns
  j["visible_at_first_poll"] = lag.first_poll_visible;
  j["target_p99_ms"] = kTargetP99Ms;
  j["p99_ok"] = lag.lag_p99 < kTargetP99Ms;
  j["lag_samples"] = lag.samples;
  j["not_visible"] = lag.not_visible;
  j["consume_p50_ms"] = Round(lag.tap_p50, 3);
  j["consume_p99_ms"] = Round(lag.tap_p99, 3);
  j["consume_ack_p50_ms"] = Round(lag.tap_ack_p50, 3);
  j["consume_ack_p99_ms"] = Round(lag.tap_ack_p99, 3);
  j["worker_lag_p50_ms_bucket"] = lag.worker_p50;
  j["worker_lag_p99_ms_bucket"] = lag.worker_p99;
  j["rate"] = o.rate;
  j["achieved_rate"] = Round(lag.achieved, 1);
  j["upserts_per_s"] = Round(upsert.upserts_per_s, 1);
  j["apply_p50_ms"] = Round(upsert.apply_p50, 3);
  j["single_apply_upserts_per_s"] = Round(upsert.single_upserts_per_s, 1);
  j["batch_p50_ms"] = Round(upsert.batch_p50, 3);
  j["batch_p99_ms"] = Round(upsert.batch_p99, 3);
  j["put_rate"] = Round(upsert.put_rate, 1);
  j["put_rate_ratio"] = Round(upsert.put_rate_ratio, 3);
  j["entries"] = query.load_rows;
  j["bulk_loaded"] = true;
  j["bulk_rows_per_s"] = Round(query.load_rows / query.load_seconds, 1);
  j["query_p50_ms"] = Round(query.q_p50, 3);
  j["query_p99_ms"] = Round(query.q_p99, 3);
  j["baseline_query_p50_ms"] = Round(query.raw_p50, 3);
  j["baseline_query_p99_ms"] = Round(query.raw_p99, 3);
  j["ratio"] = Round(query.ratio, 3);
  j["mean_hits"] = Round(query.mean_hits, 2);
  j["shards"] = cfg.shards;
  j["errors"] = lag.put_errors + upsert.apply_errors + query.query_errors;
  PrintJsonLine(j);
  return lag.put_errors || upsert.apply_errors || query.query_errors || lag.not_visible ? 1 : 0;
}

}  // namespace cellar::bench::index_phases
