#include "indexes/index_probe.h"

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

}  // namespace cellar
