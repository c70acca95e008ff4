// Blocks SIGINT/SIGTERM in every thread started after the call, and waits for one.
#pragma once

#include <csignal>

namespace cellar {

// Call first in main(), before any thread starts.
void BlockTerminationSignals();
// Waits up to timeout_ms for SIGINT/SIGTERM. Returns the signal, or 0 on timeout.
int WaitForTerminationSignal(int timeout_ms);

}  // namespace cellar
