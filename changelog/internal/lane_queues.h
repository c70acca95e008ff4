// LaneQueues: the events of a batch-mode keyed consumer (handle_batch),
// queued per lane until a pool task takes them in calls of up to max_batch.
//
// A lane is scheduled on the pool while its queue is non-empty: Push says
// when the caller must schedule it (the queue was empty), and the pool runs
// one task per lane key at a time, so each lane has at most one taker. With a
// linger, NextBatch holds a call of fewer than max_batch events until its
// oldest event has been queued `linger`, a full lane or WakeAll ending the
// wait early.
//
// Thread-safe: the polling thread pushes, pool threads take batches,
// Stop/Pause wake lingering takers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "changelog/internal/assigned_partitions.h"
#include "changelog/keyed_consumer.h"

namespace cellar {

struct QueuedEvent {
  KeyedEvent e;
  AssignedPartitions::Ref part;                     // the assignment it was received in
  std::chrono::steady_clock::time_point queued_at;  // the linger counts from here
};

class LaneQueues {
 public:
  // REQUIRES: max_batch >= 1, linger >= 0.
  LaneQueues(size_t max_batch, std::chrono::milliseconds linger)
      : max_batch_(max_batch), linger_(linger) {}

  // Appends `q` to `lane`. True when the lane's queue was empty: the caller
  // schedules a taker for it (otherwise one is queued or running).
  [[nodiscard]] bool Push(const std::string& lane, QueuedEvent q);

  // The taker of `lane`: its next call's events (up to max_batch), waiting
  // out the linger unless `end_linger()` is true (checked under the lock, so
  // a WakeAll after its condition turned true is never missed). Empty when
  // the lane's queue is empty; the lane is then forgotten.
  std::vector<QueuedEvent> NextBatch(const std::string& lane,
                                     const std::function<bool()>& end_linger);

  // `n` events taken by NextBatch are finished with (their call returned).
  void Finished(size_t n) { events_ -= n; }

  // Events queued or in a call that has not returned.
  size_t events() const { return events_.load(); }

  // Ends every linger now: call after making end_linger() true.
  void WakeAll();

 private:
  const size_t max_batch_;
  const std::chrono::milliseconds linger_;
  Mutex mu_;
  std::map<std::string, std::deque<QueuedEvent>> lanes_ GUARDED_BY(mu_);  // non-empty queues
  CondVar filled_;  // a lane reached max_batch, or WakeAll: lingering ends
  std::atomic<size_t> events_{0};
};

}  // namespace cellar
