#include "changelog/internal/lane_queues.h"

#include <algorithm>

namespace cellar {

bool LaneQueues::Push(const std::string& lane, QueuedEvent q, const std::string& group) {
  MutexLock lock(&mu_);
  auto [it, added] = lanes_.try_emplace(lane);
  Lane& l = it->second;
  if (added) {
    l.group = group;
    if (!group.empty()) groups_[group].push_back(lane);
  }
  const bool schedule = l.queue.empty();
  l.queue.push_back(std::move(q));
  ++events_;
  if (linger_.count() > 0 && l.queue.size() >= max_batch_) filled_.NotifyAll();
  return schedule;
}

std::vector<QueuedEvent> LaneQueues::NextBatch(const std::string& lane,
                                               const std::function<bool()>& end_linger) {
  std::vector<QueuedEvent> batch;
  MutexLock lock(&mu_);
  while (true) {
    auto it = lanes_.find(lane);
    if (it == lanes_.end()) return batch;
    Lane& l = it->second;
    if (l.queue.empty()) {
      ForgetIfIdle(lane);
      return batch;
    }
    if (l.borrowed) {
      // Its earlier events are in another lane's call: these wait for it.
      released_.Wait(&mu_);
      continue;
    }
    const auto due = l.queue.front().queued_at + linger_;
    if (linger_.count() == 0 || l.queue.size() >= max_batch_ || end_linger() ||
        std::chrono::steady_clock::now() >= due) {
      const size_t n = std::min(max_batch_, l.queue.size());
      batch.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(l.queue.front()));
        l.queue.pop_front();
      }
      l.in_call = true;
      if (!l.group.empty() && batch.size() < share_below_) TakeFromGroup(lane, l, batch);
      return batch;
    }
    filled_.WaitUntil(&mu_, due);  // lingering: more of the lane may come
  }
}

void LaneQueues::TakeFromGroup(const std::string& taker, Lane& lane,
                               std::vector<QueuedEvent>& batch) {
  for (const std::string& name : groups_[lane.group]) {
    if (batch.size() >= share_below_ || batch.size() >= max_batch_) return;
    if (name == taker) continue;
    Lane& sibling = lanes_.at(name);
    if (sibling.queue.empty() || sibling.in_call || sibling.borrowed) continue;
    while (!sibling.queue.empty() && batch.size() < max_batch_) {
      batch.push_back(std::move(sibling.queue.front()));
      sibling.queue.pop_front();
    }
    sibling.borrowed = true;
    lane.borrowing.push_back(name);
  }
}

void LaneQueues::Finished(const std::string& lane, size_t n) {
  events_ -= n;
  MutexLock lock(&mu_);
  auto it = lanes_.find(lane);
  if (it == lanes_.end()) return;
  it->second.in_call = false;
  std::vector<std::string> borrowed;
  borrowed.swap(it->second.borrowing);
  for (const std::string& name : borrowed) {
    lanes_.at(name).borrowed = false;
    ForgetIfIdle(name);
  }
  ForgetIfIdle(lane);
  if (!borrowed.empty()) released_.NotifyAll();
}

void LaneQueues::ForgetIfIdle(const std::string& name) {
  auto it = lanes_.find(name);
  if (it == lanes_.end()) return;
  const Lane& l = it->second;
  if (!l.queue.empty() || l.in_call || l.borrowed || !l.borrowing.empty()) return;
  if (!l.group.empty()) {
    std::vector<std::string>& members = groups_[l.group];
    members.erase(std::remove(members.begin(), members.end(), name), members.end());
    if (members.empty()) groups_.erase(l.group);
  }
  lanes_.erase(it);
}

void LaneQueues::WakeAll() {
  // A taker holds mu_ from its end_linger() check to its wait, so taking mu_
  // here orders this wake-up after any check that missed the caller's flag.
  { MutexLock lock(&mu_); }
  filled_.NotifyAll();
}

}  // namespace cellar
