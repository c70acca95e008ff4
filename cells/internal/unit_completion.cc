#include "cells/internal/unit_completion.h"

namespace cellar::internal {

void UnitsWaiter::UnitDone(WriteUnit*) {
  // Taken while the submitter is still waiting (remaining_ > 0), so this
  // outlives the signal even if Wait() returns and drops its reference first.
  std::shared_ptr<UnitsWaiter> self = shared_from_this();
  bool last;
  {
    MutexLock lock(&mu_);
    last = --remaining_ == 0;
  }
  if (last) cv_.NotifyOne();
}

void UnitsWaiter::Wait() {
  MutexLock lock(&mu_);
  while (remaining_ > 0) cv_.Wait(&mu_);
}

void AsyncPut::UnitDone(WriteUnit*) {
  Result<PutResult> r = unit.results.size() == 1 ? std::move(unit.results[0])
                                                 : Result<PutResult>(Internal("put not answered"));
  Callback done = std::move(done_);
  delete this;
  done(std::move(r));
}

}  // namespace cellar::internal
