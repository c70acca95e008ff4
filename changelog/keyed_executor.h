// KeyedExecutor (for change-log consumers): a bounded thread pool that runs tasks of the same key
// one at a time in submission order, and tasks of different keys concurrently. A trigger keys by
// row, so one row's events are handled in order while a slow row does not stall the others.
// Threading: Submit/pending/WaitIdle from any thread.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace cellar {

class KeyedExecutor {
 public:
  explicit KeyedExecutor(int threads);
  ~KeyedExecutor();  // Shutdown()

  void Submit(const std::string& key, std::function<void()> task);
  // Submits every (key, task) in order, under one lock, waking at most one
  // thread per newly ready key: a producer that hands over what it has in
  // bursts wakes the pool once per burst rather than once per task (on few
  // cores each wake-up of a sleeping thread costs more than a small task).
  void SubmitMany(std::vector<std::pair<std::string, std::function<void()>>> tasks);
  // Tasks queued or running.
  size_t pending() const;
  // Waits until nothing is queued or running, up to timeout_ms. True if idle.
  bool WaitIdle(int timeout_ms);
  // Runs what is queued, then joins the threads. Idempotent.
  void Shutdown();

 private:
  void Loop();
  mutable Mutex mu_;
  CondVar cv_, idle_cv_;
  std::map<std::string, std::deque<std::function<void()>>> queues_ GUARDED_BY(mu_);
  std::deque<std::string> ready_ GUARDED_BY(mu_);
  size_t pending_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cellar
