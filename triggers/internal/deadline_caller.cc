#include "triggers/internal/deadline_caller.h"

#include <chrono>
#include <exception>
#include <utility>

#include "base/thread_name.h"

namespace cellar::internal {

// A call's outcome is handed back under the job's own mutex, and the waiting
// caller is woken after it is released: the caller then neither wakes into a
// held lock nor contends with the pool for the caller's shared one (mu_).
// Lock order: Job::mu before DeadlineCaller::mu_.
struct DeadlineCaller::Job {
  std::function<Status()> fn;
  Mutex mu;
  CondVar done_cv;
  bool done GUARDED_BY(mu) = false;
  bool abandoned GUARDED_BY(mu) = false;  // the caller stopped waiting (deadline)
  Status result GUARDED_BY(mu);
};

Status CallCatching(const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Internal(std::string("handler threw: ") + e.what());
  } catch (...) {
    return Internal("handler threw a non-standard exception");
  }
}

DeadlineCaller::DeadlineCaller(std::string thread_name) : thread_name_(std::move(thread_name)) {}

DeadlineCaller::~DeadlineCaller() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  work_cv_.NotifyAll();
  for (std::thread& t : threads) t.join();
}

Status DeadlineCaller::Call(std::function<Status()> fn, int timeout_ms) {
  auto job = std::make_shared<Job>();
  job->fn = std::move(fn);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool wake = false;
  {
    MutexLock lock(&mu_);
    queue_.push_back(job);
    // Idle threads not yet woken are counted in idle_ until they take a job:
    // one per queued job, or a new thread (never queue behind a hung call).
    if (idle_ < queue_.size())
      threads_.emplace_back([this] { Loop(); });
    else
      wake = true;
  }
  if (wake) work_cv_.NotifyOne();
  MutexLock lock(&job->mu);
  while (!job->done)
    if (!job->done_cv.WaitUntil(&job->mu, deadline) && !job->done) {
      job->abandoned = true;
      {
        MutexLock count(&mu_);
        ++past_deadline_;
      }
      return DeadlineExceeded("the handler did not return within " + std::to_string(timeout_ms) +
                              " ms (it runs on, its outcome ignored)");
    }
  return std::move(job->result);
}

void DeadlineCaller::Loop() {
  NameThisThread(thread_name_);
  MutexLock lock(&mu_);
  ++idle_;  // counted idle whenever it runs no job
  while (true) {
    while (queue_.empty() && !stopping_) work_cv_.Wait(&mu_);
    if (queue_.empty()) {  // stopping
      --idle_;
      return;
    }
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.erase(queue_.begin());
    --idle_;
    lock.Unlock();
    Status result = CallCatching(job->fn);
    job->fn = nullptr;  // what it captured goes with it, on this thread
    bool abandoned = false;
    {
      MutexLock done(&job->mu);
      job->done = true;
      job->result = std::move(result);
      abandoned = job->abandoned;
    }
    // Idle again before the caller learns the outcome: a caller that calls
    // again at once finds this thread rather than making another.
    lock.Lock();
    ++idle_;
    if (abandoned) --past_deadline_;
    lock.Unlock();
    job->done_cv.NotifyOne();
    lock.Lock();
  }
}

size_t DeadlineCaller::running_past_deadline() const {
  MutexLock lock(&mu_);
  return past_deadline_;
}

size_t DeadlineCaller::threads() const {
  MutexLock lock(&mu_);
  return threads_.size();
}

}  // namespace cellar::internal
