#include "changelog/keyed_executor.h"

#include <chrono>

namespace cellar {

KeyedExecutor::KeyedExecutor(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

KeyedExecutor::~KeyedExecutor() { Shutdown(); }

void KeyedExecutor::Submit(const std::string& key, std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    auto& q = queues_[key];
    q.push_back(std::move(task));
    ++pending_;
    // A key is in ready_ or running exactly while its queue is non-empty and it
    // was not already scheduled: schedule only on the empty -> non-empty edge.
    if (q.size() == 1) ready_.push_back(key);
  }
  cv_.NotifyOne();
}

void KeyedExecutor::SubmitMany(std::vector<std::pair<std::string, std::function<void()>>> tasks) {
  size_t newly_ready = 0;
  {
    MutexLock lock(&mu_);
    for (auto& [key, task] : tasks) {
      auto& q = queues_[key];
      q.push_back(std::move(task));
      ++pending_;
      if (q.size() == 1) {
        ready_.push_back(key);
        ++newly_ready;
      }
    }
  }
  if (newly_ready >= threads_.size())
    cv_.NotifyAll();
  else
    for (size_t i = 0; i < newly_ready; ++i) cv_.NotifyOne();
}

size_t KeyedExecutor::pending() const {
  MutexLock lock(&mu_);
  return pending_;
}

bool KeyedExecutor::WaitIdle(int timeout_ms) {
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (pending_ != 0)
    if (!idle_cv_.WaitUntil(&mu_, deadline)) return pending_ == 0;
  return true;
}

void KeyedExecutor::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void KeyedExecutor::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    while (!(!ready_.empty() || (stopping_ && pending_ == 0))) cv_.Wait(&mu_);
    if (ready_.empty()) return;  // stopping and drained
    std::string key = std::move(ready_.front());
    ready_.pop_front();
    // The task stays at the head of its queue while it runs, so the key is not
    // rescheduled by Submit() meanwhile.
    std::function<void()> task = std::move(queues_[key].front());
    lock.Unlock();
    task();
    lock.Lock();
    auto it = queues_.find(key);
    it->second.pop_front();
    if (it->second.empty()) {
      queues_.erase(it);
    } else {
      ready_.push_back(key);
      cv_.NotifyOne();
    }
    if (--pending_ == 0) idle_cv_.NotifyAll();
  }
}

}  // namespace cellar
