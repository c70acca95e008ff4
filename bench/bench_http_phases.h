// Timed phases of `cellar-bench http`: C threads run N operations, each
// timed, with the CPU this process and the private MariaDB used; rounds of a
// read done in process, through HTTP and (for gets) as a bare HTTP exchange,
// alternating, each side's median round counted; the bare exchange's client.
//
// Threading: RunPhase and RunReadRounds run their operations on `threads`
// threads of their own and return when all are done (or StopRequested()).
// BareClient is thread-safe.
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "bench/bench_common.h"
#include "bench/bench_put_phases.h"

namespace cellar::bench {

struct HttpPhaseResult {
  UsageDelta usage;  // CPU this process and the server used during the phase
  double seconds = 0;
  int64_t ops = 0, errors = 0;
  std::string first_error;
  std::vector<double> latencies_ms;
  bool interrupted = false;
};

// Runs `op(i)` for i in [0, n) on `threads` threads, timing each call.
template <typename Op>
HttpPhaseResult RunPhase(int n, int threads, Op op) {
  HttpPhaseResult r;
  std::atomic<int> next{0};
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(static_cast<size_t>(threads));
  std::vector<int64_t> errors(static_cast<size_t>(threads), 0);
  std::vector<std::string> first(static_cast<size_t>(threads));
  Stopwatch total;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i; (i = next.fetch_add(1)) < n && !stop.load();) {
        if (StopRequested()) stop = true;
        Stopwatch sw;
        Status s = op(i);
        lat[t].push_back(sw.Millis());
        if (!s.ok() && errors[t]++ == 0) first[t] = s.ToString();
      }
    });
  }
  for (auto& th : pool) th.join();
  r.seconds = total.Seconds();
  r.interrupted = stop.load();
  for (int t = 0; t < threads; ++t) {
    r.latencies_ms.insert(r.latencies_ms.end(), lat[t].begin(), lat[t].end());
    r.errors += errors[t];
    if (r.first_error.empty()) r.first_error = first[t];
  }
  r.ops = static_cast<int64_t>(r.latencies_ms.size());
  return r;
}

// Runs `phase` and records what this process and the private server used.
template <typename Phase>
HttpPhaseResult WithUsage(const BenchCluster& cluster, Phase phase) {
  const Usage before = TakeUsage(cluster);
  HttpPhaseResult r = phase();
  r.usage.Add(before, TakeUsage(cluster));
  return r;
}

struct Figures {
  double per_s = 0, p50 = 0, p99 = 0;
};

Figures Summarize(HttpPhaseResult& r);

// CPU microseconds (this process + the server) per operation of `r`.
double CpuUsPerOp(const HttpPhaseResult& r);

// The round of `rounds` whose rate (rates[i] of rounds[i]) is the median,
// with every round's errors counted.
// REQUIRES: rounds.size() == rates.size() > 0.
HttpPhaseResult MedianRound(std::vector<HttpPhaseResult> rounds, const std::vector<double>& rates);

// One kind of read measured in process and through HTTP.
struct ReadRounds {
  HttpPhaseResult store, http, bare;  // the median rounds; bare is empty without a bare read
  std::vector<double> store_rates, http_rates, bare_rates;  // every round's reads/s
  bool interrupted() const { return store.interrupted || http.interrupted || bare.interrupted; }
  int64_t errors() const { return store.errors + http.errors + bare.errors; }
};

// `rounds` rounds (at least one) of `reads` reads on `threads` threads: in
// process (`store_read(i)`), through HTTP (`http_read(i)`) and, if
// `bare_read` is set, the bare exchange; each round one phase of each, in
// that order, named `kind` in the progress lines.
ReadRounds RunReadRounds(const BenchCluster& cluster, const std::string& kind, int reads,
                         int threads, size_t rounds, const std::function<Status(int)>& store_read,
                         const std::function<Status(int)>& http_read,
                         const std::function<Status(int)>& bare_read = nullptr);

// Keep-alive cpp-httplib clients of a bare server on 127.0.0.1:`port`,
// pooled as cellar::Client pools its connections.
class BareClient {
 public:
  explicit BareClient(int port) : port_(port) {}
  // POSTs `body` to /bare; OK on a 200 answer.
  Status Post(const std::string& body);
  // GETs `target` and parses the answer as cellar::Client parses a cell's;
  // OK on a 200 answer holding a JSON object.
  Status Get(const std::string& target = "/bare");

 private:
  template <typename Call>
  Status Send(Call call);

  const int port_;
  std::mutex mu_;
  std::vector<std::unique_ptr<httplib::Client>> idle_;
};

}  // namespace cellar::bench
