// PutLoad: blocked callers putting one new trips/BASE cell at a time into a
// CellStore until Stop(), recording every outcome (acknowledged writes with
// their ack times, failures, the longest call). Shared by the failover test
// and `cellar-bench failover`.
//
// Header-only: the testing library does not link the MySQL store.
// Threading: acked()/FirstAckAfterMs() are thread-safe; the public fields
// may be read only after Stop().
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/uuid.h"
#include "cells/cell_store.h"

namespace cellar::testing {

class PutLoad {
 public:
  using Clock = std::chrono::steady_clock;

  PutLoad(CellStore* store, int callers) {
    for (int t = 0; t < callers; ++t)
      threads_.emplace_back([this, store, t] {
        for (int i = 0; !stop_.load(); ++i) {
          CellWrite w{Uuid::Random(), "BASE", 1, nlohmann::json{{"caller", t}, {"i", i}}};
          const auto start = Clock::now();
          Result<PutResult> r = store->Put("trips", w);
          const auto end = Clock::now();
          const double ms = std::chrono::duration<double, std::milli>(end - start).count();
          std::lock_guard<std::mutex> lock(mu_);
          max_ms_ = std::max(max_ms_, ms);
          if (r.ok()) {
            acked_.push_back(std::move(w));
            ack_times_.push_back(end);
          } else {
            failed_.push_back(r.status());
          }
        }
      });
  }
  ~PutLoad() { Stop(); }
  PutLoad(const PutLoad&) = delete;
  PutLoad& operator=(const PutLoad&) = delete;

  // Joins the callers. Idempotent.
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  size_t acked() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.size();
  }
  size_t failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_.size();
  }
  double max_ms() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_ms_;
  }
  // Milliseconds from `since` to the first put acknowledged after it (-1: none).
  double FirstAckAfterMs(Clock::time_point since) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : ack_times_)
      if (t > since) return std::chrono::duration<double, std::milli>(t - since).count();
    return -1;
  }

  std::vector<CellWrite> acked_;  // in acknowledgement order
  std::vector<Clock::time_point> ack_times_;
  std::vector<Status> failed_;
  double max_ms_ = 0;  // the longest Put call

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

}  // namespace cellar::testing
