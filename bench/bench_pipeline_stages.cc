// The stages `cellar-bench pipeline` runs in its own process (see
// bench_pipeline.cc) and what they count: the relay, one IndexWorker with
// driver_partner_index, a no-op C++ trigger and a webhook trigger posting to
// an in-process sink (testing::WebhookSink).
#include <string>
#include <utility>

#include "base/time.h"
#include "bench/bench_pipeline.h"
#include "bench/bench_put_raw.h"
#include "changelog/cell_event.h"
#include "changelog/consumer_groups.h"
#include "changelog/consumer_probe.h"

namespace cellar::bench::pipeline {

nlohmann::json StepBody(std::mt19937_64& rng, int body_bytes, const std::string& run, int step,
                        const Uuid& driver) {
  // A trip as the put benchmark writes it, plus the fields driver_partner_index reads.
  nlohmann::json body = MakeTripBody(rng, body_bytes);
  body["bench_run"] = run;
  body["bench_step"] = step;
  body["driver_partner_uuid"] = driver.ToString();
  body["city_uuid"] = Uuid::Random().ToString();
  body["trip_created_at"] = FormatRfc3339(NowMicros());
  return body;
}

Stages::Stages(CellStore* store, const PipelineBenchOptions& options, std::string run,
               IndexDefinition index, size_t steps)
    : store_(store), o_(options), run_(std::move(run)), index_(std::move(index)) {
  for (size_t i = 0; i < steps; ++i) {
    handler_.push_back(std::make_unique<StageLatency>());
    webhook_.push_back(std::make_unique<StageLatency>());
  }
}

Stages::~Stages() { Stop(); }

std::optional<int> Stages::StepOf(const nlohmann::json& body) const {
  if (!body.is_object()) return std::nullopt;
  auto r = body.find("bench_run");
  if (r == body.end() || *r != run_) return std::nullopt;
  auto s = body.find("bench_step");
  if (s == body.end() || !s->is_number_integer()) return std::nullopt;
  return s->get<int>();
}

void Stages::Arrived(std::vector<std::unique_ptr<StageLatency>>& stage, const Cell& cell,
                     std::atomic<uint64_t>& total) {
  const MicrosSinceEpoch now = NowMicros();
  total++;
  const std::optional<int> step = StepOf(cell.body);
  if (!step || *step < 0 || static_cast<size_t>(*step) >= stage.size()) return;
  StageLatency& s = *stage[static_cast<size_t>(*step)];
  s.ack.Arrived(AckLatency::Key(cell.shard, cell.added_id), now);
  s.arrived++;
}

TriggerHandler Stages::NoopHandler() {
  return [this](const CellEvent& e, TriggerContext&) {
    Arrived(handler_, e.cell, handled_);
    if (StepOf(e.cell.body) == -1) backlog_handled_++;
    return Status::Ok();
  };
}

Status Stages::Start() {
  auto sink = testing::WebhookSink::Start(
      [this](const std::string&, const std::string& body) {
        if (o_.webhook_batch_size <= 1) {
          auto event = DecodeCellEvent(body);
          if (!event.ok()) return 422;
          Arrived(webhook_, event->cell, delivered_);
          return 200;
        }
        // A batch: CloudEvents in structured mode, the change-log event as "data".
        auto batch = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
        if (!batch.is_array()) return 422;
        for (auto& element : batch) {
          auto data = element.find("data");
          if (data == element.end() || !data->is_object()) return 422;
          Cell cell;
          cell.shard = data->value("shard", 0u);
          cell.added_id = data->value("added_id", uint64_t{0});
          if (auto b = data->find("body"); b != data->end()) cell.body = std::move(*b);
          Arrived(webhook_, cell, delivered_);
        }
        return 200;
      },
      /*threads=*/0, "bench-sink");
  if (!sink.ok()) return sink.status();
  sink_ = std::move(sink).value();
  webhook_url_ = sink_->Url("/hook");
  CELLAR_RETURN_IF_ERROR(StartRelay());
  CELLAR_RETURN_IF_ERROR(StartIndexWorker());

  TriggerWorkerOptions wopts;
  wopts.client_id = "cellar-bench-pipeline";
  wopts.metrics = &trigger_metrics_;
  triggers_ = std::make_unique<TriggerWorker>(store_->config(), wopts);
  TriggerOptions topts;
  topts.concurrency = o_.trigger_concurrency;
  const std::string& datastore = index_.datastore;
  const std::string& column = index_.column_defs.at(0).column_key;
  CELLAR_RETURN_IF_ERROR(triggers_->on(datastore, column, noop_name(), NoopHandler(), topts));
  WebhookTriggerConfig hook;
  hook.name = webhook_name();
  hook.datastore = datastore;
  hook.column = column;
  hook.url = webhook_url_;
  hook.timeout_ms = 5000;
  hook.batch_size = o_.webhook_batch_size;
  hook.batch_window_ms = o_.webhook_batch_window_ms;
  CELLAR_RETURN_IF_ERROR(triggers_->on_webhook(hook));
  if (const BenchBroker* broker = CurrentBenchBroker())
    for (const std::string& trigger : {noop_name(), webhook_name()})
      CELLAR_RETURN_IF_ERROR(
          broker->CreateTriggerTopics(store_->config().kafka, datastore, trigger));
  return triggers_->Start();
}

Status Stages::StartRelay() {
  if (relay_) {
    relay_acknowledged_before_ += relay_->stats().acknowledged;
    relay_transactions_before_ += relay_->stats().transactions;
    relay_.reset();
  }
  relay_ = std::make_unique<Relay>(store_, "bench-pipeline-" + run_);
  return relay_->Start();
}

Status Stages::StartIndexWorker() {
  indexer_.reset();
  IndexWorkerOptions options;
  options.metrics = &index_metrics_;
  if (o_.index_lanes > 0) options.lanes_per_host = o_.index_lanes;
  if (o_.index_linger_ms >= 0) options.batch_linger_ms = o_.index_linger_ms;
  if (o_.index_lane_share_below >= 0) options.lane_share_below = o_.index_lane_share_below;
  indexer_ = std::make_unique<IndexWorker>(store_, std::vector<IndexDefinition>{index_}, options);
  return indexer_->Start();
}

Status Stages::StartNoopTrigger() {
  triggers_.reset();
  TriggerWorkerOptions wopts;
  wopts.client_id = "cellar-bench-pipeline";
  wopts.metrics = &trigger_metrics_;
  triggers_ = std::make_unique<TriggerWorker>(store_->config(), wopts);
  TriggerOptions topts;
  topts.concurrency = o_.trigger_concurrency;
  CELLAR_RETURN_IF_ERROR(triggers_->on(index_.datastore, index_.column_defs.at(0).column_key,
                                       noop_name(), NoopHandler(), topts));
  return triggers_->Start();
}

void Stages::Stop() {
  if (triggers_) triggers_->Stop();
  if (indexer_) indexer_->Stop();
  if (relay_) relay_->Stop();
  sink_.reset();
}

uint64_t Stages::relay_transactions() const {
  return relay_transactions_before_ + (relay_ ? relay_->stats().transactions : 0);
}

uint64_t Stages::relay_acknowledged() const {
  return relay_acknowledged_before_ + (relay_ ? relay_->stats().acknowledged : 0);
}

uint64_t Stages::index_applied() const {
  uint64_t n = 0;
  for (const char* outcome : {"upserted", "removed", "stale", "skipped"})
    n += index_metrics_
             .GetCounter("cellar_index_applied_total", "Cell versions applied to an index",
                         {{"index", index_.table}, {"outcome", outcome}})
             .value();
  return n;
}

std::vector<std::pair<std::string, uint64_t>> Stages::records_decoded() const {
  const KafkaConfig& kafka = store_->config().kafka;
  auto decoded = [](MetricsRegistry& registry, const std::string& group) {
    return ConsumerProbe(&registry, group).RecordsDecoded().value();
  };
  return {{"index_worker", decoded(index_metrics_, IndexerGroup(kafka))},
          {"noop_trigger", decoded(trigger_metrics_, TriggerGroup(kafka, noop_name()))},
          {"webhook_trigger", decoded(trigger_metrics_, TriggerGroup(kafka, webhook_name()))}};
}

uint64_t Stages::index_records_lost() const {
  // The consumer's own series (ConsumerProbe registers it): the same counter.
  return ConsumerProbe(&index_metrics_, IndexerGroup(store_->config().kafka))
      .SkippedRecords()
      .value();
}

}  // namespace cellar::bench::pipeline
