// The two ways a caller learns that its WriteUnits were committed
// (WriteUnit::completion): a blocked caller waits for all of its units at
// once (UnitsWaiter), a PutAsync caller is called back (AsyncPut).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "base/status.h"
#include "cells/internal/answer_gate.h"
#include "cells/internal/write_unit.h"

namespace cellar::internal {

// Returns from Wait() once `units` units are done. The caller sleeps on the
// gate its first committer offered (shared with the other callers whose units
// queued for the same transaction), so one answering pass wakes them all with
// one system call; the thread that tells the last unit opens that gate, after
// its answering pass (OpenAfterAnswers) or at once.
// Threading: UnitDone() and OfferGate() from any thread; Wait() from the
// submitting thread.
class UnitsWaiter final : public UnitCompletion {
 public:
  explicit UnitsWaiter(size_t units) : remaining_(units) {}
  // REQUIRES: fewer than `units` calls so far. Touches this no more once the
  // count reaches zero (Wait() may return and the waiter go at once).
  void UnitDone(WriteUnit* unit) override;
  void OfferGate(const std::shared_ptr<AnswerGate>& gate) override;
  // Returns once UnitDone() was called `units` times.
  // REQUIRES: every unit not yet done was queued by a committer (which
  // offered a gate).
  void Wait();

 private:
  std::atomic<size_t> remaining_;
  // Set by the first OfferGate, before any of this waiter's units can be
  // taken by a writer; never changed after.
  std::shared_ptr<AnswerGate> gate_;
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
