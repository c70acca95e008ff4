#include "changelog/internal/lane_queues.h"

#include <algorithm>

namespace cellar {

bool LaneQueues::Push(const std::string& lane, QueuedEvent q) {
  MutexLock lock(&mu_);
  std::deque<QueuedEvent>& queue = lanes_[lane];
  const bool schedule = queue.empty();
  queue.push_back(std::move(q));
  ++events_;
  if (linger_.count() > 0 && queue.size() >= max_batch_) filled_.NotifyAll();
  return schedule;
}

std::vector<QueuedEvent> LaneQueues::NextBatch(const std::string& lane,
                                               const std::function<bool()>& end_linger) {
  std::vector<QueuedEvent> batch;
  MutexLock lock(&mu_);
  while (true) {
    auto it = lanes_.find(lane);
    if (it == lanes_.end() || it->second.empty()) {
      if (it != lanes_.end()) lanes_.erase(it);
      return batch;
    }
    std::deque<QueuedEvent>& q = it->second;
    const auto due = q.front().queued_at + linger_;
    if (linger_.count() == 0 || q.size() >= max_batch_ || end_linger() ||
        std::chrono::steady_clock::now() >= due) {
      const size_t n = std::min(max_batch_, q.size());
      batch.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(q.front()));
        q.pop_front();
      }
      return batch;
    }
    filled_.WaitUntil(&mu_, due);  // lingering: more of the lane may come
  }
}

void LaneQueues::WakeAll() {
  // A taker holds mu_ from its end_linger() check to its wait, so taking mu_
  // here orders this wake-up after any check that missed the caller's flag.
  { MutexLock lock(&mu_); }
  filled_.NotifyAll();
}

}  // namespace cellar
