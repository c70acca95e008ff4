// How long the relay pauses after a caught-up read of a busy stream.
//
// Each relay transaction costs about the same whatever it carries (the
// broker's requests and markers, the clients' timers, a wake-up and a commit
// in every consumer), so a trickle is read in pages of about
// relay.target_batch_cells cells rather than every poll_min_ms. The pause is
// what that many cells take to arrive at the rate the last read saw, between
// relay.poll_min_ms and relay.poll_max_ms.
//
// Threading: a pure function.
#pragma once

#include <chrono>
#include <cstddef>

#include "config/cluster_config.h"

namespace cellar::internal {

// The pause, in milliseconds, after a read that handed `produced` cells on
// (fewer than a page) that had `gathered` to arrive since the read before it.
// poll_min_ms when target_batch_cells is 0, nothing was produced, or
// `gathered` is not known (0).
int TrickleWaitMs(const RelayConfig& relay, size_t produced, std::chrono::milliseconds gathered);

}  // namespace cellar::internal
