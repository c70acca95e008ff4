// `cellar-bench pipeline`: the whole write path under load at once (issue 16):
// the maximum write rate the relay, an index worker and two triggers sustain.
//
// One cluster (a private MariaDB and a private local broker unless --config
// names a running cluster; then stop its relays, index workers and triggers
// first), 64 shards by default. In this process: the relay, one IndexWorker
// with driver_partner_index (--index-yaml, the example definition), a no-op
// C++ trigger (TriggerWorker) and a webhook trigger posting to an in-process
// HTTP sink on a free loopback port (testing::WebhookSink), both on trips/BASE.
//
// Steps: for each rate of --steps (writes/s), single puts (one new trip cell
// per put, with the fields driver_partner_index reads) are paced open-loop at
// that rate for --step-seconds from --put-threads threads through
// CellStore::PutAsync with at most --window puts in flight (a full window
// delays the writers, so the achieved rate shows it). Per step:
//   - commit-ack to index-visible p50/p99: --visibility-per-s sampled puts per
//     second are queried through IndexReader by their driver until the row is
//     returned (the method of `cellar-bench index`);
//   - commit-ack to the no-op handler's start and to the sink's receipt
//     p50/p99, every put joined by (shard, added_id) (AckLatency);
//   - the achieved write rate (puts answered OK / first slot to last answer);
//   - each stage's lag, counted in process: cells acknowledged to the writers
//     minus events the stage finished (relay: Kafka acknowledged; index:
//     events applied; triggers: handler calls, sink receipts), sampled every
//     --lag-sample-ms; it "grows" when its mean over the last third of the
//     writes exceeds its mean over the first third by more than 0.1 s of
//     writes at the step's rate (at least 50 events).
// Then the stages get --drain-timeout to catch up before the next step. A
// step is sustained when the index, no-op trigger and webhook p99s are all
// < 100 ms, no lag grows, every sample became visible and every event
// arrived, no put failed and the achieved rate is >= 95% of the target.
// Stepping stops after the first step that is not sustained; the sustained
// rate is the highest sustained step's target.
//
// Throughput (bench_pipeline_drain.cc): from a backlog of --drain-cells cells
// written with every stage stopped, each stage alone, first to N-th event.
// Baseline: the raw 100-row INSERT rate into the host tables on the same
// server (bench_put_raw.h, median of --raw-rounds rounds), measured last with
// every stage stopped. ratio = sustained writes/s / raw rows/s (target >= 0.25);
// ratio_to_sql_ceiling = sustained writes/s / the plain-SQL ceiling of the
// pipeline's own statements (bench_pipeline_sql.cc; issue #50: >= 0.5).
#include "bench/bench_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/uuid.h"
#include "bench/bench_put_phases.h"
#include "changelog/relay.h"
#include "config/number_options.h"
#include "indexes/index_catalog.h"
#include "indexes/index_query.h"
#include "testing/wait_for.h"

#ifndef CELLAR_SOURCE_DIR
#define CELLAR_SOURCE_DIR "."
#endif

namespace cellar::bench::pipeline {
namespace {

Result<IndexDefinition> LoadIndex(const PipelineBenchOptions& o, const ClusterConfig& cfg) {
  CELLAR_ASSIGN_OR_RETURN(auto defs, LoadIndexDefinitions(o.index_yaml, cfg));
  for (const auto& d : defs)
    if (d.table == kIndexName) return d;
  return InvalidArgument(o.index_yaml + ": no index named " + kIndexName);
}

// One put, then until the index returns it and both triggers had it (their
// consumer groups have joined): *seconds. 0, or the run's exit code.
int WarmUp(CellStore* store, Stages& stages, const PipelineBenchOptions& o,
           const std::string& datastore, const std::string& column, const std::string& run,
           double* seconds) {
  Progress("warm-up: one put, until the index and both triggers have it");
  std::mt19937_64 rng(std::random_device{}());
  const Uuid driver = Uuid::Random(), row = Uuid::Random();
  auto put = store->Put(datastore, {row, column, 0, StepBody(rng, o.body_bytes, run, -2, driver)});
  if (!put.ok()) {
    Progress("warm-up put failed: " + put.status().ToString());
    return 1;
  }
  IndexReader reader(store, {stages.index()});
  IndexQuery q;
  q.index = kIndexName;
  q.shard_value = driver.ToString();
  auto visible = [&] {
    auto r = reader.Query(q);
    return r.ok() && !r->hits.empty();
  };
  Stopwatch clock;
  const bool ready = testing::WaitFor(
      [&] {
        return StopRequested() || (stages.handled() >= 1 && stages.delivered() >= 1 && visible());
      },
      std::chrono::seconds(o.timeout_s), std::chrono::milliseconds(5));
  if (StopRequested()) return 130;
  if (!ready) {
    Progress("warm-up: the stages did not all see the first put within " +
             std::to_string(o.timeout_s) + " s");
    return 1;
  }
  *seconds = clock.Seconds();
  return 0;
}

size_t MaxWarmUpRounds(const PipelineBenchOptions& o) {
  if (o.warm_up_max_s <= 0 || o.warm_up_round_s <= 0) return 0;
  return static_cast<size_t>(std::ceil(o.warm_up_max_s / o.warm_up_round_s));
}

// The load warm-up (PipelineBenchOptions::warm_up_rate): rounds of the real
// pipeline until the broker's JIT compiler settles. Their figures are
// dropped. 0, or the run's exit code.
// The private Apache Kafka's request counts by type; nullopt without one
// (--config, the mock) or when they cannot be read (logged).
std::optional<std::map<std::string, uint64_t>> BrokerRequestCounts() {
  const BenchBroker* broker = CurrentBenchBroker();
  if (broker == nullptr || broker->in_process()) return std::nullopt;
  auto counts = broker->RequestCounts();
  if (!counts.ok()) {
    Progress("cannot read the broker's request counts: " + counts.status().ToString());
    return std::nullopt;
  }
  return *std::move(counts);
}

// StepFigures::kafka_requests_* from the counts before and after the step.
void RecordKafkaRequests(const std::map<std::string, uint64_t>& before,
                         const std::optional<std::map<std::string, uint64_t>>& after,
                         StepFigures* step) {
  if (!after || step->ok == 0) return;
  const double writes = static_cast<double>(step->ok);
  double total = 0;
  for (const auto& [type, count] : *after) {
    const auto was = before.find(type);
    const uint64_t delta = count - (was == before.end() ? 0 : std::min(count, was->second));
    if (delta == 0) continue;
    step->kafka_requests_by_type.emplace_back(type, static_cast<double>(delta) / writes);
    total += static_cast<double>(delta);
  }
  std::sort(step->kafka_requests_by_type.begin(), step->kafka_requests_by_type.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  step->kafka_requests_per_write = total / writes;
}

int WarmUpUnderLoad(const BenchCluster& cluster, CellStore* store, Stages& stages,
                    const PipelineBenchOptions& o, const std::string& datastore,
                    const std::string& column, const std::string& run, PipelineRun* result) {
  const BenchBroker* broker = CurrentBenchBroker();
  if (broker == nullptr || broker->in_process()) return 0;  // no JVM to warm
  const size_t rounds = MaxWarmUpRounds(o);
  Stopwatch clock;
  for (size_t i = 0; i < rounds; ++i) {
    StepFigures figures;
    const double jit_before = broker->JitCpuSeconds();
    if (int rc =
            RunStep(cluster, store, stages, o, datastore, column, run, i, o.warm_up_rate,
                    o.warm_up_round_s, "load warm-up round " + std::to_string(i + 1), &figures);
        rc)
      return rc;
    result->load_warm_up_rounds = static_cast<int>(i + 1);
    result->load_warm_up_last = figures;
    result->load_warm_up_last_jit_share =
        (broker->JitCpuSeconds() - jit_before) / std::max(1e-9, figures.seconds);
    if (result->load_warm_up_last_jit_share < kJitSettledShare) break;
  }
  result->load_warm_up_s = clock.Seconds();
  Progress("load warm-up: " + std::to_string(result->load_warm_up_rounds) + " rounds in " +
           FormatNumber(result->load_warm_up_s, 0) + " s; the broker's JIT compiler used " +
           FormatNumber(100 * result->load_warm_up_last_jit_share, 1) +
           " % of a core in the last round");
  return 0;
}

// Rounds of PlanPipelineSql (as many as the raw baseline's, as many rows),
// after every stage stopped. Only on a private cluster: it writes index
// entries that no cell backs. The exit code of the run so far (0: go on).
int MeasureSqlCeiling(const BenchCluster& cluster, const PipelineBenchOptions& o,
                      const IndexDefinition& def, int version, const std::string& column,
                      SqlCeilingFigures* out) {
  if (!cluster.db) {
    out->skipped = "--config: it would write index entries no cell backs into the cluster";
    return 0;
  }
  Progress("plain-SQL ceiling: the stages' statements for the same writes, no Kafka");
  std::mt19937_64 rng(std::random_device{}());
  RawRounds rounds = RunRawRounds(
      cluster, "plain-SQL ceiling", o.raw_rounds, {.connections_per_host = o.raw_connections}, [&] {
        return PlanPipelineSql(cluster.config, def, version, column, o.raw_rows, o.body_bytes, rng);
      });
  if (rounds.exit_code != 0) return rounds.exit_code;
  out->measured = true;
  out->rates = rounds.rates;
  out->writes_per_s = rounds.median_rows_per_s;
  const double writes = static_cast<double>(rounds.total.rows);
  if (writes > 0) {
    out->client_us_per_write = 1e6 * rounds.usage.client_cpu_s / writes;
    if (rounds.usage.server_cpu_s) {
      out->server_us_per_write = 1e6 * *rounds.usage.server_cpu_s / writes;
      out->cpu_busy = (rounds.usage.client_cpu_s + *rounds.usage.server_cpu_s) /
                      (rounds.total.seconds * std::max(1u, std::thread::hardware_concurrency()));
    }
  }
  return 0;
}

int RunPipelineBench(const PipelineBenchOptions& o) {
  if (!std::getenv("CELLAR_LOG_LEVEL")) SetLogLevel(LogLevel::kWarn);
  auto opened = OpenPipelineCluster(o.cluster, o.partitions);
  if (!opened.ok()) {
    Progress(opened.status().ToString());
    return 2;
  }
  BenchCluster cluster = std::move(opened->cluster);
  std::unique_ptr<BenchBroker> broker = std::move(opened->broker);
  const ClusterConfig& cfg = cluster.config;
  auto def = LoadIndex(o, cfg);
  if (!def.ok()) {
    Progress("index definition: " + def.status().ToString());
    return 2;
  }
  const std::string datastore = def->datastore;
  const std::string column = def->column_defs.at(0).column_key;

  std::unique_ptr<CellStore> store = CellStore::Open(cfg);
  Progress("creating host databases and tables (" + std::to_string(cfg.mysql.hosts.size()) +
           " hosts, " + std::to_string(cfg.shards) + " shards)");
  if (Status s = store->Init(); !s.ok()) {
    Progress("init failed: " + s.ToString());
    return 1;
  }
  for (const auto& st : ReadRelayStatus(*store))
    if (st.owned) {
      Progress("the " + st.datastore + " log of host " + st.host +
               " is owned by a running relay: stop the cluster's relays first");
      return 2;
    }
  IndexCatalog catalog(store.get());
  auto applied = catalog.Apply(*def);
  if (!applied.ok()) {
    Progress("index apply failed: " + applied.status().ToString());
    return 1;
  }
  const int applied_version = applied->version.version;
  if (StopRequested()) return 130;

  const std::string run = Uuid::Random().ToString().substr(0, 8);
  PipelineRun result{.o = o,
                     .cluster = cluster,
                     .broker = broker.get(),
                     .warmup_s = 0,
                     .steps = {},
                     .drain = {},
                     .raw = {},
                     .sql = {}};
  {
    Stages stages(store.get(), o, run, *def, MaxWarmUpRounds(o) + o.steps.size());
    Progress("starting the relay, the index worker, the no-op and the webhook trigger");
    if (Status s = stages.Start(); !s.ok()) {
      Progress("stages start failed: " + s.ToString());
      return 1;
    }
    if (int rc = WarmUp(store.get(), stages, o, datastore, column, run, &result.warmup_s); rc)
      return rc;
    if (int rc = WarmUpUnderLoad(cluster, store.get(), stages, o, datastore, column, run, &result);
        rc)
      return rc;
    for (size_t i = 0; i < o.steps.size(); ++i) {
      StepFigures step;
      // Read outside RunStep: the reading JVM's own CPU is no stage's.
      const auto requests_before = BrokerRequestCounts();
      if (int rc = RunStep(cluster, store.get(), stages, o, datastore, column, run,
                           MaxWarmUpRounds(o) + i, o.steps[i], o.step_seconds,
                           "step " + std::to_string(i + 1), &step);
          rc)
        return rc;
      if (requests_before) RecordKafkaRequests(*requests_before, BrokerRequestCounts(), &step);
      result.steps.push_back(step);
      if (!step.sustained) break;
    }
    if (o.drain_cells > 0)
      if (int rc = RunDrain(store.get(), stages, o, datastore, column, run, &result.drain); rc)
        return rc;
  }

  Progress("baseline: raw 100-row INSERTs into the host tables (every stage stopped)");
  std::mt19937_64 rng(std::random_device{}());
  RawRounds raw =
      RunRawRounds(cluster, "raw", o.raw_rounds, {.connections_per_host = o.raw_connections}, [&] {
        return PlanRawStatements(cfg, datastore, column, o.raw_rows, 100, o.body_bytes, rng);
      });
  if (raw.exit_code != 0) return raw.exit_code;
  result.raw = {raw.rates, raw.median_rows_per_s};
  if (int rc = MeasureSqlCeiling(cluster, o, *def, applied_version, column, &result.sql); rc)
    return rc;
  store->Close();
  return PrintPipelineReport(result);
}

}  // namespace
}  // namespace cellar::bench::pipeline

namespace cellar::bench {

void AddPipelineCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<pipeline::PipelineBenchOptions>();
  o->index_yaml =
      std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes/driver_partner_index.yaml";
  CLI::App* cmd = app.add_subcommand(
      "pipeline",
      "the whole write path at once: single puts at stepped rates with the relay, an index "
      "worker (driver_partner_index), a no-op and a webhook trigger; the highest rate they "
      "sustain (p99s < 100 ms, no lag growing) vs raw 100-row INSERTs (target ratio >= 0.25) "
      "and vs the plain-SQL ceiling of the same statements (target >= 0.5); CPU per write at "
      "1,000 writes/s (target <= 0.6 ms)");
  AddClusterOptions(cmd, &o->cluster);
  cmd->add_option("--partitions", o->partitions, "kafka.partitions of the private broker")
      ->transform(DecimalInRange(1, 1024))
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "write rates (writes/s) of the steps, in order")
      ->delimiter(',')
      ->transform(DecimalInRange(1.0, 1000000.0))
      ->capture_default_str();
  cmd->add_option("--step-seconds", o->step_seconds, "duration of each step's writes")
      ->transform(DecimalInRange(0.5, 3600.0))
      ->capture_default_str();
  cmd->add_option("--put-threads", o->writer_threads, "threads pacing the PutAsync calls")
      ->transform(DecimalInRange(1, 256))
      ->capture_default_str();
  cmd->add_option("--window", o->window, "PutAsync calls in flight at most")
      ->transform(DecimalInRange(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--body-bytes", o->body_bytes, "approximate JSON size of a trip body")
      ->transform(DecimalInRange(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--visibility-per-s", o->visibility_per_s,
                  "puts per second polled for index visibility")
      ->transform(DecimalInRange(1, 100000))
      ->capture_default_str();
  cmd->add_option("--pollers", o->pollers, "threads polling the index for sampled puts")
      ->transform(DecimalInRange(1, 64))
      ->capture_default_str();
  cmd->add_option("--poll-ms", o->poll_ms, "pause between visibility query rounds")
      ->transform(DecimalInRange(0, 1000))
      ->capture_default_str();
  cmd->add_option("--lag-sample-ms", o->lag_sample_ms, "interval of the lag samples")
      ->transform(DecimalInRange(10.0, 10000.0))
      ->capture_default_str();
  cmd->add_option("--drain-timeout", o->drain_timeout_s,
                  "seconds the stages get to catch up after a step")
      ->transform(DecimalInRange(1, 3600))
      ->capture_default_str();
  cmd->add_option("--drain-cells", o->drain_cells,
                  "backlog each stage works through for its events/s (0: skip; the local "
                  "broker keeps 5 MiB per partition, about 30,000 cells of the default body "
                  "over 8 partitions)")
      ->transform(DecimalInRange(0, 10000000))
      ->capture_default_str();
  cmd->add_option("--raw-rows", o->raw_rows, "rows per round of the raw INSERT baseline")
      ->transform(DecimalInRange(100, 10000000))
      ->capture_default_str();
  cmd->add_option("--raw-rounds", o->raw_rounds, "rounds of the raw baseline (median counts)")
      ->transform(DecimalInRange(1, 100))
      ->capture_default_str();
  cmd->add_option("--raw-connections", o->raw_connections,
                  "parallel connections per host for the raw baseline")
      ->transform(DecimalInRange(1, 256))
      ->capture_default_str();
  cmd->add_option("--index-lanes", o->index_lanes,
                  "index worker lanes per host (0: the IndexWorker default)")
      ->transform(DecimalInRange(0, 64))
      ->capture_default_str();
  cmd->add_option("--index-lane-share-below", o->index_lane_share_below,
                  "index worker: a batch below this many events takes its host's idle lanes' "
                  "events too (-1: the IndexWorker default; 0: never)")
      ->transform(DecimalInRange(-1, 100000))
      ->capture_default_str();
  cmd->add_option("--index-linger-ms", o->index_linger_ms,
                  "index worker batch linger in ms (-1: the IndexWorker default)")
      ->transform(DecimalInRange(-1, 1000))
      ->capture_default_str();
  cmd->add_option("--concurrency", o->trigger_concurrency, "no-op handler threads")
      ->transform(DecimalInRange(1, 1024))
      ->capture_default_str();
  cmd->add_option("--webhook-batch-size", o->webhook_batch_size,
                  "events per webhook POST (1: one event per POST, binary mode)")
      ->transform(DecimalInRange(1, 10000))
      ->capture_default_str();
  cmd->add_option("--webhook-batch-window-ms", o->webhook_batch_window_ms,
                  "how long a webhook batch waits for more events, ms")
      ->transform(DecimalInRange(0, 60000))
      ->capture_default_str();
  cmd->add_option("--index-yaml", o->index_yaml, "file defining driver_partner_index")
      ->capture_default_str();
  cmd->add_option("--warm-up-rate", o->warm_up_rate,
                  "writes/s of the load warm-up's rounds (private Apache Kafka only)")
      ->transform(DecimalInRange(1.0, 1000000.0))
      ->capture_default_str();
  cmd->add_option("--warm-up-round-seconds", o->warm_up_round_s,
                  "duration of a load warm-up round; the warm-up ends after the first round in "
                  "which the broker's JIT compiler used under 5% of a core")
      ->transform(DecimalInRange(0.5, 3600.0))
      ->capture_default_str();
  cmd->add_option("--warm-up-max-seconds", o->warm_up_max_s,
                  "the load warm-up's longest duration (0: none)")
      ->transform(DecimalInRange(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "seconds for the warm-up and each throughput wait")
      ->transform(DecimalInRange(1, 86400))
      ->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = pipeline::RunPipelineBench(*o); });
}

}  // namespace cellar::bench
