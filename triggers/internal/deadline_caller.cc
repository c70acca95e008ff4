#include "triggers/internal/deadline_caller.h"

#include <chrono>
#include <exception>
#include <utility>

#include "base/thread_name.h"

namespace cellar::internal {

struct DeadlineCaller::Job {
  std::function<Status()> fn;
  CondVar done_cv;
  bool done = false;       // under DeadlineCaller::mu_
  bool abandoned = false;  // the caller stopped waiting (deadline)
  Status result;
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
  MutexLock lock(&mu_);
  queue_.push_back(job);
  // Idle threads not yet woken are counted in idle_ until they take a job:
  // one per queued job, or a new thread (never queue behind a hung call).
  if (idle_ < queue_.size())
    threads_.emplace_back([this] { Loop(); });
  else
    work_cv_.NotifyOne();
  while (!job->done)
    if (!job->done_cv.WaitUntil(&mu_, deadline) && !job->done) {
      job->abandoned = true;
      ++past_deadline_;
      return DeadlineExceeded("the handler did not return within " + std::to_string(timeout_ms) +
                              " ms (it runs on, its outcome ignored)");
    }
  return std::move(job->result);
}

void DeadlineCaller::Loop() {
  NameThisThread(thread_name_);
  MutexLock lock(&mu_);
  while (true) {
    while (queue_.empty() && !stopping_) {
      ++idle_;
      work_cv_.Wait(&mu_);
      --idle_;
    }
    if (queue_.empty()) return;  // stopping
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.erase(queue_.begin());
    lock.Unlock();
    Status result = CallCatching(job->fn);
    job->fn = nullptr;  // what it captured goes with it, on this thread
    lock.Lock();
    job->done = true;
    job->result = std::move(result);
    if (job->abandoned) --past_deadline_;
    job->done_cv.NotifyOne();
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
