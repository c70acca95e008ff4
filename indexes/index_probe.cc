#include "indexes/index_probe.h"

#include <algorithm>

namespace cellar {

IndexProbe::IndexProbe(MetricsRegistry* registry)
    : registry_(registry),
      lag_(&registry->GetHistogram("cellar_index_lag_seconds",
                                   "Cell created_at to index entry written, for events that "
                                   "changed the index")) {}

Counter& IndexProbe::Applied(const std::string& index, const std::string& outcome) {
  return registry_->GetCounter("cellar_index_applied_total", "Cell versions applied to an index",
                               {{"index", index}, {"outcome", outcome}});
}

Counter& IndexProbe::Skipped(const std::string& index) {
  return registry_->GetCounter("cellar_index_skipped_total", "Cell versions without a valid entry",
                               {{"index", index}});
}

Gauge& IndexProbe::LagEvents(const std::string& index) {
  return registry_->GetGauge("cellar_index_lag_events",
                             "Change-log records of the index's datastore not yet applied",
                             {{"index", index}});
}

Gauge& IndexProbe::OldestUnprocessedAge(const std::string& index) {
  return registry_->GetGauge(
      "cellar_index_oldest_unprocessed_age_seconds",
      "Seconds since the created_at of the oldest change-log record not yet applied (0 when "
      "caught up)",
      {{"index", index}});
}

void IndexProbe::UpdateProgress(
    const std::vector<std::pair<std::string, std::string>>& index_topics,
    const std::vector<PartitionProgress>& progress, int64_t now_ms) {
  for (const auto& [index, topic] : index_topics) {
    int64_t lag = 0;
    double age = 0;
    for (const auto& p : progress) {
      if (p.partition.topic != topic || p.end < 0) continue;
      lag += p.lag;
      age = std::max(age, OldestUnprocessedAgeSeconds(p, now_ms));
    }
    LagEvents(index).Set(static_cast<double>(lag));
    OldestUnprocessedAge(index).Set(age);
  }
}

}  // namespace cellar
