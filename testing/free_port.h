// FreeLoopbackPort: a loopback TCP port nothing listens on right now, for a
// private server to bind or for a client that must find nothing there.
#pragma once

namespace cellar::testing {

// Asks the kernel for a currently free 127.0.0.1 port (bind to port 0, read
// it back, close). Another process may take it before the caller binds it;
// callers that bind retry with a new port in that case.
// Throws std::runtime_error when no socket can be bound (start-up failure of
// the test environment, not a test outcome).
int FreeLoopbackPort();

}  // namespace cellar::testing
