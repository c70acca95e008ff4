#include "bench/bench_http_phases.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace cellar::bench {

Figures Summarize(HttpPhaseResult& r) {
  Figures f;
  f.per_s = r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0;
  f.p50 = Percentile(r.latencies_ms, 50);
  f.p99 = Percentile(r.latencies_ms, 99);
  return f;
}

double CpuUsPerOp(const HttpPhaseResult& r) {
  const double cpu_s = r.usage.client_cpu_s + r.usage.server_cpu_s.value_or(0);
  return r.ops > 0 ? cpu_s * 1e6 / static_cast<double>(r.ops) : 0;
}

HttpPhaseResult MedianRound(std::vector<HttpPhaseResult> rounds, const std::vector<double>& rates) {
  int64_t errors = 0;
  std::string first_error;
  bool interrupted = false;
  for (const HttpPhaseResult& r : rounds) {
    errors += r.errors;
    if (first_error.empty()) first_error = r.first_error;
    interrupted = interrupted || r.interrupted;
  }
  HttpPhaseResult median = std::move(rounds[MedianIndex(rates)]);
  median.errors = errors;
  median.first_error = first_error;
  median.interrupted = interrupted;
  return median;
}

ReadRounds RunReadRounds(const BenchCluster& cluster, const std::string& kind, int reads,
                         int threads, size_t rounds, const std::function<Status(int)>& store_read,
                         const std::function<Status(int)>& http_read,
                         const std::function<Status(int)>& bare_read) {
  std::vector<HttpPhaseResult> store, http, bare;
  ReadRounds out;
  rounds = std::max<size_t>(1, rounds);
  for (size_t r = 0; r < rounds && !StopRequested(); ++r) {
    const std::string round =
        "round " + std::to_string(r + 1) + "/" + std::to_string(rounds) + ": ";
    Progress(round + "store " + kind + ", " + std::to_string(reads) + " " + kind);
    store.push_back(WithUsage(cluster, [&] { return RunPhase(reads, threads, store_read); }));
    out.store_rates.push_back(Summarize(store.back()).per_s);
    Progress(round + "http " + kind);
    http.push_back(WithUsage(cluster, [&] { return RunPhase(reads, threads, http_read); }));
    out.http_rates.push_back(Summarize(http.back()).per_s);
    if (bare_read) {
      Progress(round + "bare HTTP " + kind);
      bare.push_back(WithUsage(cluster, [&] { return RunPhase(reads, threads, bare_read); }));
      out.bare_rates.push_back(Summarize(bare.back()).per_s);
    }
  }
  if (!store.empty()) out.store = MedianRound(std::move(store), out.store_rates);
  if (!http.empty()) out.http = MedianRound(std::move(http), out.http_rates);
  if (!bare.empty()) out.bare = MedianRound(std::move(bare), out.bare_rates);
  // A stop before the first round: the (empty) results say interrupted.
  if (out.store_rates.empty()) out.store.interrupted = true;
  return out;
}

template <typename Call>
Status BareClient::Send(Call call) {
  std::unique_ptr<httplib::Client> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      c = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!c) {
    c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
  }
  httplib::Result res = call(*c);
  if (!res) return Unavailable("bare request: " + httplib::to_string(res.error()));
  if (res->status != 200) return Internal("bare request answered " + std::to_string(res->status));
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(c));
  return Status::Ok();
}

Status BareClient::Post(const std::string& body) {
  return Send([&](httplib::Client& c) { return c.Post("/bare", body, "application/json"); });
}

Status BareClient::Get(const std::string& target) {
  return Send([&target](httplib::Client& c) {
    auto res = c.Get(target);
    if (res && res->status == 200 &&
        !nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false).is_object())
      res->status = 502;
    return res;
  });
}

}  // namespace cellar::bench
