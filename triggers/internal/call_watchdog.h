// CallWatchdog: runs an action for each handler call still running at its
// deadline, on a thread of its own, so that calls can run on the caller's
// thread (no hand-off to another thread per call) and still have one.
// Every call of one watchdog has the same timeout, so deadlines come in the
// order the calls were armed: the thread sleeps until the oldest one, and an
// idle watchdog wakes once per timeout; arming never wakes it.
// Threading: Arm/Disarm from any number of threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace cellar::internal {

class CallWatchdog {
 public:
  // REQUIRES: timeout_ms > 0. `thread_name` names its thread (base/thread_name.h).
  CallWatchdog(std::string thread_name, int timeout_ms);
  // Stops the thread; actions not yet run never run.
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // A call starts: `at_deadline` runs on the watchdog's thread timeout_ms
  // from now unless Disarm(id) comes first. Returns the id for Disarm.
  uint64_t Arm(std::function<void()> at_deadline);
  // The call returned: true when its action will never run; false when it
  // ran, and then only once it has returned.
  bool Disarm(uint64_t id);

 private:
  void Loop();

  using Clock = std::chrono::steady_clock;
  struct Alarm {
    Clock::time_point deadline;
    std::function<void()> at_deadline;
  };

  const std::chrono::milliseconds timeout_;
  Mutex mu_;
  CondVar cv_, fired_cv_;
  std::map<uint64_t, Alarm> alarms_ GUARDED_BY(mu_);  // by id: by deadline
  uint64_t last_id_ GUARDED_BY(mu_) = 0;
  uint64_t firing_ GUARDED_BY(mu_) = 0;  // id whose action runs now, 0: none
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace cellar::internal
