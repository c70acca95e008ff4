#include "bench/bench_relay_collector.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "bench/bench_common.h"
#include "changelog/cell_event.h"
#include "changelog/kafka/change_log_consumer.h"

namespace cellar::bench::relay_parts {
namespace {

// ---- Event identity ---------------------------------------------------------

uint64_t EventKey(uint32_t shard, uint64_t added_id) {
  return (static_cast<uint64_t>(shard) << 44) | added_id;
}

}  // namespace

// ---- The consumer -------------------------------------------------------------

std::vector<double> Millis(const std::vector<Sample>& samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  for (const auto& s : samples) out.push_back(s.ms);
  return out;
}

std::string PerSecond(const std::vector<Sample>& samples, MicrosSinceEpoch t0, double p) {
  std::vector<std::vector<double>> by_second;
  for (const auto& s : samples) {
    const auto sec = static_cast<size_t>(std::max<int64_t>(0, (s.created_at - t0) / 1000000));
    if (by_second.size() <= sec) by_second.resize(sec + 1);
    by_second[sec].push_back(s.ms);
  }
  std::string out;
  for (auto& v : by_second) out += (out.empty() ? "" : ", ") + FormatNumber(Percentile(v, p), 0);
  return out;
}

Collector::Collector(std::unique_ptr<ChangeLogConsumer> consumer, std::string run)
    : consumer_(std::move(consumer)), run_(std::move(run)) {
  thread_ = std::jthread([this](std::stop_token st) { Run(st); });
}

Collector::~Collector() {
  thread_.request_stop();
  thread_.join();
  consumer_->Close();
}

void Collector::Run(std::stop_token st) {
  while (!st.stop_requested() && !StopRequested()) {
    auto r = consumer_->Poll(100);
    if (!r.ok()) {
      errors_++;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // broker hiccup
      continue;
    }
    if (!r->has_value()) continue;
    const MicrosSinceEpoch now = NowMicros();
    const Cell& c = (*r)->event.cell;
    if (!c.body.is_object()) continue;
    auto run = c.body.find("bench_run");
    if (run == c.body.end() || *run != run_) continue;
    if (!seen_.insert(EventKey(c.shard, c.added_id)).second) {
      duplicates_++;
      continue;
    }
    if (c.body.value("bench_phase", "") == "latency") {
      acks_.Arrived(AckLatency::Key(c.shard, c.added_id), now);
      std::lock_guard<std::mutex> lock(mu_);
      latencies_.push_back({c.created_at, static_cast<double>(now - c.created_at) / 1e3});
      latency_seen_++;
    } else {
      last_prefill_at_ = Stopwatch::Clock::now().time_since_epoch().count();
      prefill_seen_++;
    }
  }
}

}  // namespace cellar::bench::relay_parts
