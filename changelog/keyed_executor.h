// KeyedExecutor (for change-log consumers): a bounded thread pool that runs tasks of the same key
// one at a time in submission order, and tasks of different keys concurrently. A trigger keys by
// row, so one row's events are handled in order while a slow row does not stall the others.
// A task that cannot return in time (a hung handler) can give its key up
// (Detach): a continuation takes its place, and its thread leaves the pool.
// Threading: Submit/pending/WaitIdle/Detach from any thread.
#pragma once

#include <atomic>
#include <cstdint>
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
  // Which task runs on the calling thread: for Detach, from another thread.
  struct RunningTask {
    std::string key;
    uint64_t ticket = 0;  // 0: the calling thread runs no task of this pool
  };
  // REQUIRES: called by a task of this pool (else the ticket is 0).
  RunningTask Current() const;
  // Gives the key of `task`, which still runs, to `continuation`: it takes
  // the task's place at the head of the key's queue and runs on another
  // thread, before the key's later tasks (and counts as the task in
  // pending()). A new thread joins the pool for the task's, which is on its
  // own from then on: neither Shutdown() nor the destructor waits for it, and
  // once its task returns it leaves without touching the pool. So whatever
  // the task uses after it returns must be kept alive by its owner.
  // False, and nothing changes, when the task has returned already.
  bool Detach(const RunningTask& task, std::function<void()> continuation);
  // Tasks queued or running.
  size_t pending() const;
  // Waits until nothing is queued or running, up to timeout_ms. True if idle.
  bool WaitIdle(int timeout_ms);
  // Runs what is queued, then joins the threads (not detached ones). Idempotent.
  void Shutdown();

 private:
  // The tasks of one key not yet finished, in order; tasks[head] runs or is
  // next. A vector with a head index: most keys (rows) hold one task, and a
  // deque would allocate its 512-byte block for each.
  struct KeyQueue {
    std::vector<std::function<void()>> tasks;
    size_t head = 0;
    uint64_t running = 0;                       // ticket of tasks[head] while it runs, else 0
    std::atomic<int>* running_state = nullptr;  // on the stack of its thread
    std::thread::id running_thread;
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
  uint64_t last_ticket_ GUARDED_BY(mu_) = 0;
  const std::string thread_name_;
  const size_t pool_size_;  // threads running tasks (detached ones aside)
  // Running tasks or idle (a detached task's thread leaves); joined by Shutdown().
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
};

}  // namespace cellar
