// IndexPositionWatcher: waits for index positions (index_positions.h) on
// behalf of any number of callers with one reader per (host, datastore).
//
// Why: a query given a put's position token waits until the index worker has
// applied that position. Each waiting query used to read index_positions on
// its own every few milliseconds, so a service issuing many read-your-writes
// queries sent MariaDB one polling query per waiting caller. Here the callers
// waiting on one (host, datastore) share its reads: one caller at a time reads
// every position of the datastore on that host (one statement), the others
// wait for that read and check their own position against it.
//
// Exact, never early: positions only rise (RecordIndexPositions keeps the
// GREATEST), so any position read at any time that is >= a caller's target
// proves the target applied; a remembered position is used without a read.
//
// Pace, per (host, datastore): reads start at most every 1 ms while callers
// arrive; while callers wait and the positions they wait on do not move, the
// pause doubles up to 20 ms (as the single-caller wait did).
//
// Metrics (with a registry): cellar_index_position_waits_total{outcome=
// "applied"|"timed_out"|"failed"}, cellar_index_position_wait_seconds (waits
// that ended applied) and cellar_index_position_reads_total.
//
// Thread-safe: any thread may call Wait().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/metrics.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "cells/cell_store.h"

namespace cellar {

class IndexPositionWatcher {
 public:
  // `store` is not owned and must outlive the watcher. `metrics` (not owned,
  // may be null: no metrics) must outlive it too.
  explicit IndexPositionWatcher(CellStore* store, MetricsRegistry* metrics = nullptr);
  IndexPositionWatcher(const IndexPositionWatcher&) = delete;
  IndexPositionWatcher& operator=(const IndexPositionWatcher&) = delete;

  // Waits until the applied position of `shard` of `datastore` reaches
  // `added_id`. OK once it has (at once, with no read, if a position already
  // seen reaches it); DeadlineExceeded after `timeout_ms` and at least one
  // read that ended after the call began (so a timeout of 0 reads once),
  // saying how far the worker is; Unavailable (or the read's error) when a read of the shard's
  // host made while the caller waited failed: every caller waiting on that host
  // gets that read's error.
  // REQUIRES: shard < the cluster's shard count.
  Status Wait(const std::string& datastore, uint32_t shard, uint64_t added_id, int timeout_ms);

  // Reads of index_positions this watcher has sent (for tests and metrics).
  uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }

 private:
  using Clock = std::chrono::steady_clock;
  // One (host, datastore): what its reads found and when the next may start.
  struct Source {
    std::unordered_map<uint32_t, uint64_t> applied;  // shard -> highest position read
    bool reading = false;                            // a caller is reading it now
    uint64_t rounds = 0;                             // reads finished
    Status last_read;                                // outcome of the last read
    Clock::time_point last_started{};                // when the last read began
    Clock::time_point next_read{};                   // earliest start of the next
    int pause_ms = 1;
  };

  // Wait() without the metrics.
  Status WaitUntilApplied(const std::string& datastore, uint32_t shard, uint64_t added_id,
                          int timeout_ms) EXCLUDES(mu_);
  // Every (shard, position) of `datastore` on host `host`: one statement,
  // sent without mu_ held.
  Result<std::vector<std::pair<uint32_t, uint64_t>>> ReadPositions(size_t host,
                                                                   const std::string& datastore)
      EXCLUDES(mu_);

  CellStore* const store_;
  std::atomic<uint64_t> reads_{0};
  // Null without a registry.
  Counter* applied_ = nullptr;
  Counter* timed_out_ = nullptr;
  Counter* failed_ = nullptr;
  Counter* reads_counter_ = nullptr;
  Histogram* waited_ = nullptr;
  Mutex mu_;
  CondVar read_done_;
  std::map<std::pair<size_t, std::string>, Source> sources_ GUARDED_BY(mu_);
};

}  // namespace cellar
