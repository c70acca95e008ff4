// `cellar-bench relay`: change-log relay throughput and commit-to-consume latency.
//
// Kafka: with a private MariaDB the benchmark also starts a private local
// broker (testing/kafka_broker.h, librdkafka's in-memory mock cluster
// reached over TCP) and creates the change-log topics on it first (the mock
// cannot CreateTopics on request). With --config it uses the config's
// kafka.brokers; no other relay may be running on that cluster (the
// benchmark's relay must own every shard).
//
// Phase A (throughput): N trip-like cells are written with PutBatch while no
// relay runs, then a cellar::Relay starts. Reported: the time until Kafka
// acknowledged all N (RelayStats::acknowledged), until an ungrouped
// ChangeLogConsumer has seen every one of them, and until every shard's
// checkpoint reached its head. events/s = N / (all acknowledged - first record
// handed to the producer): the relay's one-time start-up (topic metadata,
// checkpoint tables, shard locks) is shown separately.
//
// Baseline: the same N event payloads (EncodeCellEvent of the same cells, same
// keys and partitions), encoded before the clock starts, produced by a bare
// librdkafka producer with the relay's producer settings (idempotent,
// acks=all, linger.ms=1) to a separate topic on the same broker, timed from
// the first produce to the end of flush(). ratio = relay events/s / baseline.
//
// Phase B (latency): a paced writer puts single cells at --rate writes/s for
// --seconds (call k starts at start + k/rate on a pool of --writer-threads, so
// slow puts do not slow the schedule down). Two latencies per event, same
// machine wall clock:
//   - commit-ack to consume: its arrival at the consumer minus the time the
//     writer's CellStore::Put returned OK (the commit acknowledged), joined by
//     (shard, added_id) after the phase. An event that arrives before its put
//     returned counts as 0 ms and is counted. Issue 3's target (a committed
//     cell is published within 50 ms p99) is checked against this p99.
//   - txn-start (created_at) to consume: arrival minus the cell's created_at.
//     The store takes created_at when the group-commit transaction STARTS
//     (cells/internal/batch_transaction.cc), before the commit-order locks,
//     the INSERTs and the COMMIT's fsync, so this figure also holds the write
//     transaction's own duration (tens of ms under load). Kept for
//     comparison with earlier runs (JSON p50_ms / p99_ms / max_ms).
//
// Where the latency goes (after phase B): the Kafka path alone (a bare
// producer with the relay's settings -> the same consumer settings, one record
// at a time at --rate), and the relay's per-round work: its heads query, one
// HostLog read, one checkpoint save (timed alone, and once per 50 ms during
// phase B together with a SELECT 1 round trip), and how many shards each
// 100 ms window of phase B dirtied (every 100 ms the relay's checkpoint
// thread saves the dirty streams' checkpoints of each host in one transaction).
//
// Cells of this run carry "bench_run" and "bench_phase" fields in their body,
// so the consumer ignores anything else the topic holds.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_broker.h"
#include "bench/bench_common.h"
#include "bench/bench_load.h"
#include "bench/bench_put_store.h"
#include "bench/bench_relay_baselines.h"
#include "bench/bench_relay_collector.h"
#include "bench/bench_relay_rounds.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "changelog/cell_event.h"
#include "changelog/kafka/change_log_consumer.h"
#include "changelog/relay.h"
#include "changelog/relay_checkpoint.h"

namespace cellar::bench {
namespace {

using namespace relay_parts;  // NOLINT: this benchmark's own consumer, baselines and probes

struct RelayBenchOptions : PipelineOptions {};

constexpr double kTargetP99Ms = 50;   // issue 3: a committed cell is published within 50 ms p99
constexpr int kPutRateCells = 10000;  // the put-rate phase: short
constexpr int kPutRateCallers = 32;   // as `cellar-bench put`

// ---- The run ------------------------------------------------------------------

int RunRelayBench(const RelayBenchOptions& o) {
  if (!std::getenv("CELLAR_LOG_LEVEL")) SetLogLevel(LogLevel::kWarn);
  auto opened = OpenPipelineCluster(o.cluster, o.partitions);
  if (!opened.ok()) {
    Progress(opened.status().ToString());
    return 2;
  }
  BenchCluster cluster = std::move(opened->cluster);
  std::unique_ptr<BenchBroker> broker = std::move(opened->broker);
  // Phases A and B measure the at-least-once relay; the exactly-once round
  // (bench_relay_rounds.h) repeats them with relay.exactly_once on.
  cluster.config.relay.exactly_once = false;
  const ClusterConfig& cfg = cluster.config;
  const std::string datastore = cfg.datastores[0].name;
  const std::string column = cfg.datastores[0].columns[0].name;
  const std::string run = Uuid::Random().ToString().substr(0, 8);

  std::unique_ptr<CellStore> store = CellStore::Open(cfg);
  Progress("creating shard databases and tables (" + std::to_string(cfg.shards) + " shards)");
  if (Status s = store->Init(); !s.ok()) {
    Progress("init failed: " + s.ToString());
    return 1;
  }
  for (const auto& st : ReadRelayStatus(*store))
    if (st.owned) {
      Progress("stream " + st.host + "/" + st.datastore +
               " is owned by a running relay: stop the cluster's relays first");
      return 2;
    }
  if (StopRequested()) return 130;

  // ---- Phase A: pre-fill with the relay stopped ----
  Progress("phase A: writing " + std::to_string(o.cells) + " cells with PutBatch (relay stopped)");
  std::mt19937_64 rng(std::random_device{}());
  std::string first_error;
  Prefilled pre =
      Prefill(*store, datastore, column, o.cells, o.body_bytes, o.prefill_threads, run, rng);
  if (StopRequested()) return 130;
  if (!pre.error.empty()) {
    Progress(pre.error);
    return 1;
  }
  const std::vector<CellWrite>& cells = pre.cells;
  const std::vector<PutResult>& written = pre.written;
  const double prefill_s = pre.seconds;

  // The baseline's payloads: what the relay will publish for these cells.
  std::vector<Payload> payloads;
  payloads.reserve(cells.size());
  uint64_t payload_bytes = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    Cell c;
    c.row_key = cells[i].row_key;
    c.column = cells[i].column;
    c.ref_key = cells[i].ref_key;
    c.body = cells[i].body;
    c.created_at = written[i].created_at;
    c.shard = written[i].shard;
    c.added_id = written[i].added_id;
    Payload p{c.row_key.ToString(), EncodeCellEvent(datastore, c, cfg.kafka.max_event_body_bytes),
              ChangeLogPartition(cfg.kafka, c.shard), c.created_at / 1000};
    payload_bytes += p.value.size();
    payloads.push_back(std::move(p));
  }

  ConsumerOptions copts;
  copts.from_beginning = true;
  copts.client_id = "cellar-bench-relay";
  auto consumer = ChangeLogConsumer::Create(cfg, {datastore}, copts);
  if (!consumer.ok()) {
    Progress("consumer: " + consumer.status().ToString());
    return 1;
  }
  auto collector_owner = std::make_unique<Collector>(std::move(consumer).value(), run);
  Collector& collector = *collector_owner;

  Progress("phase A: starting the relay");
  Relay relay(store.get(), "bench-" + run);
  const auto relay_started = Stopwatch::Clock::now();
  Stopwatch relay_clock;
  if (Status s = relay.Start(); !s.ok()) {
    Progress("relay start failed: " + s.ToString());
    return 1;
  }
  const double start_returned_s = relay_clock.Seconds();
  double first_published_s = -1, all_acked_s = -1, all_consumed_s = -1, checkpoints_s = -1;
  const uint64_t n = cells.size();
  const bool acked_ok = WaitUntil(
      [&] {
        const RelayStats st = relay.stats();
        const double t = relay_clock.Seconds();
        if (first_published_s < 0 && st.published > 0) first_published_s = t;
        return st.acknowledged >= n;
      },
      o.timeout_s);
  all_acked_s = relay_clock.Seconds();
  if (StopRequested()) return 130;
  if (!acked_ok) {
    Progress("timed out: Kafka acknowledged " + std::to_string(relay.stats().acknowledged) +
             " of " + std::to_string(n) + " events");
    return 1;
  }
  WaitUntil(
      [&] {
        if (all_consumed_s < 0 && collector.prefill_seen() >= n)
          all_consumed_s =
              std::chrono::duration<double>(collector.last_prefill_at() - relay_started).count();
        if (checkpoints_s < 0) {
          bool at_head = true;
          for (const auto& st : ReadRelayStatus(*store))
            if (st.datastore == datastore && (!st.error.empty() || st.checkpoint < st.head))
              at_head = false;
          if (at_head) checkpoints_s = relay_clock.Seconds();
        }
        return all_consumed_s >= 0 && checkpoints_s >= 0;
      },
      o.timeout_s, 20);
  if (StopRequested()) return 130;
  const double publish_window_s = all_acked_s - std::max(0.0, first_published_s);
  const double events_per_s = n / publish_window_s;
  const double events_per_s_incl_startup = n / all_acked_s;

  // ---- Phase B: steady writes, commit-to-consume latency ----
  Progress("phase B: " + FormatNumber(o.rate, 0) + " writes/s for " + FormatNumber(o.seconds, 1) +
           " s from " + std::to_string(o.paced_threads) + " writer threads");
  auto scratch_or = ScratchCheckpoints::Create(cfg, run);
  if (!scratch_or.ok()) {
    Progress("scratch checkpoint table: " + scratch_or.status().ToString());
    return 1;
  }
  std::unique_ptr<ScratchCheckpoints> scratch = std::move(scratch_or).value();
  // One checkpoint-like save every 50 ms during the phase: what a save costs
  // while the writers commit (the relay saves each dirty stream every 100 ms).
  std::vector<double> loaded_save_ms, loaded_rtt_ms;
  std::jthread saver([&](std::stop_token st) {
    while (!st.stop_requested() && !StopRequested()) {
      const double ms = scratch->TimeSave();
      if (ms >= 0) loaded_save_ms.push_back(ms);
      const double rtt = scratch->TimeRoundTrip();
      if (rtt >= 0) loaded_rtt_ms.push_back(rtt);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const MicrosSinceEpoch phase_b_start = NowMicros();
  const double cpu_before = ProcessCpuSeconds();
  const std::optional<double> server_cpu_before = ServerCpuSeconds(cluster);
  PacedWrites writes = RunPacedWrites(*store, datastore, column, o.rate, o.seconds, o.paced_threads,
                                      o.body_bytes, run, rng, collector);
  const int64_t latency_writes = writes.total;
  const PacedResult& paced = writes.paced;
  const std::vector<PutResult>& latency_puts = writes.puts;
  const uint64_t latency_errors = writes.errors;
  if (latency_errors) first_error = writes.first_error;
  const double client_cpu = ProcessCpuSeconds() - cpu_before;
  const std::optional<double> server_cpu_after = ServerCpuSeconds(cluster);
  saver.request_stop();
  saver.join();
  const double loaded_save_p50 = Percentile(loaded_save_ms, 50),
               loaded_save_p99 = Percentile(loaded_save_ms, 99);
  const double loaded_rtt_p50 = Percentile(loaded_rtt_ms, 50),
               loaded_rtt_p99 = Percentile(loaded_rtt_ms, 99);
  if (StopRequested()) return 130;
  const uint64_t latency_written = static_cast<uint64_t>(latency_writes) - latency_errors;
  WaitUntil([&] { return collector.latency_seen() >= latency_written; }, 30);
  if (StopRequested()) return 130;
  const RelayStats relay_stats = relay.stats();
  relay.Stop();

  const std::vector<Sample> samples = collector.Latencies();
  std::vector<double> lat = Millis(samples);
  const double p50 = Percentile(lat, 50), p99 = Percentile(lat, 99),
               max_ms = lat.empty() ? 0 : lat.back();
  AckLatency::Figures ack = collector.acks().Join();
  const double ack_p50 = Percentile(ack.ms, 50), ack_p99 = Percentile(ack.ms, 99),
               ack_max = ack.ms.empty() ? 0 : ack.ms.back();
  std::vector<double> puts;
  for (double v : writes.put_ms)
    if (v >= 0) puts.push_back(v);
  const double put_p50 = Percentile(puts, 50), put_p99 = Percentile(puts, 99);
  const uint64_t missing = latency_written - std::min(latency_written, collector.latency_seen());
  const uint64_t latency_seen = collector.latency_seen(), duplicates = collector.duplicates();
  collector_owner.reset();  // its consumer would compete with the exactly-once round's

  // ---- Baseline ----
  const std::string baseline_topic = cfg.kafka.topic_prefix + ".bench_baseline_" + run;
  Progress("baseline: producing the same " + std::to_string(n) +
           " payloads with a bare librdkafka producer to " + baseline_topic);
  BaselineResult base = RunProducerBaseline(cfg, broker.get(), baseline_topic, payloads);
  if (StopRequested()) return 130;
  if (!base.error.empty() || base.acknowledged < n) {
    Progress("baseline failed: " + (base.error.empty()
                                        ? std::to_string(base.failed) + " delivery failures"
                                        : base.error));
    return 1;
  }
  const double baseline_per_s = base.acknowledged / base.seconds;
  const double ratio = events_per_s / baseline_per_s;

  // ---- The exactly-once round ----
  Progress("exactly-once round: " + std::to_string(n) +
           " more cells, then the same paced writes, relay.exactly_once on");
  const ExactlyOnceRound eo = RunExactlyOnceRound(
      cfg,
      {o.cells, o.body_bytes, o.prefill_threads, o.rate, o.seconds, o.paced_threads, o.timeout_s},
      run + "-eo", rng);
  if (StopRequested()) return 130;
  if (!eo.error.empty()) Progress("exactly-once round: " + eo.error);
  const double eo_ratio = events_per_s > 0 ? eo.events_per_s / events_per_s : 0;

  // ---- Where the latency goes ----
  Progress("probes: the Kafka path alone at the same rate, and the relay's per-round work");
  const std::string probe_topic = cfg.kafka.topic_prefix + ".bench_probe_" + run;
  auto kafka_ms = ProbeKafkaPath(cfg, broker.get(), probe_topic, o.rate, std::min(5.0, o.seconds),
                                 payloads.front().value);
  if (StopRequested()) return 130;
  if (!kafka_ms.ok()) {
    Progress("Kafka path probe failed: " + kafka_ms.status().ToString());
    return 1;
  }
  const double kafka_p50 = Percentile(*kafka_ms, 50), kafka_p99 = Percentile(*kafka_ms, 99);
  const RelayProbes work = ProbeRelayWork(*store, *scratch, datastore, 50);
  if (!work.error.empty()) Progress("relay probes: " + work.error);
  const double dirty_per_save = DirtyShardsPerWindow(latency_puts, 100);
  // The same cluster's put rate (blocking single puts, kPutRateCallers
  // callers, as `cellar-bench put` phase 1), with no relay running: issue 16
  // wants the relay to publish from a backlog at >= 1.5x of it.
  Progress("put rate: " + std::to_string(kPutRateCells) + " single puts from " +
           std::to_string(kPutRateCallers) + " callers");
  uint64_t unused_json = 0, unused_encoded = 0;
  const std::vector<CellWrite> put_cells =
      MakeTripCells(kPutRateCells, 1, column, o.body_bytes, rng, &unused_json, &unused_encoded);
  const StorePhaseResult put_phase = RunPutPhase(*store, datastore, put_cells, kPutRateCallers);
  if (StopRequested()) return 130;
  const double put_rate = put_phase.seconds > 0 ? put_phase.rows / put_phase.seconds : 0;
  const double put_rate_ratio = put_rate > 0 ? events_per_s / put_rate : 0;
  store->Close();

  const double cores = std::max(1u, std::thread::hardware_concurrency());
  Table t("cellar-bench relay");
  t.Section("settings");
  DescribeCluster(cluster, t);
  t.Add("kafka", DescribeKafka(broker.get(), cfg.kafka.brokers));
  t.Add("kafka.partitions", std::to_string(cfg.kafka.partitions));
  t.Add("topic", ChangeLogTopic(cfg.kafka, datastore));
  t.Add("relay.batch_cells", std::to_string(cfg.relay.batch_cells));
  t.Add("relay.poll_min_ms / poll_max_ms", std::to_string(cfg.relay.poll_min_ms) + " / " +
                                               std::to_string(cfg.relay.poll_max_ms) +
                                               " (idle poll doubles from min to max)");
  t.Add("relay producer", "idempotent, acks=all, linger.ms=1 (changelog/relay.cc)");
  t.Add("consumer", "ungrouped ChangeLogConsumer, fetch.wait.max.ms=10");
  t.Add("cells (N)", std::to_string(n));
  t.Add("event bytes (mean)", FormatNumber(static_cast<double>(payload_bytes) / n, 1));
  t.Section("phase A: pre-filled shards, then the relay starts");
  t.Add("pre-fill (PutBatch, " + std::to_string(o.prefill_threads) + " threads)",
        FormatNumber(prefill_s, 2) + " s (" + FormatNumber(n / prefill_s, 0) + " cells/s)");
  t.Add("Relay::Start() returned after", FormatNumber(start_returned_s * 1e3, 1) + " ms");
  t.Add("first record produced at", FormatNumber(first_published_s * 1e3, 1) + " ms");
  t.Add("all N acknowledged by Kafka at", FormatNumber(all_acked_s, 3) + " s");
  t.Add("consumer had seen all N at",
        all_consumed_s < 0 ? "not within the timeout" : FormatNumber(all_consumed_s, 3) + " s");
  t.Add("every checkpoint at its head at",
        checkpoints_s < 0 ? "not within the timeout"
                          : FormatNumber(checkpoints_s, 3) + " s (checkpoints saved every 100 ms)");
  t.Add("events/s (first produced .. all acked)", FormatNumber(events_per_s, 0));
  t.Add("events/s including start-up", FormatNumber(events_per_s_incl_startup, 0));
  t.Section("phase B: commit-to-consume latency under steady writes");
  t.Add("target rate", FormatNumber(o.rate, 0) + " writes/s for " + FormatNumber(o.seconds, 1) +
                           " s (" + std::to_string(o.paced_threads) + " writer threads)");
  t.Add("writes", std::to_string(latency_written) + " ok, " + std::to_string(latency_errors) +
                      " failed" +
                      (latency_errors ? " (first: " + first_error + ")" : std::string()));
  t.Add("achieved rate", FormatNumber(latency_writes / paced.seconds, 1) + " writes/s (" +
                             std::to_string(paced.late) + " started > 10 ms late)");
  t.Add("put latency p50 / p99 ms", FormatNumber(put_p50, 2) + " / " + FormatNumber(put_p99, 2));
  t.Add("events consumed",
        std::to_string(latency_seen) + " (" + std::to_string(missing) + " missing after 30 s)");
  AddTwoWayLatencyRows(t, "consume", {p50, p99, max_ms, ack_p50, ack_p99, ack_max}, ack,
                       kTargetP99Ms, ", issue 3: a committed cell is published");
  t.Add("relay: published / acknowledged",
        std::to_string(relay_stats.published) + " / " + std::to_string(relay_stats.acknowledged));
  t.Add("relay: rewinds", std::to_string(relay_stats.rewinds));
  t.Add("duplicates seen by the consumer", std::to_string(duplicates));
  t.Add("p99 ms per second of the phase", PerSecond(samples, phase_b_start, 99));
  t.Add("client CPU during the phase", FormatNumber(client_cpu, 2) + " s");
  if (server_cpu_before && server_cpu_after)
    t.Add("CPU busy, client + server",
          FormatNumber(100.0 * (client_cpu + *server_cpu_after - *server_cpu_before) /
                           (paced.seconds * cores),
                       0) +
              " % of " + FormatNumber(cores, 0) + " cores");
  t.Section("where the latency goes (probes after phase B)");
  t.Add("Kafka path alone p50 / p99 ms",
        FormatNumber(kafka_p50, 2) + " / " + FormatNumber(kafka_p99, 2) +
            " (bare producer -> same consumer settings, " + FormatNumber(o.rate, 0) +
            " records/s, " + std::to_string(kafka_ms->size()) + " records)");
  t.Add("relay round: heads query p50 ms", FormatNumber(work.heads_p50_ms, 2) + " (" +
                                               std::to_string(work.heads_streams) +
                                               " streams: shards x datastores, every round)");
  t.Add("relay round: HostLog read p50 ms",
        FormatNumber(work.shard_log_p50_ms, 2) + " (per dirty stream, sequential)");
  t.Add("relay: checkpoint save p50 ms",
        FormatNumber(work.save_p50_ms, 2) + " (autocommit upsert, per dirty stream)");
  t.Add("checkpoint save during phase B p50 / p99 ms",
        FormatNumber(loaded_save_p50, 2) + " / " + FormatNumber(loaded_save_p99, 2) + " (" +
            std::to_string(loaded_save_ms.size()) + " probe saves, one per 50 ms)");
  t.Add("SELECT 1 round trip during phase B p50 / p99 ms",
        FormatNumber(loaded_rtt_p50, 2) + " / " + FormatNumber(loaded_rtt_p99, 2));
  t.Add("dirty shards per 100 ms (phase B)",
        FormatNumber(dirty_per_save, 1) + " (checkpoints a save round writes, in one transaction)");
  t.Add("est. relay round trips per 100 ms",
        FormatNumber(1 + dirty_per_save, 0) + " (heads + a HostLog read per dirty stream) x " +
            FormatNumber(loaded_rtt_p50, 2) +
            " ms = " + FormatNumber((1 + dirty_per_save) * loaded_rtt_p50, 1) +
            " ms; checkpoints are saved on their own thread");
  t.Section("baseline: bare librdkafka producer, same payloads and broker");
  t.Add("topic", baseline_topic);
  t.Add("events acknowledged", std::to_string(base.acknowledged));
  t.Add("seconds (first produce .. flush done)", FormatNumber(base.seconds, 3));
  t.Add("baseline events/s", FormatNumber(baseline_per_s, 0));
  t.Section("exactly-once round (relay.exactly_once, fenced batches; the phases above: off)");
  t.Add("events/s from N pre-filled cells", FormatNumber(eo.events_per_s, 0));
  t.Add("exactly-once / at-least-once events/s", FormatNumber(eo_ratio, 3) + " (target >= 0.7)");
  t.Add("commit-ack to consume p50 / p99 / max ms",
        FormatNumber(eo.ack_p50_ms, 2) + " / " + FormatNumber(eo.ack_p99_ms, 2) + " / " +
            FormatNumber(eo.ack_max_ms, 2) + " (target p99 < 50)");
  t.Add("events consumed / missing / duplicates", std::to_string(eo.latency_events) + " / " +
                                                      std::to_string(eo.missing) + " / " +
                                                      std::to_string(eo.duplicates));
  t.Add("batches rolled back", std::to_string(eo.failed_batches));
  t.Section("put rate of the same cluster (blocking single puts, no relay running)");
  t.Add(
      "puts/s (" + std::to_string(kPutRateCallers) + " callers, " + std::to_string(put_phase.rows) +
          " cells)",
      FormatNumber(put_rate, 0) + (put_phase.errors ? " (" + std::to_string(put_phase.errors) +
                                                          " failed: " + put_phase.first_error + ")"
                                                    : std::string()));
  t.Section("result");
  t.Add("ratio (relay events/s / baseline)", FormatNumber(ratio, 3));
  t.Add("put_rate_ratio (relay events/s / put rate)",
        FormatNumber(put_rate_ratio, 3) + " (issue 16 target >= 1.5)");
  t.Print();

  nlohmann::ordered_json j;
  j["bench"] = "relay";
  AddBrokerKeys(j, broker.get());
  j["cells"] = n;
  j["events_per_s"] = Round(events_per_s, 1);
  j["events_per_s_incl_startup"] = Round(events_per_s_incl_startup, 1);
  j["p50_ms"] = Round(p50, 3);
  j["p99_ms"] = Round(p99, 3);
  j["max_ms"] = Round(max_ms, 3);
  j["ack_p50_ms"] = Round(ack_p50, 3);
  j["ack_p99_ms"] = Round(ack_p99, 3);
  j["ack_max_ms"] = Round(ack_max, 3);
  j["arrived_before_ack"] = ack.arrived_before_ack;
  j["baseline_events_per_s"] = Round(baseline_per_s, 1);
  j["ratio"] = Round(ratio, 3);
  j["kafka_path_p50_ms"] = Round(kafka_p50, 3);
  j["kafka_path_p99_ms"] = Round(kafka_p99, 3);
  j["checkpoint_save_p50_ms"] = Round(loaded_save_p50, 3);
  j["dirty_shards_per_100ms"] = Round(dirty_per_save, 1);
  j["rate"] = o.rate;
  j["achieved_rate"] = Round(latency_writes / paced.seconds, 1);
  j["latency_events"] = latency_seen;
  j["missing"] = missing;
  j["duplicates"] = duplicates;
  j["exactly_once_events_per_s"] = Round(eo.events_per_s, 1);
  j["exactly_once_ack_p50_ms"] = Round(eo.ack_p50_ms, 3);
  j["exactly_once_ack_p99_ms"] = Round(eo.ack_p99_ms, 3);
  j["exactly_once_ratio"] = Round(eo_ratio, 3);
  j["exactly_once_missing"] = eo.missing;
  j["exactly_once_duplicates"] = eo.duplicates;
  j["exactly_once_targets_met"] = eo.error.empty() && eo_ratio >= 0.7 && eo.ack_p99_ms < 50;
  j["shards"] = cfg.shards;
  j["partitions"] = cfg.kafka.partitions;
  j["poll_min_ms"] = cfg.relay.poll_min_ms;
  j["poll_max_ms"] = cfg.relay.poll_max_ms;
  j["batch_cells"] = cfg.relay.batch_cells;
  j["errors"] = latency_errors;
  j["put_rate"] = Round(put_rate, 1);
  j["put_rate_ratio"] = Round(put_rate_ratio, 3);
  PrintJsonLine(j);
  return latency_errors || missing || !eo.error.empty() || eo.missing ? 1 : 0;
}

}  // namespace

void AddRelayCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RelayBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "relay",
      "change-log relay: events/s from pre-filled shards vs a bare librdkafka producer, and "
      "commit-to-consume latency at a steady write rate (starts a private broker with the "
      "private MariaDB)");
  AddPipelineOptions(cmd, o.get());
  cmd->callback([o, exit_code] { *exit_code = RunRelayBench(*o); });
}

}  // namespace cellar::bench
