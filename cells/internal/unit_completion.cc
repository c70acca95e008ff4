#include "cells/internal/unit_completion.h"

namespace cellar::internal {

void UnitsWaiter::UnitDone(WriteUnit*) {
  // Signalled under the lock: Wait() cannot return (and destroy this) before
  // the signal is done.
  MutexLock lock(&mu_);
  if (--remaining_ == 0) cv_.NotifyAll();
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
