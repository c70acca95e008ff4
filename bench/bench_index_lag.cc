// Phase A of `cellar-bench index` (see bench_index.cc): write-commit to
// query-visible lag. The relay and an IndexWorker run; a paced writer puts
// trips, --pollers threads query the live index for every --sample-every'th
// put until it shows up, and a bare consumer (Tap) measures the relay + Kafka
// part of the lag next to them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_common.h"
#include "bench/bench_index_phases.h"
#include "bench/bench_load.h"
#include "cells/cell_store.h"
#include "changelog/cell_event.h"
#include "changelog/consumer_groups.h"
#include "changelog/kafka/change_log_consumer.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "changelog/relay.h"
#include "indexes/index_query.h"
#include "indexes/index_worker.h"

namespace cellar::bench::index_phases {
namespace {

// Quantile q of what `h` observed since `before` (its CumulativeCounts() then),
// answered as Histogram::Quantile does (BucketQuantile: the upper bound of the
// bucket holding it; above the top bound, the largest value `h` ever
// observed), in ms; 0 when it observed nothing since. The worker's histogram
// counts from its start, and against a used cluster that includes the
// catch-up on earlier runs' cells (their lag is their age): phase A reads its
// own window.
double QuantileSinceMs(const Histogram& h, const std::vector<uint64_t>& before, double q) {
  double sum = 0;
  std::vector<uint64_t> since = h.CumulativeCounts(&sum);
  for (size_t i = 0; i < since.size() && i < before.size(); ++i) since[i] -= before[i];
  return BucketQuantile(h.bounds(), since, q, h.max()) * 1000;
}

// ---- A bare consumer next to the worker ------------------------------------------

// Reads the change log without a group in a background thread and records,
// for every event of a cell created at or after `since`, arrival time minus
// created_at, and its arrival time for the commit-ack join: the relay + Kafka
// part of the index lag.
class Tap {
 public:
  Tap(std::unique_ptr<ChangeLogConsumer> consumer, MicrosSinceEpoch since)
      : consumer_(std::move(consumer)), since_(since) {
    thread_ = std::jthread([this](std::stop_token st) {
      while (!st.stop_requested() && !StopRequested()) {
        auto r = consumer_->Poll(100);
        if (!r.ok() || !r->has_value()) continue;
        const MicrosSinceEpoch now = NowMicros();
        const Cell& c = (*r)->event.cell;
        if (c.created_at < since_) continue;
        acks_.Arrived(AckLatency::Key(c.shard, c.added_id), now);
        std::lock_guard<std::mutex> lock(mu_);
        ms_.push_back(static_cast<double>(now - c.created_at) / 1e3);
      }
    });
  }
  ~Tap() {
    thread_.request_stop();
    thread_.join();
    consumer_->Close();
  }
  std::vector<double> Millis() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ms_;
  }
  // Arrival times of those events; the paced writer adds its acks.
  AckLatency& acks() { return acks_; }

 private:
  std::unique_ptr<ChangeLogConsumer> consumer_;
  const MicrosSinceEpoch since_;
  mutable std::mutex mu_;
  std::vector<double> ms_;
  AckLatency acks_;
  std::jthread thread_;
};

}  // namespace

int RunLagPhase(const IndexBenchRun& b, IndexReader& reader, LagFigures* out) {
  const IndexBenchOptions& o = b.o;
  const ClusterConfig& cfg = b.cfg;
  CellStore* const store = b.store;
  const std::string& datastore = b.datastore;
  const std::string& column = b.column;
  Progress("phase A: starting the relay and the index worker");
  Relay relay(store, "bench-" + b.run);
  if (Status s = relay.Start(); !s.ok()) {
    Progress("relay start failed: " + s.ToString());
    return 1;
  }
  IndexWorker worker(store, {b.live_def});
  if (Status s = worker.Start(); !s.ok()) {
    Progress("index worker start failed: " + s.ToString());
    return 1;
  }

  // True when the live index returns `row` under (driver, city).
  auto visible_now = [&](const Uuid& driver, const std::string& city, const Uuid& row) {
    IndexQuery q;
    q.index = kLiveIndex;
    q.shard_value = driver.ToString();
    q.filters = {IndexFilter{"city", IndexFilter::Op::kEq, {city}}};
    q.limit = 10;
    auto r = reader.Query(q);
    if (r.ok())
      for (const auto& h : r->hits)
        if (h.row_key == row) return true;
    return false;
  };
  // Polls until `row` shows up; the wall-clock time it did, or -1 after timeout_s.
  auto wait_visible = [&](const Uuid& driver, const std::string& city, const Uuid& row,
                          double timeout_s) -> MicrosSinceEpoch {
    Stopwatch clock;
    while (!StopRequested() && clock.Seconds() < timeout_s) {
      if (visible_now(driver, city, row)) return NowMicros();
      std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
    }
    return -1;
  };

  // The bare consumer starts at the log's end (assigned now, before the warm-up
  // write): against a used cluster (--config) the change log holds earlier
  // runs' events, which it must not spend phase A reading.
  ConsumerOptions tap_opts;
  tap_opts.from_beginning = false;
  tap_opts.client_id = "cellar-bench-tap";
  auto tap_consumer = ChangeLogConsumer::Create(cfg, {datastore}, tap_opts);
  if (!tap_consumer.ok()) {
    Progress("consumer: " + tap_consumer.status().ToString());
    return 1;
  }

  // Warm-up: the first write waits for the consumer group to form (~3 s on the mock).
  double warmup_s = 0;
  {
    const Uuid driver = Uuid::Random(), row = Uuid::Random();
    auto r = store->Put(datastore, {row, column, 0, TripBody(driver, "london", NowMicros(), 10)});
    if (!r.ok()) {
      Progress("warm-up put failed: " + r.status().ToString());
      return 1;
    }
    Stopwatch clock;
    if (wait_visible(driver, "london", row, o.timeout_s) < 0) {
      if (StopRequested()) return 130;
      Progress("warm-up: the first entry did not become visible within " +
               std::to_string(o.timeout_s) + " s");
      return 1;
    }
    warmup_s = clock.Seconds();
    // Against a used cluster the worker's new group starts at the log's
    // beginning: let it work through earlier events before phase A measures.
    const std::string topic = ChangeLogTopic(cfg.kafka, datastore);
    while (!StopRequested() && clock.Seconds() < o.timeout_s) {
      auto lag = ReadGroupLag(cfg, IndexerGroup(cfg.kafka), {topic});
      if (lag.ok() && lag->total == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    warmup_s = clock.Seconds();
  }

  const int64_t writes = static_cast<int64_t>(o.rate * o.seconds);
  Progress("phase A: " + FormatNumber(o.rate, 0) + " writes/s for " + FormatNumber(o.seconds, 1) +
           " s; polling the index after every " + std::to_string(o.sample_every) + "th put");
  std::mutex mu;
  std::vector<double> lags_ms, ack_lags_ms, put_ms;
  std::atomic<uint64_t> put_errors{0}, not_visible{0}, total_polls{0}, first_poll_visible{0};
  std::string first_error;
  // Sampled puts are polled by --pollers threads, each querying every one of
  // its pending samples once per round (then sleeping --poll-ms), so polling
  // never holds up the paced writer.
  struct Pending {
    Uuid driver;
    std::string city;
    Uuid row;
    MicrosSinceEpoch created_at = 0;
    MicrosSinceEpoch acked = 0;  // when Put returned OK
    Stopwatch since;
    bool polled = false;
  };
  std::vector<std::mutex> pending_mu(static_cast<size_t>(o.pollers));
  std::vector<std::vector<Pending>> pending(static_cast<size_t>(o.pollers));
  std::atomic<bool> writing_done{false};
  PacedResult paced;
  std::optional<Tap> tap;
  tap.emplace(std::move(tap_consumer).value(), NowMicros());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the tap connects and catches up
  Histogram& worker_lag = worker.metrics().GetHistogram("cellar_index_lag_seconds", "");
  double worker_lag_sum = 0;
  const std::vector<uint64_t> worker_lag_before = worker_lag.CumulativeCounts(&worker_lag_sum);
  const double cpu_before = ProcessCpuSeconds();
  const std::optional<double> server_cpu_before = ServerCpuSeconds(b.cluster);
  {
    std::vector<std::jthread> pollers;
    for (size_t p = 0; p < pending.size(); ++p)
      pollers.emplace_back([&, p] {
        while (!StopRequested()) {
          std::vector<Pending> mine;
          {
            std::lock_guard<std::mutex> lock(pending_mu[p]);
            mine.swap(pending[p]);
          }
          if (mine.empty()) {
            if (writing_done) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
          }
          std::vector<Pending> still;
          for (auto& x : mine) {
            total_polls++;
            const bool first_poll = !x.polled;
            x.polled = true;
            if (visible_now(x.driver, x.city, x.row)) {
              const MicrosSinceEpoch now = NowMicros();
              if (first_poll) first_poll_visible++;
              std::lock_guard<std::mutex> lock(mu);
              lags_ms.push_back(static_cast<double>(now - x.created_at) / 1e3);
              ack_lags_ms.push_back(static_cast<double>(std::max<int64_t>(0, now - x.acked)) / 1e3);
            } else if (x.since.Seconds() > 10) {
              not_visible++;
            } else {
              still.push_back(std::move(x));
            }
          }
          {
            std::lock_guard<std::mutex> lock(pending_mu[p]);
            for (auto& x : still) pending[p].push_back(std::move(x));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
        }
      });
    paced = RunPaced(o.paced_threads, writes, o.rate, [&](int64_t k) {
      const Uuid driver = Uuid::Random(), row = Uuid::Random();
      const std::string city = kCities[static_cast<size_t>(k) % std::size(kCities)];
      const MicrosSinceEpoch requested = NowMicros();
      Stopwatch put_clock;
      auto r = store->Put(
          datastore, {row, column, 0, TripBody(driver, city, requested, 5 + (k % 1000) / 10.0)});
      const MicrosSinceEpoch acked = NowMicros();
      const double put_took = put_clock.Millis();
      if (!r.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (put_errors++ == 0) first_error = r.status().ToString();
        return;
      }
      tap->acks().Acked(AckLatency::Key(r->shard, r->added_id), acked);
      if (k % o.sample_every == 0) {
        const size_t p = static_cast<size_t>(k / o.sample_every) % pending.size();
        std::lock_guard<std::mutex> lock(pending_mu[p]);
        pending[p].push_back(Pending{driver, city, row, r->created_at, acked, Stopwatch(), false});
      }
      std::lock_guard<std::mutex> lock(mu);
      put_ms.push_back(put_took);
    });
    writing_done = true;
  }
  const double client_cpu = ProcessCpuSeconds() - cpu_before;
  const std::optional<double> server_cpu_after = ServerCpuSeconds(b.cluster);
  if (StopRequested()) return 130;
  // Let the worker finish the tail before reading its histogram.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  out->worker_p50 = QuantileSinceMs(worker_lag, worker_lag_before, 0.5);
  out->worker_p99 = QuantileSinceMs(worker_lag, worker_lag_before, 0.99);
  std::vector<double> tap_ms = tap->Millis();
  AckLatency::Figures tap_ack = tap->acks().Join();
  tap.reset();
  out->tap_events = tap_ms.size();
  out->tap_p50 = Percentile(tap_ms, 50);
  out->tap_p99 = Percentile(tap_ms, 99);
  out->tap_ack_p50 = Percentile(tap_ack.ms, 50);
  out->tap_ack_p99 = Percentile(tap_ack.ms, 99);
  out->tap_arrived_before_ack = tap_ack.arrived_before_ack;
  worker.Stop();
  relay.Stop();
  out->lag_p50 = Percentile(lags_ms, 50);
  out->lag_p99 = Percentile(lags_ms, 99);
  out->lag_max = lags_ms.empty() ? 0 : lags_ms.back();
  out->ack_p50 = Percentile(ack_lags_ms, 50);
  out->ack_p99 = Percentile(ack_lags_ms, 99);
  out->ack_max = ack_lags_ms.empty() ? 0 : ack_lags_ms.back();
  out->put_p50 = Percentile(put_ms, 50);
  out->put_p99 = Percentile(put_ms, 99);
  out->achieved = writes / paced.seconds;
  out->samples = lags_ms.size();
  out->warmup_s = warmup_s;
  out->writes = writes;
  out->put_errors = put_errors.load();
  out->paced = paced;
  out->not_visible = not_visible.load();
  out->total_polls = total_polls.load();
  out->first_poll_visible = first_poll_visible.load();
  out->client_cpu = client_cpu;
  out->server_cpu_before = server_cpu_before;
  out->server_cpu_after = server_cpu_after;
  return 0;
}

}  // namespace cellar::bench::index_phases
