#include "bench/bench_relay_rounds.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "base/time.h"
#include "bench/bench_common.h"
#include "bench/bench_relay_baselines.h"
#include "changelog/relay.h"

namespace cellar::bench::relay_parts {

Prefilled Prefill(CellStore& store, const std::string& datastore, const std::string& column, int n,
                  int body_bytes, int threads, const std::string& run, std::mt19937_64& rng) {
  Prefilled out;
  out.cells.resize(static_cast<size_t>(n));
  for (auto& c : out.cells) {
    c.row_key = Uuid::Random();
    c.column = column;
    c.body = MakeBody(rng, body_bytes, run, "prefill");
  }
  out.written.resize(out.cells.size());
  std::atomic<uint64_t> errors{0};
  std::mutex error_mu;
  const size_t chunk =
      static_cast<size_t>(std::max(1, std::min(1000, store.config().limits.max_batch_cells)));
  Stopwatch clock;
  {
    std::atomic<size_t> next{0};
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        while (!StopRequested()) {
          const size_t begin = next.fetch_add(chunk);
          if (begin >= out.cells.size()) break;
          const size_t end = std::min(out.cells.size(), begin + chunk);
          std::vector<CellWrite> batch(out.cells.begin() + begin, out.cells.begin() + end);
          auto results = store.PutBatch(datastore, batch);
          for (size_t i = 0; i < results.size(); ++i) {
            if (results[i].ok()) {
              out.written[begin + i] = *results[i];
            } else if (errors++ == 0) {
              std::lock_guard<std::mutex> lock(error_mu);
              out.error = "pre-fill failed, first error: " + results[i].status().ToString();
            }
          }
        }
      });
  }
  out.seconds = clock.Seconds();
  return out;
}

PacedWrites RunPacedWrites(CellStore& store, const std::string& datastore,
                           const std::string& column, double rate, double seconds, int threads,
                           int body_bytes, const std::string& run, std::mt19937_64& rng,
                           Collector& collector) {
  PacedWrites out;
  out.total = static_cast<int64_t>(rate * seconds);
  std::vector<nlohmann::json> bodies(static_cast<size_t>(out.total));
  for (auto& b : bodies) b = MakeBody(rng, body_bytes, run, "latency");
  out.put_ms.assign(static_cast<size_t>(out.total), -1);
  out.puts.resize(static_cast<size_t>(out.total));
  std::atomic<uint64_t> errors{0};
  std::mutex error_mu;
  out.paced = RunPaced(threads, out.total, rate, [&](int64_t k) {
    CellWrite w{Uuid::Random(), column, 0, std::move(bodies[static_cast<size_t>(k)])};
    Stopwatch put_clock;
    auto r = store.Put(datastore, w);
    const MicrosSinceEpoch acked = NowMicros();
    if (!r.ok()) {
      if (errors++ == 0) {
        std::lock_guard<std::mutex> lock(error_mu);
        out.first_error = r.status().ToString();
      }
      return;
    }
    out.put_ms[static_cast<size_t>(k)] = put_clock.Millis();
    out.puts[static_cast<size_t>(k)] = *r;
    collector.acks().Acked(AckLatency::Key(r->shard, r->added_id), acked);
  });
  out.errors = errors.load();
  return out;
}

ExactlyOnceRound RunExactlyOnceRound(const ClusterConfig& config, const RoundSettings& settings,
                                     const std::string& run, std::mt19937_64& rng) {
  ExactlyOnceRound out;
  ClusterConfig cfg = config;
  cfg.relay.exactly_once = true;
  const std::string datastore = cfg.datastores[0].name;
  const std::string column = cfg.datastores[0].columns[0].name;
  std::unique_ptr<CellStore> store = CellStore::Open(cfg);
  Prefilled pre = Prefill(*store, datastore, column, settings.cells, settings.body_bytes,
                          settings.prefill_threads, run, rng);
  if (!pre.error.empty()) {
    out.error = pre.error;
    return out;
  }
  ConsumerOptions copts;
  copts.from_beginning = true;
  copts.client_id = "cellar-bench-relay-exactly-once";
  auto consumer = ChangeLogConsumer::Create(cfg, {datastore}, copts);
  if (!consumer.ok()) {
    out.error = "consumer: " + consumer.status().ToString();
    return out;
  }
  Collector collector(std::move(consumer).value(), run);
  Relay relay(store.get(), "bench-exactly-once-" + run);
  if (Status s = relay.Start(); !s.ok()) {
    out.error = "relay start failed: " + s.ToString();
    return out;
  }
  const uint64_t n = pre.cells.size();
  Stopwatch clock;
  double first_published_s = -1;
  const bool acked = WaitUntil(
      [&] {
        const RelayStats st = relay.stats();
        if (first_published_s < 0 && st.published > 0) first_published_s = clock.Seconds();
        return st.acknowledged >= n;
      },
      settings.timeout_s);
  const double all_acked_s = clock.Seconds();
  if (!acked) {
    out.error = "timed out: Kafka acknowledged " + std::to_string(relay.stats().acknowledged) +
                " of " + std::to_string(n) + " events";
    return out;
  }
  out.events_per_s = n / (all_acked_s - std::max(0.0, first_published_s));
  WaitUntil([&] { return collector.prefill_seen() >= n; }, settings.timeout_s, 20);

  PacedWrites paced =
      RunPacedWrites(*store, datastore, column, settings.rate, settings.seconds,
                     settings.writer_threads, settings.body_bytes, run, rng, collector);
  const uint64_t written = static_cast<uint64_t>(paced.total) - paced.errors;
  WaitUntil([&] { return collector.latency_seen() >= written; }, 30);
  const RelayStats stats = relay.stats();
  relay.Stop();
  AckLatency::Figures ack = collector.acks().Join();
  out.ack_p50_ms = Percentile(ack.ms, 50);
  out.ack_p99_ms = Percentile(ack.ms, 99);
  out.ack_max_ms = ack.ms.empty() ? 0 : ack.ms.back();
  out.latency_events = collector.latency_seen();
  out.missing = written - std::min(written, collector.latency_seen());
  out.duplicates = collector.duplicates();
  out.failed_batches = stats.failed_fenced_batches;
  out.skipped_already_published = stats.skipped_already_published;
  if (paced.errors) out.error = "paced puts failed, first: " + paced.first_error;
  store->Close();
  return out;
}

}  // namespace cellar::bench::relay_parts
