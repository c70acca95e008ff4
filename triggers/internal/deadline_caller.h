// DeadlineCaller: runs handler calls on threads of its own so that the
// caller can stop waiting for one past its deadline. C++ cannot cut a call
// short: a call past its deadline keeps its thread until it returns (its
// outcome is then dropped) and later calls run on other threads, made when
// none is idle. So a hung handler costs a thread, not its row and its
// partition's commits.
// Threading: Call() from any number of threads at once.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"

namespace cellar::internal {

// fn(), or Internal naming what it threw.
Status CallCatching(const std::function<Status()>& fn);

class DeadlineCaller {
 public:
  // `thread_name` names its threads (base/thread_name.h).
  explicit DeadlineCaller(std::string thread_name);
  // Waits for every call still running, those past their deadline too.
  ~DeadlineCaller();
  DeadlineCaller(const DeadlineCaller&) = delete;
  DeadlineCaller& operator=(const DeadlineCaller&) = delete;

  // Runs `fn` on an idle thread of this caller and waits up to timeout_ms
  // (> 0) for it. Returns what fn returned, or DeadlineExceeded when it had
  // not returned by then: fn runs on, so it must own or share everything it
  // uses (nothing on the caller's stack).
  [[nodiscard]] Status Call(std::function<Status()> fn, int timeout_ms);

  // Calls past their deadline that have not returned yet.
  size_t running_past_deadline() const;
  // Threads made so far (idle or busy).
  size_t threads() const;

 private:
  struct Job;
  void Loop();

  const std::string thread_name_;
  mutable Mutex mu_;
  CondVar work_cv_;
  std::vector<std::shared_ptr<Job>> queue_ GUARDED_BY(mu_);
  size_t idle_ GUARDED_BY(mu_) = 0;
  size_t past_deadline_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
};

}  // namespace cellar::internal
