#include "bench/bench_put_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <latch>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "base/uuid.h"
#include "bench/bench_common.h"
#include "cells/body_codec.h"
#include "testing/metric_value.h"

namespace cellar::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Where a committed cell went: its transaction is (host, created_at).
struct Committed {
  size_t host = 0;
  MicrosSinceEpoch created_at = -1;  // -1: failed or not attempted
};

// Fills the transaction figures of `result` from the committed cells.
void CountTransactions(const std::vector<Committed>& committed, StorePhaseResult& result) {
  std::map<std::pair<size_t, MicrosSinceEpoch>, uint64_t> sizes;
  for (const auto& c : committed)
    if (c.created_at >= 0) ++sizes[{c.host, c.created_at}];
  uint64_t cells = 0;
  double weighted = 0;
  for (const auto& [key, n] : sizes) {
    ++result.transactions;
    cells += n;
    result.max_transaction = std::max(result.max_transaction, n);
    if (n == 1) ++result.single_cell_transactions;
    weighted += static_cast<double>(n) * static_cast<double>(n);
  }
  if (cells > 0) result.cell_weighted_transaction = weighted / static_cast<double>(cells);
}

// Runs `callers` threads calling call(i, latencies) for i = 0, 1, ... < `calls`
// (each i once, shared out as threads come for it), then finish(caller) on
// each thread before it ends, and times the whole phase.
template <typename Call, typename Finish>
void RunCallers(int callers, size_t calls, StorePhaseResult& result, Call call, Finish finish) {
  std::vector<std::vector<double>> latencies(static_cast<size_t>(callers));
  std::atomic<size_t> next{0};
  std::latch start(callers + 1);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      auto& mine = latencies[static_cast<size_t>(c)];
      mine.reserve(calls / static_cast<size_t>(callers) + 1);
      start.arrive_and_wait();
      while (!StopRequested()) {
        const size_t i = next.fetch_add(1);
        if (i >= calls) break;
        call(static_cast<size_t>(c), i, mine);
      }
      finish(static_cast<size_t>(c));
    });
  }
  start.arrive_and_wait();
  Stopwatch clock;
  for (auto& t : threads) t.join();
  result.seconds = clock.Seconds();
  result.interrupted = StopRequested();
  for (auto& l : latencies)
    result.latencies_ms.insert(result.latencies_ms.end(), l.begin(), l.end());
}

template <typename Call>
void RunCallers(int callers, size_t calls, StorePhaseResult& result, Call call) {
  RunCallers(
      callers, calls, result,
      [&](size_t, size_t i, std::vector<double>& latencies) { call(i, latencies); }, [](size_t) {});
}

}  // namespace

std::vector<CellWrite> MakeTripCells(int cells, int cells_per_row, const std::string& column,
                                     int body_bytes, std::mt19937_64& rng, uint64_t* json_bytes,
                                     uint64_t* encoded_bytes) {
  std::vector<CellWrite> out(static_cast<size_t>(std::max(0, cells)));
  Uuid row;
  for (size_t i = 0; i < out.size() && !StopRequested(); ++i) {
    const auto in_row = static_cast<int64_t>(i % static_cast<size_t>(cells_per_row));
    if (in_row == 0) row = Uuid::Random();
    CellWrite& c = out[i];
    c.row_key = row;
    c.column = column;
    c.ref_key = in_row;
    c.body = MakeTripBody(rng, body_bytes);
    *json_bytes += c.body.dump().size();
    *encoded_bytes += EncodeBody(c.body).size();
  }
  return out;
}

WriterTime WriterTime::Take(const MetricsRegistry& metrics) {
  const std::string text = metrics.Render();
  auto value = [&](const char* name, const char* phase) {
    return std::max(0.0, testing::MetricValue(text, name, {{"phase", phase}}));
  };
  WriterTime w;
  w.transactions = value("cellar_group_commit_writer_seconds_count", "committing");
  w.waiting_s = value("cellar_group_commit_writer_seconds_sum", "waiting");
  w.committing_s = value("cellar_group_commit_writer_seconds_sum", "committing");
  w.answering_s = value("cellar_group_commit_writer_seconds_sum", "answering");
  return w;
}

WriterTimePerTransaction WriterTimePerTransaction::Between(const WriterTime& before,
                                                           const WriterTime& after) {
  WriterTimePerTransaction d;
  d.transactions = after.transactions - before.transactions;
  if (d.transactions <= 0) return WriterTimePerTransaction{};
  d.waiting_us = (after.waiting_s - before.waiting_s) * 1e6 / d.transactions;
  d.committing_us = (after.committing_s - before.committing_s) * 1e6 / d.transactions;
  d.answering_us = (after.answering_s - before.answering_s) * 1e6 / d.transactions;
  return d;
}

StorePhaseResult RunPutPhase(CellStore& store, const std::string& datastore,
                             const std::vector<CellWrite>& cells, int callers, double rate_per_s) {
  StorePhaseResult result;
  const ClusterConfig& cfg = store.config();
  std::mutex mu;
  std::vector<Committed> committed(cells.size());
  const Clock::time_point due_start = Clock::now() + std::chrono::milliseconds(50);
  RunCallers(callers, cells.size(), result, [&](size_t i, std::vector<double>& latencies) {
    Clock::time_point begin = Clock::now();
    if (rate_per_s > 0) {
      const auto due = due_start + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(i / rate_per_s));
      std::this_thread::sleep_until(due);
      begin = due;
    }
    auto r = store.Put(datastore, cells[i]);
    latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - begin).count());
    if (!r.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (result.errors++ == 0) result.first_error = r.status().ToString();
      return;
    }
    committed[i] = {cfg.HostIndexForShard(r->shard), r->created_at};
  });
  for (const auto& c : committed)
    if (c.created_at >= 0) ++result.rows;
  CountTransactions(committed, result);
  return result;
}

StorePhaseResult RunPutAsyncPhase(CellStore& store, const std::string& datastore,
                                  const std::vector<CellWrite>& cells, int callers, int window) {
  StorePhaseResult result;
  const ClusterConfig& cfg = store.config();
  std::mutex mu;  // errors
  std::vector<Committed> committed(cells.size());
  std::vector<double> latencies(cells.size(), -1);  // by cell: written by the callbacks
  // Unanswered puts per caller thread.
  struct Window {
    std::mutex mu;
    std::condition_variable cv;
    int in_flight = 0;
    // Waits until fewer than `n` are in flight, then counts one more.
    void Enter(int n) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < n; });
      ++in_flight;
    }
    void WaitAllAnswered() {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight == 0; });
    }
  };
  std::vector<Window> windows(static_cast<size_t>(callers));
  auto put = [&](size_t caller, size_t i, std::vector<double>&) {
    Window* w = &windows[caller];
    w->Enter(window);
    const Clock::time_point begin = Clock::now();
    store.PutAsync(datastore, cells[i], [&, i, w, begin](Result<PutResult> r) {
      latencies[i] = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
      if (r.ok()) {
        committed[i] = {cfg.HostIndexForShard(r->shard), r->created_at};
      } else {
        std::lock_guard<std::mutex> lock(mu);
        if (result.errors++ == 0) result.first_error = r.status().ToString();
      }
      std::lock_guard<std::mutex> lock(w->mu);  // notified under the lock: w outlives it
      --w->in_flight;
      w->cv.notify_all();
    });
  };
  // The clock stops once every caller's puts are answered.
  RunCallers(callers, cells.size(), result, put,
             [&](size_t caller) { windows[caller].WaitAllAnswered(); });
  for (double l : latencies)
    if (l >= 0) result.latencies_ms.push_back(l);
  for (const auto& c : committed)
    if (c.created_at >= 0) ++result.rows;
  CountTransactions(committed, result);
  return result;
}

std::vector<std::vector<CellWrite>> SplitIntoRows(std::vector<CellWrite> cells, int cells_per_row) {
  const size_t per_row = static_cast<size_t>(std::max(1, cells_per_row));
  std::vector<std::vector<CellWrite>> rows;
  rows.reserve(cells.size() / per_row + 1);
  for (size_t first = 0; first < cells.size(); first += per_row)
    rows.emplace_back(std::make_move_iterator(cells.begin() + static_cast<std::ptrdiff_t>(first)),
                      std::make_move_iterator(cells.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                  cells.size(), first + per_row))));
  return rows;
}

StorePhaseResult RunPutBatchPhase(CellStore& store, const std::string& datastore,
                                  const std::vector<std::vector<CellWrite>>& batches, int callers) {
  StorePhaseResult result;
  const ClusterConfig& cfg = store.config();
  std::mutex mu;
  std::vector<size_t> first_cell(batches.size() + 1, 0);
  for (size_t b = 0; b < batches.size(); ++b) first_cell[b + 1] = first_cell[b] + batches[b].size();
  std::vector<Committed> committed(first_cell.back());
  RunCallers(callers, batches.size(), result, [&](size_t row, std::vector<double>& latencies) {
    const size_t first = first_cell[row];
    Stopwatch clock;
    std::vector<Result<PutResult>> r = store.PutBatch(datastore, batches[row]);
    latencies.push_back(clock.Millis());
    for (size_t k = 0; k < r.size(); ++k) {
      if (!r[k].ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (result.errors++ == 0) result.first_error = r[k].status().ToString();
        continue;
      }
      committed[first + k] = {cfg.HostIndexForShard(r[k]->shard), r[k]->created_at};
    }
  });
  for (const auto& c : committed)
    if (c.created_at >= 0) ++result.rows;
  CountTransactions(committed, result);
  return result;
}

}  // namespace cellar::bench
