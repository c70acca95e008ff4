#include "triggers/internal/call_watchdog.h"

#include <utility>

#include "base/thread_name.h"

namespace cellar::internal {

CallWatchdog::CallWatchdog(std::string thread_name, int timeout_ms) : timeout_(timeout_ms) {
  thread_ = NamedThread(std::move(thread_name), [this] { Loop(); });
}

CallWatchdog::~CallWatchdog() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

uint64_t CallWatchdog::Arm(std::function<void()> at_deadline) {
  MutexLock lock(&mu_);
  const uint64_t id = ++last_id_;
  alarms_.emplace(id, Alarm{Clock::now() + timeout_, std::move(at_deadline)});
  return id;
}

bool CallWatchdog::Disarm(uint64_t id) {
  MutexLock lock(&mu_);
  if (alarms_.erase(id) > 0) return true;
  while (firing_ == id) fired_cv_.Wait(&mu_);
  return false;
}

void CallWatchdog::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    // Sleeping a whole timeout when idle: a call armed meanwhile has its
    // deadline no earlier than this wake-up.
    Clock::time_point wake = Clock::now() + timeout_;
    if (!alarms_.empty()) wake = alarms_.begin()->second.deadline;
    if (Clock::now() < wake) {
      cv_.WaitUntil(&mu_, wake);
      continue;
    }
    auto oldest = alarms_.begin();
    firing_ = oldest->first;
    std::function<void()> action = std::move(oldest->second.at_deadline);
    alarms_.erase(oldest);
    lock.Unlock();
    action();
    action = nullptr;
    lock.Lock();
    firing_ = 0;
    fired_cv_.NotifyAll();
  }
}

}  // namespace cellar::internal
