// SharedMutex, WriterMutexLock and ReaderMutexLock: std::shared_mutex with
// Clang thread-safety annotations (base/thread_annotations.h), for state read
// by many threads at once and replaced rarely:
//
//   SharedMutex mu_;
//   std::unique_ptr<Producer> producer_ GUARDED_BY(mu_);
//
//   void Send() { ReaderMutexLock lock(&mu_); producer_->Send(); }   // shared
//   void Replace() { WriterMutexLock lock(&mu_); producer_ = New(); } // exclusive
//
// A function that needs it held shared says REQUIRES_SHARED(mu_).
// Threading: SharedMutex is thread-safe; a lock object belongs to one thread.
#pragma once

#include <shared_mutex>

#include "base/thread_annotations.h"

namespace cellar {

class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // Exclusive: blocks until no other thread holds it in any mode.
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Shared: blocks while a thread holds it exclusively.
  void ReaderLock() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void ReaderUnlock() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` exclusively for its lifetime (std::unique_lock<std::shared_mutex>).
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterMutexLock() RELEASE() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds `mu` shared for its lifetime (std::shared_lock).
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() RELEASE() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace cellar
