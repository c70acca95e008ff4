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
// Lane groups: lanes pushed with the same non-empty group (the index
// worker's: the lanes of one host) may share a call. A taker whose call holds
// fewer than `share_below` events also takes the queued events of its group's
// lanes that are not in a call (lane by lane while it is still below, up to
// max_batch), and borrows those lanes until its call is Finished:
// a borrowed lane's own taker waits in NextBatch for it, so a lane's events
// are never in two calls at once and stay in log order. At low rates a
// host's lanes then commit in one transaction instead of one each; at high
// rates, where each lane has share_below events or more, lanes keep their
// own calls and overlap them.
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
  // share_below 0: lanes never share a call, groups or not.
  // REQUIRES: max_batch >= 1, linger >= 0.
  LaneQueues(size_t max_batch, std::chrono::milliseconds linger, size_t share_below = 0)
      : max_batch_(max_batch), linger_(linger), share_below_(share_below) {}

  // Appends `q` to `lane` of `group` ("": a lane of no group; a lane keeps
  // the group it was first pushed with while it has events or a call). True
  // when the lane's queue was empty: the caller schedules a taker for it
  // (otherwise one is queued or running).
  [[nodiscard]] bool Push(const std::string& lane, QueuedEvent q, const std::string& group = "");

  // The taker of `lane`: its next call's events (up to max_batch), waiting
  // out the linger unless `end_linger()` is true (checked under the lock, so
  // a WakeAll after its condition turned true is never missed), then with
  // the queued events of idle lanes of its group while below share_below (borrowed
  // until Finished). Waits while another taker borrows `lane` and it has
  // events. Empty when the lane's queue is empty; the lane is then forgotten.
  // REQUIRES: Finished(lane, n) after each non-empty call before the next.
  std::vector<QueuedEvent> NextBatch(const std::string& lane,
                                     const std::function<bool()>& end_linger);

  // The `n` events of `lane`'s last call are finished with (the call
  // returned); the lanes it borrowed are released.
  void Finished(const std::string& lane, size_t n);

  // Events queued or in a call that has not returned.
  size_t events() const { return events_.load(); }

  // Ends every linger now: call after making end_linger() true.
  void WakeAll();

 private:
  struct Lane {
    std::deque<QueuedEvent> queue;
    std::string group;
    bool in_call = false;                // its taker's call has not returned
    bool borrowed = false;               // its events are in another lane's call
    std::vector<std::string> borrowing;  // lanes this lane's call borrowed
  };
  // Moves the queued events of `lane`'s group's lanes that are not in a call
  // into `batch`, lane by lane while it holds fewer than share_below_ (and up
  // to max_batch_), borrowing those lanes for `taker`.
  void TakeFromGroup(const std::string& taker, Lane& lane, std::vector<QueuedEvent>& batch)
      REQUIRES(mu_);
  // Forgets `name` when nothing refers to it any more.
  void ForgetIfIdle(const std::string& name) REQUIRES(mu_);

  const size_t max_batch_;
  const std::chrono::milliseconds linger_;
  const size_t share_below_;
  Mutex mu_;
  std::map<std::string, Lane> lanes_ GUARDED_BY(mu_);  // with events, a call or a borrower
  std::map<std::string, std::vector<std::string>> groups_ GUARDED_BY(mu_);  // group -> lanes
  CondVar filled_;    // a lane reached max_batch, or WakeAll: lingering ends
  CondVar released_;  // a borrowed lane was released
  std::atomic<size_t> events_{0};
};

}  // namespace cellar
