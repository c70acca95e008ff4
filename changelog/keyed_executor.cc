#include "changelog/keyed_executor.h"

#include <chrono>

namespace cellar {

KeyedExecutor::KeyedExecutor(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

KeyedExecutor::~KeyedExecutor() { Shutdown(); }

void KeyedExecutor::Submit(const std::string& key, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = queues_[key];
    q.push_back(std::move(task));
    ++pending_;
    // A key is in ready_ or running exactly while its queue is non-empty and it
    // was not already scheduled: schedule only on the empty -> non-empty edge.
    if (q.size() == 1) ready_.push_back(key);
  }
  cv_.notify_one();
}

size_t KeyedExecutor::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

bool KeyedExecutor::WaitIdle(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return pending_ == 0; });
}

void KeyedExecutor::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void KeyedExecutor::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return !ready_.empty() || (stopping_ && pending_ == 0); });
    if (ready_.empty()) return;  // stopping and drained
    std::string key = std::move(ready_.front());
    ready_.pop_front();
    // The task stays at the head of its queue while it runs, so the key is not
    // rescheduled by Submit() meanwhile.
    std::function<void()> task = std::move(queues_[key].front());
    lock.unlock();
    task();
    lock.lock();
    auto it = queues_.find(key);
    it->second.pop_front();
    if (it->second.empty()) {
      queues_.erase(it);
    } else {
      ready_.push_back(key);
      cv_.notify_one();
    }
    if (--pending_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace cellar
