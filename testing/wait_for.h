// WaitFor: poll a condition until it holds or a deadline passes. Shared by the
// integration tests (one polling loop instead of one per test file).
#pragma once

#include <chrono>
#include <functional>

namespace cellar::testing {

// Polls `done` every `step` until it is true or `timeout` passed. Returns its
// last value (so a condition that became true at the deadline counts).
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds step = std::chrono::milliseconds(20));

}  // namespace cellar::testing
