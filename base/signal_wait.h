// Termination signals for long-running mains: block SIGINT/SIGTERM in every
// thread, then wait for one in the main thread (sigtimedwait), so no library
// thread ever receives them.
#pragma once

#include <csignal>

namespace cellar {

// Resets SIGINT/SIGTERM to their default disposition (a shell starts
// background jobs with SIGINT ignored, and an ignored signal is discarded
// instead of reaching the wait below) and blocks them in the calling thread,
// hence in every thread it starts afterwards.
// REQUIRES: called first in main(), before any thread starts.
void BlockTerminationSignals();
// Waits up to timeout_ms for SIGINT/SIGTERM. Returns the signal, or 0 on timeout.
// REQUIRES: BlockTerminationSignals() was called.
int WaitForTerminationSignal(int timeout_ms);

}  // namespace cellar
