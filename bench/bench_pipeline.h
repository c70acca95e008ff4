// The parts of `cellar-bench pipeline` (what it measures is described at the
// top of bench_pipeline.cc): its options, the stages running in the process
// (relay, index worker, no-op trigger, webhook trigger and its sink), one
// step at a stepped write rate, the throughput from a backlog and the report.
//
//   bench_pipeline.cc          options, set-up, the phases in order
//   bench_pipeline_stages.cc   the stages and what they count
//   bench_pipeline_step.cc     one step: paced PutAsync writers, visibility
//                              probes, lag samples
//   bench_pipeline_drain.cc    events/s of each stage from a backlog
//   bench_pipeline_report.cc   the table and the closing JSON line
//
// A phase returns 0 to go on, otherwise the exit code the run ends with
// (1 failed, 130 interrupted); its figures are only valid when it returned 0.
// Threading: the phases run on the benchmark's main thread; Stages' counters
// and per-step latencies are updated from the stages' own threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/uuid.h"
#include "bench/bench_broker.h"
#include "bench/bench_common.h"
#include "bench/bench_load.h"
#include "bench/bench_put_raw.h"
#include "cells/cell_store.h"
#include "changelog/relay.h"
#include "indexes/index_definition.h"
#include "indexes/index_worker.h"
#include "testing/webhook_sink.h"
#include "triggers/trigger_worker.h"

namespace cellar::bench::pipeline {

struct PipelineBenchOptions {
  ClusterOptions cluster;
  int partitions = 8;  // private broker only
  // From 500: on a loaded 2-core machine 1,000 writes/s sits at the 100 ms
  // edge, and a run whose first step fails reports nothing sustained.
  std::vector<double> steps = {500, 1000, 2000, 3000, 4000, 6000, 8000, 12000, 16000, 24000, 32000};
  double step_seconds = 30;
  int writer_threads = 2;     // threads pacing PutAsync calls
  int window = 4096;          // PutAsync calls in flight at most
  int body_bytes = 400;       // approximate JSON size of a trip body
  int visibility_per_s = 20;  // puts sampled for index visibility per second
  int pollers = 2;            // threads querying the index for sampled puts
  int poll_ms = 5;            // pause between a poller's rounds
  double lag_sample_ms = 200;
  int drain_timeout_s = 60;  // after a step: wait this long for every stage
  // Backlog of the throughput phase (0: skip it). The mock broker keeps about
  // 5 MB per partition and drops older records, so a stopped consumer's
  // position must stay within it: ~30,000 trip cells over 8 partitions do.
  int drain_cells = 30000;
  int raw_rows = 50000;  // per round of the raw INSERT baseline
  int raw_rounds = 3;
  int raw_connections = 4;  // per MySQL host
  int trigger_concurrency = TriggerOptions{}.concurrency;
  // The webhook trigger's batch_size and batch_window_ms (triggers/webhook.h).
  // Batched, as a webhook taking thousands of events a second would be set up:
  // at 2,000 writes/s it used 0.07 ms less CPU per write than one POST per event.
  int webhook_batch_size = 100;
  int webhook_batch_window_ms = 0;
  int index_lanes = 0;              // IndexWorkerOptions::lanes_per_host; 0: its default
  int index_linger_ms = -1;         // IndexWorkerOptions::batch_linger_ms; -1: its default
  int index_lane_share_below = -1;  // IndexWorkerOptions::lane_share_below; -1: its default
  std::string index_yaml;           // file holding driver_partner_index
  int timeout_s = 120;              // warm-up and each throughput wait
  // Load warm-up before the steps (private Apache Kafka only): rounds of this
  // many seconds at warm_up_rate until the broker JVM's JIT compiler threads
  // used under kJitSettledShare of a core in a round, for at most
  // warm_up_max_s (0: no load warm-up). A fresh JVM compiles the pipeline's
  // request paths for about a minute after WarmUpBroker (up to 0.4 of a core
  // at 1,000 writes/s); a broker users run has compiled them long ago.
  double warm_up_rate = 1000;
  double warm_up_round_s = 10;
  double warm_up_max_s = 120;
};

constexpr double kJitSettledShare = 0.05;
// Targets of issue #50 (sustained rate vs the plain-SQL ceiling; whole-machine
// CPU per write at a fixed 1,000 writes/s).
constexpr double kTargetRatioToSqlCeiling = 0.5;
constexpr double kTargetCpuMsPerWriteAt1000 = 0.6;

constexpr double kTargetP99Ms = 100;
constexpr double kMinAchievedShare = 0.95;  // of a step's target rate
constexpr const char* kIndexName = "driver_partner_index";
// Groups of this process's threads whose CPU a step reports per write: (JSON
// key, thread-name prefix as the stages name their threads). "rdk:" is every
// Kafka client's librdkafka threads; the mock broker's own rdk:mock (with
// --mock-broker) is taken out.
// "harness" is the benchmark's own work, not Cellar's: the webhook sink (a
// user's receiver), the visibility probes and the lag sampler. The rest of the
// process (the writer threads calling PutAsync with pre-built bodies) is
// counted as Cellar's.
inline const std::vector<std::pair<std::string, std::string>> kThreadGroups = {
    {"relay", "relay-"},       {"commit_writers", "commit-"},  // commit-writer and commit-answer
    {"triggers", "trigger-"},  {"index_worker", "index-"},
    {"kafka_clients", "rdk:"}, {"harness", "bench-"}};

// ---- Stages (bench_pipeline_stages.cc) ---------------------------------------------

// Commit-ack latencies of one step's cells at a stage, and how many arrived.
struct StageLatency {
  AckLatency ack;
  std::atomic<uint64_t> arrived{0};
};

// What every step's cells carry: this run, the step (-1: the backlog of the
// throughput phase) and the fields of driver_partner_index.
nlohmann::json StepBody(std::mt19937_64& rng, int body_bytes, const std::string& run, int step,
                        const Uuid& driver);

// The stages of the pipeline in this process, and what they counted.
// Events of this run's cells are joined with the writers' acks per step (the
// step is read from the body); every event counts in the totals.
class Stages {
 public:
  // `store` is not owned and must outlive the stages. `steps`: how many steps
  // the run may have (their latencies are kept until the stages go).
  Stages(CellStore* store, const PipelineBenchOptions& options, std::string run,
         IndexDefinition index, size_t steps);
  ~Stages();  // Stop()

  // Starts the sink, the relay, the index worker and the trigger worker (the
  // no-op trigger and the webhook trigger to the sink). Errors as theirs.
  Status Start();
  // Stops the trigger worker, the index worker, the relay and the sink. Idempotent.
  void Stop();

  // For the throughput phase, after Stop(): each starts one stage again as a
  // new instance that resumes where the stopped one left off (the webhook
  // trigger is not started again). Errors as the stage's Start().
  Status StartRelay();
  Status StartIndexWorker();
  Status StartNoopTrigger();

  // Cumulative counts since the process started (every event, any run).
  uint64_t relay_acknowledged() const;  // Kafka acknowledged (all relays started)
  uint64_t relay_transactions() const;  // Kafka transactions committed (all relays started)
  uint64_t index_applied() const;       // events applied to kIndexName, any outcome
  // Records the index workers' consumer found deleted by the topic's
  // retention before it read them (cellar_consumer_skipped_records_total):
  // events the index never sees, so a count waiting for them never ends.
  uint64_t index_records_lost() const;
  // Change-log records each consumer has decoded so far
  // (cellar_consumer_records_decoded_total of its group): "index_worker",
  // "noop_trigger", "webhook_trigger".
  std::vector<std::pair<std::string, uint64_t>> records_decoded() const;
  uint64_t handled() const { return handled_.load(); }                  // no-op handler calls
  uint64_t delivered() const { return delivered_.load(); }              // webhook deliveries
  uint64_t backlog_handled() const { return backlog_handled_.load(); }  // step -1 events

  StageLatency& handler(size_t step) { return *handler_[step]; }
  StageLatency& webhook(size_t step) { return *webhook_[step]; }
  const IndexDefinition& index() const { return index_; }
  const std::string& webhook_url() const { return webhook_url_; }
  std::string noop_name() const { return "bench_noop_" + run_; }
  std::string webhook_name() const { return "bench_hook_" + run_; }

 private:
  // The step of a cell of this run (-1 for the backlog), or nullopt for another run's.
  std::optional<int> StepOf(const nlohmann::json& body) const;
  void Arrived(std::vector<std::unique_ptr<StageLatency>>& stage, const Cell& cell,
               std::atomic<uint64_t>& total);
  TriggerHandler NoopHandler();

  CellStore* const store_;
  const PipelineBenchOptions& o_;
  const std::string run_;
  const IndexDefinition index_;
  // Shared by every index worker of the run; read by index_applied().
  mutable MetricsRegistry index_metrics_;
  // Shared by every trigger worker of the run; read by records_decoded().
  mutable MetricsRegistry trigger_metrics_;
  uint64_t relay_acknowledged_before_ = 0;  // by relays already stopped
  uint64_t relay_transactions_before_ = 0;  // by relays already stopped
  std::unique_ptr<testing::WebhookSink> sink_;
  std::string webhook_url_;
  std::unique_ptr<Relay> relay_;
  std::unique_ptr<IndexWorker> indexer_;
  std::unique_ptr<TriggerWorker> triggers_;
  std::atomic<uint64_t> handled_{0}, delivered_{0}, backlog_handled_{0};
  std::vector<std::unique_ptr<StageLatency>> handler_, webhook_;
};

// ---- One step (bench_pipeline_step.cc) ---------------------------------------------

// A stage's lag (cells acknowledged to the writers minus events the stage
// finished) over a step, sampled every lag_sample_ms.
struct LagTrend {
  double first_third = 0, last_third = 0;  // mean lag in events
  double max = 0;
  bool grows = false;  // last_third - first_third > GrowthAllowance(rate)
};

// The lag growth a step may show without counting as growing: 0.1 s of
// writes at the step's rate, at least 50 events.
double GrowthAllowance(double rate);

struct Quantiles {
  double p50 = 0, p99 = 0, max = 0;
  uint64_t count = 0;
};

struct StepFigures {
  double rate = 0;  // target writes/s
  double seconds = 0;
  uint64_t ok = 0, errors = 0;
  std::string first_error;
  double achieved = 0;        // ok / seconds (first slot to the last put answered)
  uint64_t window_waits = 0;  // puts that waited for a free slot of the window
  double put_p50 = 0, put_p99 = 0;
  Quantiles index, handler, webhook;  // commit-ack to visible / handler / sink, ms
  uint64_t not_visible = 0;           // sampled puts not visible within 10 s
  uint64_t index_queries = 0;         // visibility queries the pollers sent
  // this process + the private MariaDB (+ the private Kafka broker's JVM),
  // share of all cores (0: unknown)
  double cpu_busy = 0;
  // CPU milliseconds per write acknowledged, split (0: unknown): the private
  // MariaDB, the private broker (Apache Kafka's JVM, or the mock's thread
  // rdk:mock), the rest of this process
  // (Cellar's stages, the writers, the webhook sink, the probes).
  double cpu_ms_mariadb = 0, cpu_ms_broker = 0, cpu_ms_process = 0;
  // Of cpu_ms_broker: the JVM's JIT compiler threads (0 for the mock).
  double cpu_ms_broker_jit = 0;
  // The whole machine without the benchmark's harness: MariaDB + the broker +
  // this process minus the "harness" thread group and minus the server's
  // threads serving the harness's own login (the visibility probes' reads,
  // bench_harness_store.h). What issue #50 targets.
  double cpu_ms_machine = 0, cpu_ms_harness = 0;
  // Of cpu_ms_mariadb: the harness's connections (unset without a private
  // server, when the probes then read through Cellar's store).
  std::optional<double> cpu_ms_mariadb_harness;
  // cpu_ms_process split by thread name (kThreadGroups), in that order (the
  // "harness" without the writers' PutAsync calls), then "put_calls" (those
  // calls, timed on the writer threads) and "rest": the threads no group
  // names (the main thread and other unnamed ones).
  std::vector<std::pair<std::string, double>> cpu_ms_by_threads;
  // The private broker (JVM or rdk:mock), CPU ms per second over the step's
  // first and last thirds (unset without one): librdkafka 2.0.2's mock finds a
  // fetched batch by walking the partition's batches from the oldest, so its
  // cost per event grows as a run goes on (docs/design.md, The local broker).
  std::optional<double> broker_ms_per_s_first_third, broker_ms_per_s_last_third;
  // The servers' counters over the step (GLOBAL_STATUS deltas; empty when
  // they could not be read), in SQL statements, commits and InnoDB fsyncs per
  // write and statement prepares per second: each statement costs the server
  // a wake-up whatever it carries, and a prepare parses every placeholder.
  std::optional<double> statements_per_write, commits_per_write, fsyncs_per_write, prepares_per_s;
  // Statements per write by kind (Com_select, Com_insert, ... deltas; a
  // prepared statement's execution counts under its kind too).
  std::vector<std::pair<std::string, double>> statements_by_kind;
  // Statements and COMMITs per write this process sent, by the sending
  // thread's group (kThreadGroups, then "rest": cells/sql_call_counts.h), so
  // that the harness's (the visibility probes') are told from the stages'.
  // InnoDB's fsyncs are shared by the commits of every connection (group
  // commit) and have no such split.
  std::vector<std::pair<std::string, double>> sql_statements_by_threads, sql_commits_by_threads;
  // Wake-ups (voluntary context switches: a thread blocked and was woken
  // later) per write acknowledged: the private MariaDB's and the broker's
  // threads (unset when unknown), this process's, and this process's by
  // thread group (kThreadGroups, then "rest"). Threads that ended during the
  // step count only in wake_ups_process.
  std::optional<double> wake_ups_mariadb, wake_ups_broker;
  double wake_ups_process = 0;
  std::vector<std::pair<std::string, double>> wake_ups_by_threads;
  // Change-log records each consumer decoded per write (Stages::records_decoded):
  // every consumer decodes every event of the change log for itself.
  std::vector<std::pair<std::string, double>> records_decoded_by_stage;
  // Kafka requests per write by request type, as the private Apache Kafka
  // counted them from just before the step to the end of its drain (the
  // caller of RunStep fills them; empty without such a broker).
  std::vector<std::pair<std::string, double>> kafka_requests_by_type;
  std::optional<double> kafka_requests_per_write;
  // The relay's Kafka transactions per write: each costs the broker (8
  // ProduceRequests, AddPartitionsToTxn, EndTxn, 8 markers) and librdkafka's
  // main thread about the same whatever it carries (docs/cost-per-write.md).
  std::optional<double> relay_transactions_per_write;
  uint64_t handler_missing = 0, webhook_missing = 0;  // not arrived after the drain wait
  LagTrend relay_lag, index_lag, handler_lag, webhook_lag;
  double drain_s = 0;  // after the writes: until every stage had every cell
  bool drained = false;
  bool sustained = false;
  std::string verdict;  // why not sustained ("" when it was)
};

// Runs step `step` (the Stages' latency slot and the bodies' step number) at
// `rate` writes/s for `seconds`: paced PutAsync writes of bodies built before
// the clock starts, visibility probes and lag samples, then waits for every
// stage to catch up. CPU is measured for `cluster`'s private MariaDB (when
// there is one) and this process. `label` names it in progress lines.
int RunStep(const BenchCluster& cluster, CellStore* store, Stages& stages,
            const PipelineBenchOptions& o, const std::string& datastore, const std::string& column,
            const std::string& run, size_t step, double rate, double seconds,
            const std::string& label, StepFigures* out);

// ---- Throughput from a backlog (bench_pipeline_drain.cc) -----------------------------

struct DrainFigures {
  uint64_t cells = 0;
  double write_s = 0;
  double relay_per_s = 0, index_per_s = 0, trigger_per_s = 0;
  double relay_first_s = 0, index_first_s = 0, trigger_first_s = 0;  // start to first event
  // Empty when every stage worked through the backlog; else what failed (the
  // backlog write, a stage's start, a stage timing out). The figures of the
  // stages before it stay; the later ones stay 0.
  std::string failure;
};

// Stops every stage, writes drain_cells cells with PutBatch, then starts the
// relay alone, then the index worker alone, then the no-op trigger alone, and
// times each from its first to its N-th event of the backlog.
// Returns 130 when a stop was requested, else 0: a failure of the phase is
// recorded in out->failure, so that the run still reports its steps.
int RunDrain(CellStore* store, Stages& stages, const PipelineBenchOptions& o,
             const std::string& datastore, const std::string& column, const std::string& run,
             DrainFigures* out);

// ---- Report (bench_pipeline_report.cc) ----------------------------------------------

struct RawFigures {
  std::vector<double> rates;
  double rows_per_s = 0;  // median round
};

// The database work of the stages in plain SQL (bench_pipeline_sql.cc): per
// kSqlCeilingBatch writes of a host, the put (the raw baseline's INSERT), the
// index worker's transaction for them and, per 1,000 writes, the relay's
// page read and checkpoint; what the SQL alone allows, with no Kafka, no
// consumer and no Cellar code. Only the puts' rows count (writes).
constexpr int kSqlCeilingBatch = 100;
RawWork PlanPipelineSql(const ClusterConfig& cfg, const IndexDefinition& index, int version,
                        const std::string& column, int writes, int body_bytes,
                        std::mt19937_64& rng);

struct SqlCeilingFigures {
  bool measured = false;
  std::string skipped;  // why it was not measured
  std::vector<double> rates;
  double writes_per_s = 0;  // median round
  double client_us_per_write = 0, server_us_per_write = 0;
  double cpu_busy = 0;  // client + server, share of all cores
};

struct PipelineRun {
  const PipelineBenchOptions& o;
  const BenchCluster& cluster;
  const BenchBroker* broker = nullptr;  // null with --config
  double warmup_s = 0;
  // The load warm-up: its rounds and the broker's JIT compiler share of a
  // core in its last round (-1: none ran).
  int load_warm_up_rounds = 0;
  double load_warm_up_s = 0;
  double load_warm_up_last_jit_share = -1;
  // The load warm-up's last round (rate warm_up_rate, the JIT settled): the
  // CPU per write at 1,000 writes/s when no step at that rate ran (stepping
  // stops at the first step not sustained, which may be below 1,000).
  std::optional<StepFigures> load_warm_up_last{};
  std::vector<StepFigures> steps;
  DrainFigures drain;
  RawFigures raw;
  SqlCeilingFigures sql;
};

// Prints the table and the JSON line; the run's exit code (1 if a step had errors).
int PrintPipelineReport(const PipelineRun& r);

}  // namespace cellar::bench::pipeline
