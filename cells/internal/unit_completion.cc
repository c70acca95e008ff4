#include "cells/internal/unit_completion.h"

namespace cellar::internal {

void UnitsWaiter::UnitDone(WriteUnit*) {
  // Copied first: once the count reaches zero this waiter may be gone.
  std::shared_ptr<AnswerGate> gate = gate_;
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1 && gate)
    OpenAfterAnswers::OpenSoon(std::move(gate));
}

void UnitsWaiter::OfferGate(const std::shared_ptr<AnswerGate>& gate) {
  if (!gate_) gate_ = gate;
}

void UnitsWaiter::Wait() {
  while (remaining_.load(std::memory_order_acquire) > 0) {
    const uint32_t seen = gate_->Seen();
    if (remaining_.load(std::memory_order_acquire) == 0) break;
    gate_->WaitPast(seen);
  }
}

void AsyncPut::UnitDone(WriteUnit*) {
  Result<PutResult> r = unit.results.size() == 1 ? std::move(unit.results[0])
                                                 : Result<PutResult>(Internal("put not answered"));
  Callback done = std::move(done_);
  delete this;
  done(std::move(r));
}

}  // namespace cellar::internal
