// KeyedExecutor (for change-log consumers): a bounded thread pool that runs tasks of the same key
// one at a time in submission order, and tasks of different keys concurrently. A trigger keys by
// row, so one row's events are handled in order while a slow row does not stall the others.
// Threading: Submit/pending/WaitIdle from any thread.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace cellar {

class KeyedExecutor {
 public:
  // `thread_name` names the pool's threads (base/thread_name.h).
  explicit KeyedExecutor(int threads, std::string thread_name = "keyed-pool");
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
  // The tasks of one key not yet finished, in order; tasks[head] runs or is
  // next. A vector with a head index: most keys (rows) hold one task, and a
  // deque would allocate its 512-byte block for each.
  struct KeyQueue {
    std::vector<std::function<void()>> tasks;
    size_t head = 0;
  };
  using Queues = std::unordered_map<std::string, KeyQueue>;

  // Adds `task` under mu_; true when its key became ready (was empty).
  bool Enqueue(const std::string& key, std::function<void()> task) REQUIRES(mu_);
  void Loop();

  mutable Mutex mu_;
  CondVar cv_, idle_cv_;
  // Hashed, not ordered: with a backlog of thousands of rows a tree costs a
  // dozen key comparisons per lookup, three lookups per task.
  Queues queues_ GUARDED_BY(mu_);
  // Keys with a task to start and none running; their entries of queues_
  // (unordered_map nodes do not move, so the pointers stay valid).
  std::deque<Queues::value_type*> ready_ GUARDED_BY(mu_);
  size_t pending_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cellar
