// The table and the closing JSON line of `cellar-bench pipeline` (see
// bench_pipeline.cc).
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_pipeline.h"

namespace cellar::bench::pipeline {
namespace {

constexpr double kTargetRatio = 0.25;

std::string Ms(const Quantiles& q) {
  return FormatNumber(q.p50, 1) + " / " + FormatNumber(q.p99, 1) + " / " + FormatNumber(q.max, 1) +
         " (" + std::to_string(q.count) + " cells)";
}

std::string LagText(const LagTrend& l) {
  return FormatNumber(l.first_third, 0) + " -> " + FormatNumber(l.last_third, 0) + " (max " +
         FormatNumber(l.max, 0) + "): " + (l.grows ? "grows" : "flat");
}

nlohmann::ordered_json LagJson(const LagTrend& l) {
  return {{"first_third", Round(l.first_third, 1)},
          {"last_third", Round(l.last_third, 1)},
          {"max", Round(l.max, 1)},
          {"grows", l.grows}};
}

// "Produce 200, Fetch 75, ..." from per-write figures, per 1,000 writes;
// what rounds to 0 is left out.
std::string PerThousandText(const std::vector<std::pair<std::string, double>>& per_write) {
  std::string text;
  for (const auto& [key, n] : per_write)
    if (const std::string shown = FormatNumber(1e3 * n, 0); shown != "0")
      text += (text.empty() ? "" : ", ") + key + " " + shown;
  return text;
}

// "relay 0.61, triggers 0.9, ..." from per-write figures.
std::string PerWriteText(const std::vector<std::pair<std::string, double>>& per_write) {
  std::string text;
  for (const auto& [key, n] : per_write)
    text += (text.empty() ? "" : ", ") + key + " " + FormatNumber(n, 2);
  return text;
}

// {key: value rounded to `digits`} of (key, value) pairs; Json decides the
// key order (nlohmann::json sorts them, ordered_json keeps the pairs').
template <typename Json>
Json RoundedObject(const std::vector<std::pair<std::string, double>>& pairs, int digits) {
  Json object = Json::object();
  for (const auto& [key, n] : pairs) object[key] = Round(n, digits);
  return object;
}

nlohmann::ordered_json StepJson(const StepFigures& s) {
  nlohmann::ordered_json j;
  j["rate"] = s.rate;
  j["achieved"] = Round(s.achieved, 1);
  j["ok"] = s.ok;
  j["errors"] = s.errors;
  j["put_p99_ms"] = Round(s.put_p99, 3);
  j["index_p50_ms"] = Round(s.index.p50, 3);
  j["index_p99_ms"] = Round(s.index.p99, 3);
  j["index_samples"] = s.index.count;
  j["not_visible"] = s.not_visible;
  j["trigger_p50_ms"] = Round(s.handler.p50, 3);
  j["trigger_p99_ms"] = Round(s.handler.p99, 3);
  j["webhook_p50_ms"] = Round(s.webhook.p50, 3);
  j["webhook_p99_ms"] = Round(s.webhook.p99, 3);
  j["relay_lag"] = LagJson(s.relay_lag);
  j["index_lag"] = LagJson(s.index_lag);
  j["trigger_lag"] = LagJson(s.handler_lag);
  j["webhook_lag"] = LagJson(s.webhook_lag);
  j["index_queries"] = s.index_queries;
  j["cpu_busy"] = Round(s.cpu_busy, 3);
  j["cpu_ms_per_write_mariadb"] = Round(s.cpu_ms_mariadb, 3);
  j["cpu_ms_per_write_broker"] = Round(s.cpu_ms_broker, 3);
  j["cpu_ms_per_write_process"] = Round(s.cpu_ms_process, 3);
  j["cpu_ms_per_write_by_threads"] = RoundedObject<nlohmann::json>(s.cpu_ms_by_threads, 3);
  if (s.broker_ms_per_s_first_third && s.broker_ms_per_s_last_third) {
    j["broker_cpu_ms_per_s_first_third"] = Round(*s.broker_ms_per_s_first_third, 1);
    j["broker_cpu_ms_per_s_last_third"] = Round(*s.broker_ms_per_s_last_third, 1);
  }
  j["cpu_ms_per_write_machine"] = Round(s.cpu_ms_machine, 3);
  j["cpu_ms_per_write_harness"] = Round(s.cpu_ms_harness, 3);
  if (s.cpu_ms_mariadb_harness)
    j["cpu_ms_per_write_mariadb_harness"] = Round(*s.cpu_ms_mariadb_harness, 3);
  j["cpu_ms_per_write_broker_jit"] = Round(s.cpu_ms_broker_jit, 3);
  if (!s.statements_by_kind.empty())
    j["sql_statements_per_write_by_kind"] = RoundedObject<nlohmann::json>(s.statements_by_kind, 3);
  if (s.statements_per_write) {
    j["sql_statements_per_write"] = Round(*s.statements_per_write, 3);
    j["sql_commits_per_write"] = Round(*s.commits_per_write, 3);
    j["innodb_fsyncs_per_write"] = Round(*s.fsyncs_per_write, 3);
    j["statement_prepares_per_s"] = Round(*s.prepares_per_s, 1);
  }
  if (!s.sql_statements_by_threads.empty()) {
    j["sql_statements_per_write_by_threads"] =
        RoundedObject<nlohmann::ordered_json>(s.sql_statements_by_threads, 3);
    j["sql_commits_per_write_by_threads"] =
        RoundedObject<nlohmann::ordered_json>(s.sql_commits_by_threads, 3);
  }
  if (s.relay_transactions_per_write)
    j["relay_transactions_per_write"] = Round(*s.relay_transactions_per_write, 4);
  if (s.wake_ups_mariadb) j["wake_ups_per_write_mariadb"] = Round(*s.wake_ups_mariadb, 2);
  if (s.wake_ups_broker) j["wake_ups_per_write_broker"] = Round(*s.wake_ups_broker, 2);
  j["wake_ups_per_write_process"] = Round(s.wake_ups_process, 2);
  j["wake_ups_per_write_by_threads"] = RoundedObject<nlohmann::json>(s.wake_ups_by_threads, 2);
  if (!s.records_decoded_by_stage.empty())
    j["records_decoded_per_write_by_stage"] =
        RoundedObject<nlohmann::ordered_json>(s.records_decoded_by_stage, 3);
  if (s.kafka_requests_per_write) {
    j["kafka_requests_per_write"] = Round(*s.kafka_requests_per_write, 3);
    j["kafka_requests_per_write_by_type"] =
        RoundedObject<nlohmann::ordered_json>(s.kafka_requests_by_type, 4);
  }
  j["drain_s"] = Round(s.drain_s, 3);
  j["sustained"] = s.sustained;
  if (!s.sustained) j["why"] = s.verdict;
  return j;
}

}  // namespace

int PrintPipelineReport(const PipelineRun& r) {
  const PipelineBenchOptions& o = r.o;
  const ClusterConfig& cfg = r.cluster.config;
  const StepFigures* best = nullptr;
  uint64_t errors = 0;
  for (const StepFigures& s : r.steps) {
    errors += s.errors;
    if (s.sustained) best = &s;
  }
  const double sustained = best ? best->rate : 0;
  const double ratio = r.raw.rows_per_s > 0 ? sustained / r.raw.rows_per_s : 0;
  const double ratio_to_sql = r.sql.writes_per_s > 0 ? sustained / r.sql.writes_per_s : 0;
  const StepFigures* at_1000 = nullptr;
  std::string at_1000_from;
  for (const StepFigures& s : r.steps)
    if (s.rate == 1000 && s.cpu_busy > 0) {
      at_1000 = &s;
      at_1000_from = "step";
    }
  if (!at_1000 && r.load_warm_up_last && r.load_warm_up_last->rate == 1000 &&
      r.load_warm_up_last->cpu_busy > 0) {
    at_1000 = &*r.load_warm_up_last;
    at_1000_from = "load warm-up round";
  }

  Table t("cellar-bench pipeline");
  t.Section("settings");
  DescribeCluster(r.cluster, t);
  t.Add("kafka", DescribeKafka(r.broker, cfg.kafka.brokers));
  t.Add("kafka.partitions", std::to_string(cfg.kafka.partitions));
  t.Add("relay.poll_min_ms / poll_max_ms",
        std::to_string(cfg.relay.poll_min_ms) + " / " + std::to_string(cfg.relay.poll_max_ms));
  {
    const IndexWorkerOptions defaults;
    t.Add(
        "index lanes per host / batch linger ms / lanes shared below",
        std::to_string(o.index_lanes > 0 ? o.index_lanes : defaults.lanes_per_host) + " / " +
            std::to_string(o.index_linger_ms >= 0 ? o.index_linger_ms : defaults.batch_linger_ms) +
            " / " +
            std::to_string(o.index_lane_share_below >= 0 ? o.index_lane_share_below
                                                         : defaults.lane_share_below) +
            " events");
  }
  t.Add("stages (this process)",
        "relay; IndexWorker (" + std::string(kIndexName) + "); no-op trigger (concurrency " +
            std::to_string(o.trigger_concurrency) + "); webhook trigger to an in-process sink");
  t.Add("webhook batch_size / batch_window_ms",
        std::to_string(o.webhook_batch_size) + " / " + std::to_string(o.webhook_batch_window_ms));
  t.Add("writers", std::to_string(o.writer_threads) + " threads pacing PutAsync, window " +
                       std::to_string(o.window) + ", one trip cell per put (~" +
                       std::to_string(o.body_bytes) + " bytes + index fields)");
  t.Add("step duration", FormatNumber(o.step_seconds, 1) + " s");
  t.Add("index visibility", std::to_string(o.visibility_per_s) + " sampled puts/s, " +
                                std::to_string(o.pollers) + " pollers every " +
                                std::to_string(o.poll_ms) + " ms");
  t.Add("lag", "acked cells minus events a stage finished, sampled every " +
                   FormatNumber(o.lag_sample_ms, 0) +
                   " ms; grows = mean of the last third of the writes > mean of the first third "
                   "+ max(50, 0.1 s x rate)");
  t.Add("sustained when",
        "index, trigger and webhook p99 < 100 ms, no lag grows, achieved >= 95% "
        "of the target, no errors, nothing missing");
  t.Add("warm-up (first put seen by every stage)", FormatNumber(r.warmup_s, 2) + " s");
  t.Add("load warm-up (until the broker's JIT compiler settles)",
        r.load_warm_up_rounds == 0
            ? std::string("none")
            : std::to_string(r.load_warm_up_rounds) + " rounds of " +
                  FormatNumber(o.warm_up_round_s, 0) + " s at " + FormatNumber(o.warm_up_rate, 0) +
                  " writes/s (" + FormatNumber(r.load_warm_up_s, 0) +
                  " s); JIT compiler in the last round: " +
                  FormatNumber(100 * r.load_warm_up_last_jit_share, 1) + " % of a core");
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepFigures& s = r.steps[i];
    t.Section("step " + std::to_string(i + 1) + ": " + FormatNumber(s.rate, 0) + " writes/s");
    t.Add("achieved writes/s", FormatNumber(s.achieved, 0) + " (" + std::to_string(s.ok) + " ok, " +
                                   std::to_string(s.errors) + " failed in " +
                                   FormatNumber(s.seconds, 2) + " s; " +
                                   std::to_string(s.window_waits) + " waited for the window)" +
                                   (s.errors ? " first error: " + s.first_error : ""));
    t.Add("put (PutAsync to answer) p50 / p99 ms",
          FormatNumber(s.put_p50, 1) + " / " + FormatNumber(s.put_p99, 1));
    t.Add("commit-ack to index-visible p50 / p99 / max ms",
          Ms(s.index) + (s.not_visible ? ", " + std::to_string(s.not_visible) + " not visible"
                                       : std::string()));
    t.Add("index visibility queries",
          std::to_string(s.index_queries) + " (" +
              FormatNumber(s.index_queries / std::max(s.seconds, 1e-9), 0) + "/s)");
    t.Add("commit-ack to no-op handler p50 / p99 / max ms",
          Ms(s.handler) + (s.handler_missing ? ", " + std::to_string(s.handler_missing) + " missing"
                                             : std::string()));
    t.Add("commit-ack to webhook sink p50 / p99 / max ms",
          Ms(s.webhook) + (s.webhook_missing ? ", " + std::to_string(s.webhook_missing) + " missing"
                                             : std::string()));
    t.Add("relay lag, events (first -> last third)", LagText(s.relay_lag));
    t.Add("index lag, events", LagText(s.index_lag));
    t.Add("no-op trigger lag, events", LagText(s.handler_lag));
    t.Add("webhook trigger lag, events", LagText(s.webhook_lag));
    t.Add("CPU busy (this process with the broker + MariaDB)",
          s.cpu_busy > 0 ? FormatNumber(100 * s.cpu_busy, 0) + " % of all cores" : "n/a");
    if (s.cpu_busy > 0) {
      t.Add("CPU ms per write, whole machine without the harness (MariaDB + broker + Cellar)",
            FormatNumber(s.cpu_ms_machine, 3) +
                " (target at 1,000 writes/s <= " + FormatNumber(kTargetCpuMsPerWriteAt1000, 1) +
                "; harness: " + FormatNumber(s.cpu_ms_harness, 3) +
                (s.cpu_ms_mariadb_harness
                     ? " in this process, " + FormatNumber(*s.cpu_ms_mariadb_harness, 3) +
                           " in MariaDB"
                     : std::string(" in this process; in MariaDB not told apart")) +
                ", the broker's JIT compiler: " + FormatNumber(s.cpu_ms_broker_jit, 3) + ")");
    }
    if (s.cpu_busy > 0)
      t.Add("CPU ms per write: MariaDB / broker / rest of this process",
            FormatNumber(s.cpu_ms_mariadb, 3) + " / " + FormatNumber(s.cpu_ms_broker, 3) + " / " +
                FormatNumber(s.cpu_ms_process, 3) +
                " (rest: Cellar's stages, the writers, the webhook sink, the probes)");
    if (s.broker_ms_per_s_first_third && s.broker_ms_per_s_last_third)
      t.Add("local broker CPU ms/s, first / last third",
            FormatNumber(*s.broker_ms_per_s_first_third, 0) + " / " +
                FormatNumber(*s.broker_ms_per_s_last_third, 0) +
                " (its batch lookup walks each partition's log: docs/design.md, The broker)");
    if (!s.cpu_ms_by_threads.empty()) {
      std::string keys, values;
      for (const auto& [key, ms] : s.cpu_ms_by_threads) {
        keys += (keys.empty() ? "" : " / ") + key;
        values += (values.empty() ? "" : " / ") + FormatNumber(ms, 3);
      }
      t.Add("CPU ms per write of this process by thread: " + keys, values);
    }
    if (s.statements_per_write) {
      t.Add("MariaDB per write: SQL statements / COMMITs / InnoDB fsyncs",
            FormatNumber(*s.statements_per_write, 2) + " / " +
                FormatNumber(*s.commits_per_write, 2) + " / " +
                FormatNumber(*s.fsyncs_per_write, 2));
      t.Add("statement prepares per s", FormatNumber(*s.prepares_per_s, 1));
      std::string keys, values;
      for (const auto& [key, n] : s.statements_by_kind) {
        keys += (keys.empty() ? "" : " / ") + key;
        values += (values.empty() ? "" : " / ") + FormatNumber(n, 2);
      }
      if (!keys.empty()) t.Add("MariaDB statements per write: " + keys, values);
    }
    if (!s.sql_statements_by_threads.empty()) {
      t.Add("SQL statements per write this process sent, by thread",
            PerWriteText(s.sql_statements_by_threads));
      t.Add("COMMITs per write this process sent, by thread",
            PerWriteText(s.sql_commits_by_threads));
    }
    if (s.relay_transactions_per_write)
      t.Add("relay Kafka transactions per 1,000 writes",
            FormatNumber(1e3 * *s.relay_transactions_per_write, 1));
    if (!s.records_decoded_by_stage.empty())
      t.Add("change-log records decoded per write, by consumer",
            PerWriteText(s.records_decoded_by_stage));
    if (s.kafka_requests_per_write)
      t.Add("Kafka requests per 1,000 writes, as the broker counted them",
            FormatNumber(1e3 * *s.kafka_requests_per_write, 0) + " (" +
                PerThousandText(s.kafka_requests_by_type) + ")");
    if (!s.wake_ups_by_threads.empty()) {
      std::string servers;
      if (s.wake_ups_mariadb) servers += "MariaDB " + FormatNumber(*s.wake_ups_mariadb, 2);
      if (s.wake_ups_broker)
        servers += (servers.empty() ? "" : ", ") + std::string("broker ") +
                   FormatNumber(*s.wake_ups_broker, 2);
      t.Add("wake-ups per write (voluntary context switches)",
            servers + (servers.empty() ? "" : ", ") + "this process " +
                FormatNumber(s.wake_ups_process, 2) + ": " + PerWriteText(s.wake_ups_by_threads));
    }
    t.Add("every stage caught up after the writes in",
          s.drained ? FormatNumber(s.drain_s, 2) + " s" : "not within the drain timeout");
    t.Add("verdict", s.sustained ? "sustained" : "not sustained: " + s.verdict);
  }
  t.Section("throughput from a backlog (each stage alone, first to N-th event)");
  if (!r.drain.failure.empty()) t.Add("failed", r.drain.failure);
  if (r.drain.cells > 0) {
    t.Add("backlog (PutBatch, stages stopped)",
          std::to_string(r.drain.cells) + " cells in " + FormatNumber(r.drain.write_s, 2) + " s");
    t.Add("relay events/s", FormatNumber(r.drain.relay_per_s, 0) + " (first event after " +
                                FormatNumber(r.drain.relay_first_s, 2) + " s)");
    t.Add("index upserts/s", FormatNumber(r.drain.index_per_s, 0) + " (first after " +
                                 FormatNumber(r.drain.index_first_s, 2) + " s, group join)");
    t.Add("no-op trigger events/s", FormatNumber(r.drain.trigger_per_s, 0) + " (first after " +
                                        FormatNumber(r.drain.trigger_first_s, 2) +
                                        " s, group join)");
  } else {
    t.Add("skipped", "--drain-cells 0");
  }
  t.Section("result");
  t.Add("raw 100-row INSERT rows/s (baseline, median round)",
        FormatNumber(r.raw.rows_per_s, 0) + " (" + std::to_string(r.raw.rates.size()) +
            " rounds of " + std::to_string(o.raw_rows) + " rows, " +
            std::to_string(o.raw_connections) + " connections per host)");
  if (r.sql.measured) {
    const double sql_ratio = r.raw.rows_per_s > 0 ? r.sql.writes_per_s / r.raw.rows_per_s : 0;
    t.Add("plain-SQL ceiling writes/s (the stages' SQL alone, median round)",
          FormatNumber(r.sql.writes_per_s, 0) + " = " + FormatNumber(sql_ratio, 3) +
              " x raw (per " + std::to_string(kSqlCeilingBatch) +
              " writes: the put INSERT, the index worker's transaction; per 1,000: the relay's)");
    t.Add("plain-SQL ceiling CPU us per write: client / server",
          FormatNumber(r.sql.client_us_per_write, 1) + " / " +
              FormatNumber(r.sql.server_us_per_write, 1) + " (CPU busy " +
              FormatNumber(100 * r.sql.cpu_busy, 0) + " % of the cores)");
  } else {
    t.Add("plain-SQL ceiling", "skipped: " + r.sql.skipped);
  }
  t.Add("sustained writes/s", best ? FormatNumber(sustained, 0) : "none (the first step failed)");
  t.Add("ratio to the plain-SQL ceiling (sustained / ceiling)",
        r.sql.writes_per_s > 0
            ? FormatNumber(ratio_to_sql, 3) +
                  " (target >= " + FormatNumber(kTargetRatioToSqlCeiling, 1) +
                  (ratio_to_sql >= kTargetRatioToSqlCeiling ? ", met)" : ", missed)")
            : std::string("n/a (no ceiling measured)"));
  t.Add("CPU ms per write at 1,000 writes/s, whole machine",
        at_1000
            ? FormatNumber(at_1000->cpu_ms_machine, 3) + " (from the " + at_1000_from +
                  "; target <= " + FormatNumber(kTargetCpuMsPerWriteAt1000, 1) +
                  (at_1000->cpu_ms_machine <= kTargetCpuMsPerWriteAt1000 ? ", met)" : ", missed)")
            : std::string("n/a (no step at 1,000 writes/s ran)"));
  t.Add("ratio (sustained / raw)", FormatNumber(ratio, 3) +
                                       " (target >= " + FormatNumber(kTargetRatio, 2) +
                                       (ratio >= kTargetRatio ? ", met)" : ", missed)"));
  if (best) {
    t.Add("at the sustained step: index / trigger / webhook p99 ms",
          FormatNumber(best->index.p99, 1) + " / " + FormatNumber(best->handler.p99, 1) + " / " +
              FormatNumber(best->webhook.p99, 1));
  }
  t.Print();

  nlohmann::ordered_json j;
  j["bench"] = "pipeline";
  AddBrokerKeys(j, r.broker);
  j["sustained_writes_per_s"] = sustained;
  j["raw_rows_per_s"] = Round(r.raw.rows_per_s, 1);
  j["ratio"] = Round(ratio, 3);
  j["target_ratio"] = kTargetRatio;
  j["ratio_ok"] = ratio >= kTargetRatio;
  j["index_p50_ms"] = best ? Round(best->index.p50, 3) : 0;
  j["index_p99_ms"] = best ? Round(best->index.p99, 3) : 0;
  j["trigger_p50_ms"] = best ? Round(best->handler.p50, 3) : 0;
  j["trigger_p99_ms"] = best ? Round(best->handler.p99, 3) : 0;
  j["webhook_p50_ms"] = best ? Round(best->webhook.p50, 3) : 0;
  j["webhook_p99_ms"] = best ? Round(best->webhook.p99, 3) : 0;
  j["relay_events_per_s"] = Round(r.drain.relay_per_s, 1);
  j["index_upserts_per_s"] = Round(r.drain.index_per_s, 1);
  j["trigger_events_per_s"] = Round(r.drain.trigger_per_s, 1);
  j["throughput_from"] = "backlog";
  j["backlog_cells"] = r.drain.cells;
  j["throughput_failure"] =
      r.drain.failure.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.drain.failure);
  j["step_seconds"] = o.step_seconds;
  j["put_threads"] = o.writer_threads;
  j["window"] = o.window;
  j["shards"] = cfg.shards;
  j["partitions"] = cfg.kafka.partitions;
  j["concurrency"] = o.trigger_concurrency;
  j["webhook_batch_size"] = o.webhook_batch_size;
  j["webhook_batch_window_ms"] = o.webhook_batch_window_ms;
  j["sql_ceiling_writes_per_s"] = Round(r.sql.writes_per_s, 1);
  j["sql_ceiling_ratio"] =
      r.raw.rows_per_s > 0 ? Round(r.sql.writes_per_s / r.raw.rows_per_s, 3) : 0;
  j["sql_ceiling_client_us_per_write"] = Round(r.sql.client_us_per_write, 1);
  j["sql_ceiling_server_us_per_write"] = Round(r.sql.server_us_per_write, 1);
  j["sql_ceiling_cpu_busy"] = Round(r.sql.cpu_busy, 3);
  j["ratio_to_sql_ceiling"] = Round(ratio_to_sql, 3);
  j["target_ratio_to_sql_ceiling"] = kTargetRatioToSqlCeiling;
  j["cpu_ms_per_write_at_1000"] = at_1000
                                      ? nlohmann::ordered_json(Round(at_1000->cpu_ms_machine, 3))
                                      : nlohmann::ordered_json();
  j["cpu_ms_per_write_at_1000_from"] =
      at_1000 ? nlohmann::ordered_json(at_1000_from) : nlohmann::ordered_json();
  j["target_cpu_ms_per_write_at_1000"] = kTargetCpuMsPerWriteAt1000;
  j["load_warm_up_rounds"] = r.load_warm_up_rounds;
  j["load_warm_up_s"] = Round(r.load_warm_up_s, 1);
  j["errors"] = errors;
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const StepFigures& s : r.steps) steps.push_back(StepJson(s));
  j["steps"] = steps;
  PrintJsonLine(j);
  return errors || !r.drain.failure.empty() ? 1 : 0;
}

}  // namespace cellar::bench::pipeline
