// The throughput phase of `cellar-bench pipeline` (see bench_pipeline.cc):
// with every stage stopped, a backlog of --drain-cells cells is written; then
// the relay alone, the index worker alone and the no-op trigger alone each
// work through it, timed from their first to their N-th event (a consumer
// group's join, ~3 s on the mock broker, is start-up, not throughput).
#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_pipeline.h"
#include "testing/wait_for.h"

namespace cellar::bench::pipeline {
namespace {

// Waits until count() - base reaches n. *first_s: seconds from the call to
// the first increase; *span_s: from then to the n-th. False on timeout, stop
// or when lost() (may be empty) is true: then n will never be reached.
bool TimeCounter(const std::function<uint64_t()>& count, uint64_t base, uint64_t n,
                 double timeout_s, const std::function<bool()>& lost, double* first_s,
                 double* span_s) {
  Stopwatch clock;
  double first = -1;
  bool gave_up = false;
  const bool done = testing::WaitFor(
      [&] {
        if (StopRequested()) return true;
        if (lost && lost()) return gave_up = true;
        const uint64_t c = count() - base;
        if (c > 0 && first < 0) first = clock.Seconds();
        if (c < n) return false;
        *span_s = clock.Seconds() - std::max(0.0, first);
        return true;
      },
      std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)),
      std::chrono::milliseconds(1));
  *first_s = first;
  return done && !gave_up && !StopRequested();
}

}  // namespace

int RunDrain(CellStore* store, Stages& stages, const PipelineBenchOptions& o,
             const std::string& datastore, const std::string& column, const std::string& run,
             DrainFigures* out) {
  const uint64_t n = static_cast<uint64_t>(o.drain_cells);
  out->cells = n;
  Progress("throughput: stopping the stages, writing a backlog of " + std::to_string(n) +
           " cells with PutBatch");
  stages.Stop();
  const size_t chunk =
      static_cast<size_t>(std::max(1, std::min(1000, store->config().limits.max_batch_cells)));
  std::atomic<uint64_t> next{0}, errors{0};
  std::mutex mu;
  std::string first_error;
  Stopwatch write_clock;
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < 4; ++t)
      pool.emplace_back([&] {
        std::mt19937_64 rng(std::random_device{}());
        while (!StopRequested()) {
          const uint64_t begin = next.fetch_add(chunk);
          if (begin >= n) break;
          std::vector<CellWrite> batch;
          for (uint64_t i = begin; i < std::min<uint64_t>(n, begin + chunk); ++i)
            batch.push_back(
                {Uuid::Random(), column, 0, StepBody(rng, o.body_bytes, run, -1, Uuid::Random())});
          for (const auto& r : store->PutBatch(datastore, batch))
            if (!r.ok()) {
              std::lock_guard<std::mutex> lock(mu);
              if (errors++ == 0) first_error = r.status().ToString();
            }
        }
      });
  }
  out->write_s = write_clock.Seconds();
  if (StopRequested()) return 130;
  if (errors) {
    out->failure = "backlog write failed (" + std::to_string(errors.load()) +
                   " errors), first: " + first_error;
    Progress(out->failure);
    return 0;
  }

  struct Stage {
    const char* name;
    std::function<Status()> start;
    std::function<uint64_t()> count;
    std::function<bool()> lost;  // empty: the stage cannot tell
    double* per_s;
    double* first_s;
  };
  // The local broker keeps 5 MiB per partition: a backlog larger than that
  // loses its oldest events before the index worker reads them.
  const uint64_t lost_before = stages.index_records_lost();
  const Stage order[] = {
      {"relay",
       [&] { return stages.StartRelay(); },
       [&] { return stages.relay_acknowledged(); },
       {},
       &out->relay_per_s,
       &out->relay_first_s},
      {"index worker", [&] { return stages.StartIndexWorker(); },
       [&] { return stages.index_applied(); },
       [&] { return stages.index_records_lost() > lost_before; }, &out->index_per_s,
       &out->index_first_s},
      {"no-op trigger",
       [&] { return stages.StartNoopTrigger(); },
       [&] { return stages.backlog_handled(); },
       {},
       &out->trigger_per_s,
       &out->trigger_first_s},
  };
  for (const Stage& s : order) {
    Progress(std::string("throughput: the ") + s.name + " alone works through the backlog");
    const uint64_t base = s.count();
    if (Status st = s.start(); !st.ok()) {
      out->failure = std::string(s.name) + " start failed: " + st.ToString();
      Progress(out->failure);
      stages.Stop();
      return 0;
    }
    double span = 0;
    if (!TimeCounter(s.count, base, n, o.timeout_s, s.lost, s.first_s, &span)) {
      if (StopRequested()) return 130;
      if (s.lost && s.lost()) {
        out->failure = "the broker's retention deleted " +
                       std::to_string(stages.index_records_lost() - lost_before) +
                       " backlog events before the " + s.name +
                       " read them (the local broker keeps 5 MiB per partition): use a smaller "
                       "--drain-cells";
        Progress(out->failure);
        stages.Stop();
        return 0;
      }
      out->failure = std::string("timed out after ") + FormatNumber(o.timeout_s, 0) + " s: the " +
                     s.name + " had " + std::to_string(s.count() - base) + " of " +
                     std::to_string(n) + " events";
      Progress(out->failure);
      stages.Stop();
      return 0;
    }
    *s.per_s = span > 0 ? n / span : 0;
    Progress(std::string("throughput: ") + s.name + " " + FormatNumber(*s.per_s, 0) + " events/s");
  }
  stages.Stop();
  return 0;
}

}  // namespace cellar::bench::pipeline
