// IndexProbe: the index worker's metrics, each registered here and nowhere
// else; IndexWorker and IndexWriter update them.
//   cellar_index_lag_seconds                 cell created_at to entry written, for
//                                            events that changed the index (histogram)
//   cellar_index_applied_total{index,outcome}  cell versions applied (upserted, removed,
//                                            stale, skipped, not_indexed)
//   cellar_index_skipped_total{index}        cell versions without a valid entry
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe; returned references live as long as the registry.
#pragma once

#include <string>

#include "base/metrics.h"

namespace cellar {

class IndexProbe {
 public:
  explicit IndexProbe(MetricsRegistry* registry);

  Histogram& Lag() { return *lag_; }
  Counter& Applied(const std::string& index, const std::string& outcome);
  Counter& Skipped(const std::string& index);

  MetricsRegistry& registry() { return *registry_; }

 private:
  MetricsRegistry* registry_;
  Histogram* lag_;
};

}  // namespace cellar
