// IndexProbe: the index worker's metrics, each registered here and nowhere
// else; IndexWorker and IndexWriter update them.
//   cellar_index_lag_seconds                 cell created_at to entry written, for
//                                            events that changed the index (histogram)
//   cellar_index_applied_total{index,outcome}  cell versions applied (upserted, removed,
//                                            stale, skipped, not_indexed)
//   cellar_index_skipped_total{index}        cell versions without a valid entry
//   cellar_index_lag_events{index}           change-log records of the index's datastore
//                                            not yet applied (summed over partitions)
//   cellar_index_oldest_unprocessed_age_seconds{index}  now minus the created_at (record
//                                            timestamp) of the oldest record of the index's
//                                            datastore not yet applied; 0 when caught up
// The last two are per index, not per version: every writable version of an
// index is written by the same events in the same transaction.
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe; returned references live as long as the registry.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/metrics.h"
#include "changelog/keyed_consumer.h"

namespace cellar {

class IndexProbe {
 public:
  explicit IndexProbe(MetricsRegistry* registry);

  Histogram& Lag() { return *lag_; }
  Counter& Applied(const std::string& index, const std::string& outcome);
  Counter& Skipped(const std::string& index);
  Gauge& LagEvents(const std::string& index);
  Gauge& OldestUnprocessedAge(const std::string& index);
  // Sets LagEvents and OldestUnprocessedAge of each index of `index_topics`
  // (index name, change-log topic of its datastore) from the consumer's
  // `progress` at `now_ms`.
  void UpdateProgress(const std::vector<std::pair<std::string, std::string>>& index_topics,
                      const std::vector<PartitionProgress>& progress, int64_t now_ms);

  MetricsRegistry& registry() { return *registry_; }

 private:
  MetricsRegistry* registry_;
  Histogram* lag_;
};

}  // namespace cellar
