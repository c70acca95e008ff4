// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// Clang thread-safety annotations (base/thread_annotations.h). libstdc++'s
// std::mutex carries no capability attribute, so state guarded by one cannot
// be checked; state guarded by a cellar::Mutex can:
//
//   Mutex mu_;
//   CondVar cv_;
//   std::deque<Job> jobs_ GUARDED_BY(mu_);
//
//   void Push(Job j) EXCLUDES(mu_) {
//     { MutexLock lock(&mu_); jobs_.push_back(std::move(j)); }
//     cv_.NotifyOne();
//   }
//   Job Pop() EXCLUDES(mu_) {
//     MutexLock lock(&mu_);
//     while (jobs_.empty()) cv_.Wait(&mu_);  // a loop: the analysis sees the lock held
//     ...
//   }
//
// Wait loops are written out (`while (!cond) cv.Wait(&mu)`) rather than passing
// a predicate lambda: the analysis cannot tell that a lambda runs with the
// mutex held. Behaviour is std::condition_variable's (spurious wake-ups included).
// Threading: Mutex and CondVar are thread-safe; a MutexLock belongs to one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace cellar {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until this thread holds the mutex. REQUIRES: not already held by it.
  void Lock() ACQUIRE() { mu_.lock(); }
  // REQUIRES: held by this thread.
  void Unlock() RELEASE() { mu_.unlock(); }
  // Takes the mutex if it is free; true if taken.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the mutex is held where it cannot see the lock taken
  // (e.g. in a callback run under it). No run-time check: std::mutex has no owner query.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

  // The underlying std::mutex, for std::condition_variable_any or APIs that
  // need a std::mutex. Locking through it is invisible to the analysis.
  std::mutex& native() RETURN_CAPABILITY(this) { return mu_; }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction (std::lock_guard for Mutex);
// Unlock()/Lock() release and retake it inside the scope (std::unique_lock).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // REQUIRES: held by this lock.
  void Unlock() RELEASE() {
    held_ = false;
    mu_->Unlock();
  }
  // REQUIRES: released by Unlock() before.
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable waited on with a held Mutex. Notify* need not hold it.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases *mu, blocks until notified (or spuriously woken), retakes *mu.
  // REQUIRES: *mu held by this thread.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Wait() that also returns at `deadline`: true if woken (or spuriously),
  // false once the deadline has passed. REQUIRES: *mu held by this thread.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  // WaitUntil(now + timeout). REQUIRES: *mu held by this thread.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace cellar
