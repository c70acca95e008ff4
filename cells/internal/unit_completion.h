// The two ways a caller learns that its WriteUnits were committed
// (WriteUnit::completion): a blocked caller waits for all of its units at
// once (UnitsWaiter), a PutAsync caller is called back (AsyncPut).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "cells/internal/write_unit.h"

namespace cellar::internal {

// Wakes one waiting thread once `units` units are done: one wake-up per call
// of Put/PutBatch/Erase, whatever its number of units. The wake-up is sent
// after the lock is released, so the woken caller does not block on the lock
// the committer still holds (with glibc that cost a second futex wake-up and
// context switch per put); the committer holds a reference meanwhile, which is
// why a waiter is owned by a shared_ptr (Create).
// Threading: UnitDone() from any thread; Wait() from the submitting thread.
class UnitsWaiter final : public UnitCompletion, public std::enable_shared_from_this<UnitsWaiter> {
 public:
  static std::shared_ptr<UnitsWaiter> Create(size_t units) {
    return std::shared_ptr<UnitsWaiter>(new UnitsWaiter(units));
  }
  // REQUIRES: fewer than `units` calls so far (the submitter still holds its
  // reference until Wait() returns).
  void UnitDone(WriteUnit* unit) override;
  // Returns once UnitDone() was called `units` times. The submitter may drop
  // its reference as soon as Wait() returns.
  void Wait();

 private:
  explicit UnitsWaiter(size_t units) : remaining_(units) {}

  Mutex mu_;
  CondVar cv_;
  size_t remaining_ GUARDED_BY(mu_);
};

// A single put in flight without a waiting caller: owns its unit, calls
// `done` with the unit's one result and deletes itself.
// REQUIRES: allocated with new; after submitting `unit`, never touched again.
class AsyncPut final : public UnitCompletion {
 public:
  using Callback = std::function<void(Result<PutResult>)>;
  explicit AsyncPut(Callback done) : done_(std::move(done)) { unit.completion = this; }
  // Deletes this, then calls `done` (which may submit again).
  void UnitDone(WriteUnit* unit) override;

  WriteUnit unit;

 private:
  Callback done_;
};

}  // namespace cellar::internal
