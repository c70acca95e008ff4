#include "bench/bench_all_figures.h"

#include <optional>

#include "bench/bench_common.h"

namespace cellar::bench {
namespace {

// Keys stay in the order the benchmark printed them.
using Json = nlohmann::ordered_json;

std::optional<double> Number(const Json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

std::string Shown(std::optional<double> v, int digits) {
  return v ? FormatNumber(*v, digits) : "n/a";
}

std::string RatioShown(std::optional<double> ratio) {
  return ratio ? FormatNumber(*ratio, 2) + "x" : "n/a";
}

// value / baseline, when both are there and the baseline is not 0.
std::optional<double> Quotient(std::optional<double> value, std::optional<double> baseline) {
  if (!value || !baseline || *baseline == 0) return std::nullopt;
  return *value / *baseline;
}

// "p99 < 50 ms (met)"; just the target when the figure is missing.
std::string Verdict(const std::string& target, std::optional<bool> met) {
  if (!met) return target;
  return target + (*met ? " (met)" : " (missed)");
}

std::optional<bool> Below(std::optional<double> v, double limit) {
  if (!v) return std::nullopt;
  return *v < limit;
}

std::optional<bool> AtMost(std::optional<double> v, double limit) {
  if (!v) return std::nullopt;
  return *v <= limit;
}

std::optional<bool> AtLeast(std::optional<double> v, double limit) {
  if (!v) return std::nullopt;
  return *v >= limit;
}

// A throughput figure next to its baseline, with the benchmark's own ratio key.
FigureRow RateRow(const Json& j, std::string figure, const char* value_key,
                  const char* baseline_key, const char* ratio_key) {
  return {std::move(figure), Shown(Number(j, value_key), 0), Shown(Number(j, baseline_key), 0),
          RatioShown(Number(j, ratio_key)), ""};
}

// A latency figure next to its baseline; ratio = value / baseline.
FigureRow LatencyRow(const Json& j, std::string figure, const char* value_key,
                     const char* baseline_key, std::string target = "") {
  const auto value = Number(j, value_key);
  const auto baseline = Number(j, baseline_key);
  return {std::move(figure), Shown(value, 2), Shown(baseline, 2),
          RatioShown(Quotient(value, baseline)), std::move(target)};
}

FigureRow PlainRow(const Json& j, std::string figure, const char* key, int digits,
                   std::string target = "") {
  return {std::move(figure), Shown(Number(j, key), digits), "", "", std::move(target)};
}

std::vector<FigureRow> PutRows(const Json& j) {
  FigureRow rate = RateRow(j, "cells/s", "cells_per_s", "raw_rows_per_s", "ratio");
  rate.target = Verdict(">= 0.5", AtLeast(Number(j, "ratio"), 0.5));
  FigureRow vs_single = RateRow(j, "cells/s vs single-row autocommit INSERTs", "cells_per_s",
                                "single_row_rows_per_s", "single_row_ratio");
  vs_single.target = Verdict(">= 2", AtLeast(Number(j, "single_row_ratio"), 2));
  FigureRow batch = RateRow(j, "put_batch cells/s (10 cells per row)", "batch_cells_per_s",
                            "raw_rows_per_s", "batch_ratio");
  batch.target = Verdict(">= 0.8", AtLeast(Number(j, "batch_ratio"), 0.8));
  // The host-log design in plain SQL: what the group commit sends, without Cellar.
  FigureRow ceiling = RateRow(j, "design ceiling rows/s (one fenced INSERT ... RETURNING)",
                              "ceiling_rows_per_s", "raw_rows_per_s", "ceiling_ratio");
  FigureRow of_ceiling = PlainRow(j, "cells/s / ceiling rows/s", "ratio_to_ceiling", 3);
  // The same SQL with only C rows in flight: the best C blocked callers can get.
  FigureRow closed =
      RateRow(j, "closed-loop ceiling rows/s (C rows in flight)", "closed_loop_ceiling_rows_per_s",
              "raw_rows_per_s", "closed_loop_ceiling_ratio");
  FigureRow of_closed =
      PlainRow(j, "cells/s / closed-loop ceiling rows/s", "ratio_to_closed_loop_ceiling", 3);
  of_closed.target = Verdict(">= 0.8", AtLeast(Number(j, "ratio_to_closed_loop_ceiling"), 0.8));
  // Phase H: the same callers through a group commit with no Cellar code,
  // the faster of its two variants (bench/bench_put_bare_commit.h).
  static const Json kNone = Json::object();
  const Json& bare = j.contains("bare_group_commit") ? j["bare_group_commit"] : kNone;
  std::optional<double> bare_best = Number(bare, "writer_answers_rows_per_s");
  if (auto a = Number(bare, "answering_thread_rows_per_s"); a && (!bare_best || *a > *bare_best))
    bare_best = a;
  const std::optional<double> closed_rate = Number(j, "closed_loop_ceiling_rows_per_s");
  FigureRow bare_rate = {"bare group commit rows/s (the same callers, no Cellar code)",
                         Shown(bare_best, 0), Shown(closed_rate, 0),
                         RatioShown(Quotient(bare_best, closed_rate)), ""};
  FigureRow of_bare =
      PlainRow(bare, "cells/s / bare group commit rows/s", "store_ratio_to_bare", 3);
  // The same SQL with the C x 10 rows callers blocked in put_batch offer at once.
  FigureRow batch_closed = RateRow(
      j, "put_batch closed-loop ceiling rows/s (C x 10 rows in flight)",
      "batch_closed_loop_ceiling_rows_per_s", "raw_rows_per_s", "batch_closed_loop_ceiling_ratio");
  FigureRow batch_of_closed = PlainRow(j, "put_batch cells/s / its closed-loop ceiling rows/s",
                                       "batch_ratio_to_closed_loop_ceiling", 3);
  FigureRow async = RateRow(j, "async cells/s (PutAsync, 8 in flight per caller)",
                            "async_cells_per_s", "raw_rows_per_s", "async_ratio");
  async.target = Verdict(">= 0.5", AtLeast(Number(j, "async_ratio"), 0.5));
  FigureRow async_single =
      RateRow(j, "async cells/s vs single-row autocommit INSERTs", "async_cells_per_s",
              "single_row_rows_per_s", "async_single_row_ratio");
  async_single.target = Verdict(">= 2", AtLeast(Number(j, "async_single_row_ratio"), 2));
  return {rate,
          vs_single,
          batch,
          ceiling,
          of_ceiling,
          closed,
          of_closed,
          bare_rate,
          of_bare,
          batch_closed,
          batch_of_closed,
          async,
          async_single,
          PlainRow(j, "async put latency p99 ms", "async_p99_ms", 2),
          PlainRow(j, "put latency p50 ms", "p50_ms", 2),
          PlainRow(j, "put latency p99 ms", "p99_ms", 2),
          PlainRow(j, "put latency p99 ms at half rate", "half_rate_p99_ms", 2,
                   Verdict("p99 <= 20 ms", AtMost(Number(j, "half_rate_p99_ms"), 20))),
          PlainRow(j, "compression ratio (JSON / stored)", "compression_ratio", 2)};
}

std::vector<FigureRow> HttpRows(const Json& j) {
  FigureRow puts = RateRow(j, "puts/s", "http_puts_per_s", "store_puts_per_s", "put_ratio");
  puts.target = Verdict(">= 0.6", AtLeast(Number(j, "put_ratio"), 0.6));
  FigureRow gets = RateRow(j, "gets/s", "http_gets_per_s", "store_gets_per_s", "get_ratio");
  gets.target = Verdict(">= 0.6", AtLeast(Number(j, "get_ratio"), 0.6));
  FigureRow get_p99 = LatencyRow(j, "get latency p99 ms", "http_get_p99_ms", "store_get_p99_ms");
  get_p99.target = Verdict("<= 2x", AtMost(Number(j, "get_p99_ratio"), 2));
  // The same gets against a bare server that runs the store's SELECT: the
  // bound of any HTTP get with this library (bench/bench_http_bare_get.h).
  std::vector<FigureRow> rows = {
      puts,
      gets,
      LatencyRow(j, "get latency p50 ms", "http_get_p50_ms", "store_get_p50_ms"),
      get_p99,
      RateRow(j, "bare SQL gets/s (cpp-httplib + the store's SELECT, no Cellar code)",
              "bare_sql_gets_per_s", "bare_sql_store_gets_per_s", "bare_sql_get_ratio"),
      LatencyRow(j, "bare SQL get latency p99 ms", "bare_sql_get_p99_ms",
                 "bare_sql_store_get_p99_ms"),
      PlainRow(j, "get_ratio / bare SQL get ratio", "get_ratio_to_bare_sql", 3)};
  // Latest, row and versions reads carry the same targets as gets.
  for (const std::string read : {"latest", "row", "versions"}) {
    const std::string ratio = read + "_ratio", p99_ratio = read + "_p99_ratio";
    FigureRow rate = RateRow(j, read + " reads/s", ("http_" + read + "_per_s").c_str(),
                             ("store_" + read + "_per_s").c_str(), ratio.c_str());
    rate.target = Verdict(">= 0.6", AtLeast(Number(j, ratio.c_str()), 0.6));
    FigureRow p99 =
        LatencyRow(j, read + " read latency p99 ms", ("http_" + read + "_p99_ms").c_str(),
                   ("store_" + read + "_p99_ms").c_str());
    p99.target = Verdict("<= 2x", AtMost(Number(j, p99_ratio.c_str()), 2));
    rows.push_back(std::move(rate));
    rows.push_back(std::move(p99));
  }
  return rows;
}

// Latency targets are judged from the commit acknowledged to the writer
// (ack_*); the created_at rows start at the write transaction's start, so
// they also count the write's own duration.
std::vector<FigureRow> RelayRows(const Json& j) {
  FigureRow relay_vs_puts = RateRow(j, "events/s vs the cluster's single puts/s", "events_per_s",
                                    "put_rate", "put_rate_ratio");
  relay_vs_puts.target = Verdict(">= 1.5", AtLeast(Number(j, "put_rate_ratio"), 1.5));
  return {
      RateRow(j, "events/s", "events_per_s", "baseline_events_per_s", "ratio"),
      relay_vs_puts,
      LatencyRow(j, "commit-ack to consume p50 ms", "ack_p50_ms", "kafka_path_p50_ms"),
      LatencyRow(j, "commit-ack to consume p99 ms", "ack_p99_ms", "kafka_path_p99_ms",
                 Verdict("p99 < 50 ms", Below(Number(j, "ack_p99_ms"), 50))),
      LatencyRow(j, "txn-start (created_at) to consume p99 ms", "p99_ms", "kafka_path_p99_ms"),
      {"exactly-once events/s (vs at-least-once)", Shown(Number(j, "exactly_once_events_per_s"), 0),
       Shown(Number(j, "events_per_s"), 0), RatioShown(Number(j, "exactly_once_ratio")),
       Verdict(">= 0.7", AtLeast(Number(j, "exactly_once_ratio"), 0.7))},
      LatencyRow(j, "exactly-once commit-ack to consume p99 ms", "exactly_once_ack_p99_ms",
                 "kafka_path_p99_ms",
                 Verdict("p99 < 50 ms", Below(Number(j, "exactly_once_ack_p99_ms"), 50)))};
}

std::vector<FigureRow> TriggerRows(const Json& j) {
  FigureRow rate =
      RateRow(j, "events/s (no-op handler)", "events_per_s", "baseline_events_per_s", "ratio");
  rate.target = Verdict(">= 0.8", AtLeast(Number(j, "ratio"), 0.8));
  return {rate, LatencyRow(j, "commit-ack to handler p50 ms", "ack_p50_ms", "consume_ack_p50_ms"),
          LatencyRow(j, "commit-ack to handler p99 ms", "ack_p99_ms", "consume_ack_p99_ms",
                     Verdict("p99 < 100 ms", Below(Number(j, "ack_p99_ms"), 100))),
          LatencyRow(j, "txn-start (created_at) to handler p99 ms", "p99_ms", "consume_p99_ms")};
}

std::vector<FigureRow> IndexRows(const Json& j) {
  FigureRow index_vs_puts =
      RateRow(j, "index upserts/s, group apply vs the cluster's single puts/s", "upserts_per_s",
              "put_rate", "put_rate_ratio");
  index_vs_puts.target = Verdict(">= 1.5", AtLeast(Number(j, "put_rate_ratio"), 1.5));
  // The JSON's own "ratio" is raw / IndexReader; the table shows IndexReader / raw.
  return {LatencyRow(j, "commit-ack to visible lag p50 ms", "ack_p50_ms", "consume_ack_p50_ms"),
          LatencyRow(j, "commit-ack to visible lag p99 ms", "ack_p99_ms", "consume_ack_p99_ms",
                     Verdict("p99 < 50 ms", Below(Number(j, "ack_p99_ms"), 50))),
          PlainRow(j, "txn-start (created_at) to visible lag p99 ms", "p99_ms", 2),
          index_vs_puts,
          PlainRow(j, "index upserts/s, one cell per transaction (IndexWriter::Apply)",
                   "single_apply_upserts_per_s", 0),
          LatencyRow(j, "query p50 ms", "query_p50_ms", "baseline_query_p50_ms"),
          LatencyRow(j, "query p99 ms", "query_p99_ms", "baseline_query_p99_ms")};
}

// Issue #50's breakdown of a write's cost, from the step at 1,000 writes/s
// ("a / b / c" values); none when the run had no such step.
std::vector<FigureRow> CostAt1000Rows(const Json& j) {
  if (!j.contains("steps") || !j["steps"].is_array()) return {};
  const Json* step = nullptr;
  for (const Json& s : j["steps"])
    if (Number(s, "rate").value_or(0) == 1000) step = &s;
  if (!step) return {};
  auto joined = [&](std::initializer_list<const char*> keys, int digits) {
    std::string text;
    for (const char* key : keys)
      text += (text.empty() ? "" : " / ") + Shown(Number(*step, key), digits);
    return text;
  };
  auto row = [](std::string figure, std::string value) {
    return FigureRow{"at 1,000 writes/s: " + std::move(figure), std::move(value), "", "", ""};
  };
  std::vector<FigureRow> rows = {
      row("CPU ms per write, MariaDB / broker / Cellar's process (with the harness)",
          joined(
              {"cpu_ms_per_write_mariadb", "cpu_ms_per_write_broker", "cpu_ms_per_write_process"},
              3)),
      row("SQL statements / COMMITs / InnoDB fsyncs per write",
          joined({"sql_statements_per_write", "sql_commits_per_write", "innodb_fsyncs_per_write"},
                 2)),
      row("relay Kafka transactions per write",
          Shown(Number(*step, "relay_transactions_per_write"), 3))};
  if (step->contains("cpu_ms_per_write_by_threads") &&
      (*step)["cpu_ms_per_write_by_threads"].is_object()) {
    std::string text;
    for (const auto& [group, ms] : (*step)["cpu_ms_per_write_by_threads"].items())
      if (ms.is_number())
        text += (text.empty() ? "" : ", ") + group + " " + FormatNumber(ms.get<double>(), 3);
    rows.push_back(row("CPU ms per write in Cellar's process by thread group", text));
  }
  // "key value, key value" of an object of numbers, in its order.
  auto listed = [&](const char* key, double scale, int digits) {
    std::string text;
    if (step->contains(key) && (*step)[key].is_object())
      for (const auto& [name, n] : (*step)[key].items())
        if (const std::string shown =
                n.is_number() ? FormatNumber(scale * n.get<double>(), digits) : "0";
            std::stod(shown) != 0)  // what rounds to nothing ("0", "0.00") is left out
          text += (text.empty() ? "" : ", ") + name + " " + shown;
    return text;
  };
  if (const std::string by_type = listed("kafka_requests_per_write_by_type", 1e3, 0);
      !by_type.empty()) {
    std::optional<double> total = Number(*step, "kafka_requests_per_write");
    if (total) *total *= 1e3;
    rows.push_back(row("Kafka requests per 1,000 writes (the broker's count) by type",
                       Shown(total, 0) + ": " + by_type));
  }
  if (const std::string statements = listed("sql_statements_per_write_by_threads", 1, 2);
      !statements.empty())
    rows.push_back(
        row("SQL sent by Cellar's process per write by thread group, statements / COMMITs",
            statements + " / " + listed("sql_commits_per_write_by_threads", 1, 3)));
  if (const std::string decoded = listed("records_decoded_per_write_by_stage", 1, 2);
      !decoded.empty())
    rows.push_back(row("change-log records decoded per write, by consumer", decoded));
  if (const std::string by_threads = listed("wake_ups_per_write_by_threads", 1, 2);
      !by_threads.empty())
    rows.push_back(row("wake-ups per write, MariaDB / broker / Cellar's process (with the harness)",
                       joined({"wake_ups_per_write_mariadb", "wake_ups_per_write_broker",
                               "wake_ups_per_write_process"},
                              2) +
                           "; the process by thread group: " + by_threads));
  return rows;
}

std::vector<FigureRow> PipelineRows(const Json& j) {
  FigureRow sustained = RateRow(j, "sustained single puts/s (whole pipeline)",
                                "sustained_writes_per_s", "raw_rows_per_s", "ratio");
  sustained.target = Verdict(">= 0.25", AtLeast(Number(j, "ratio"), 0.25));
  // With no step sustained the JSON's p99s are 0: no rate to judge them at.
  const bool any_step = Number(j, "sustained_writes_per_s").value_or(0) > 0;
  auto at_that_rate = [&](std::string figure, const char* key, bool judged) {
    if (!any_step)
      return FigureRow{std::move(figure), "n/a", "", "",
                       judged ? "p99 < 100 ms (no step sustained)" : ""};
    return PlainRow(j, std::move(figure), key, 2,
                    judged ? Verdict("p99 < 100 ms", Below(Number(j, key), 100)) : "");
  };
  FigureRow vs_sql =
      RateRow(j, "sustained single puts/s vs the plain-SQL ceiling", "sustained_writes_per_s",
              "sql_ceiling_writes_per_s", "ratio_to_sql_ceiling");
  vs_sql.target = Verdict(">= 0.5", AtLeast(Number(j, "ratio_to_sql_ceiling"), 0.5));
  std::vector<FigureRow> rows = {
      sustained,
      vs_sql,
      PlainRow(j, "CPU ms per write at 1,000 writes/s (MariaDB + broker + Cellar)",
               "cpu_ms_per_write_at_1000", 3,
               Verdict("<= 0.6", AtMost(Number(j, "cpu_ms_per_write_at_1000"), 0.6))),
      at_that_rate("commit-ack to index-visible p99 ms at that rate", "index_p99_ms", true),
      at_that_rate("commit-ack to no-op handler p99 ms at that rate", "trigger_p99_ms", true),
      at_that_rate("commit-ack to webhook sink p99 ms at that rate", "webhook_p99_ms", false),
      RateRow(j, "plain-SQL ceiling writes/s (the stages' SQL alone, no Kafka)",
              "sql_ceiling_writes_per_s", "raw_rows_per_s", "sql_ceiling_ratio"),
      PlainRow(j, "plain-SQL ceiling server CPU us per write", "sql_ceiling_server_us_per_write",
               1),
      PlainRow(j, "relay events/s (from a backlog)", "relay_events_per_s", 0),
      PlainRow(j, "index upserts/s (from a backlog)", "index_upserts_per_s", 0),
      PlainRow(j, "no-op trigger events/s (from a backlog)", "trigger_events_per_s", 0)};
  // The breakdown follows the CPU row it explains.
  const std::vector<FigureRow> cost = CostAt1000Rows(j);
  rows.insert(rows.begin() + 3, cost.begin(), cost.end());
  return rows;
}

}  // namespace

std::vector<FigureRow> BenchFigureRows(const std::string& name, const Json& j) {
  if (name == "put") return PutRows(j);
  if (name == "http") return HttpRows(j);
  if (name == "relay") return RelayRows(j);
  if (name == "trigger") return TriggerRows(j);
  if (name == "index") return IndexRows(j);
  if (name == "pipeline") return PipelineRows(j);
  return {};
}

// "shards 64, rate 500, ..." from the settings keys the benchmark reported.
std::string SettingsText(const Json& j) {
  static const char* kKeys[] = {
      "cells",           "callers",         "clients",        "gets",        "rate",
      "achieved_rate",   "concurrency",     "entries",        "shards",      "partitions",
      "raw_connections", "max_batch_cells", "writer_threads", "batch_cells", "poll_min_ms",
      "poll_max_ms",     "step_seconds",    "window",         "put_threads"};
  std::string text;
  for (const char* key : kKeys) {
    if (!j.contains(key)) continue;
    text += (text.empty() ? "" : ", ") + std::string(key) + " " + j[key].dump();
  }
  return text.empty() ? "n/a" : text;
}

}  // namespace cellar::bench
