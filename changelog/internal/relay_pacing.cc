#include "changelog/internal/relay_pacing.h"

#include <algorithm>

namespace cellar::internal {

int TrickleWaitMs(const RelayConfig& relay, size_t produced, std::chrono::milliseconds gathered) {
  const int min_ms = std::max(1, relay.poll_min_ms);
  const int max_ms = std::max(min_ms, relay.poll_max_ms);
  if (relay.target_batch_cells <= 0 || produced == 0 || gathered.count() <= 0) return min_ms;
  // At the rate just seen (produced / gathered), target_batch_cells take this long.
  const double wait_ms = static_cast<double>(relay.target_batch_cells) *
                         static_cast<double>(gathered.count()) / static_cast<double>(produced);
  return static_cast<int>(
      std::clamp(wait_ms, static_cast<double>(min_ms), static_cast<double>(max_ms)));
}

}  // namespace cellar::internal
