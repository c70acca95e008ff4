#include "retention/purge_probe.h"

namespace cellar {

PurgeProbe::PurgeProbe(MetricsRegistry* registry, const std::vector<std::string>& datastores) {
  MetricsRegistry& r = *registry;
  for (const std::string& ds : datastores) {
    const MetricLabels labels{{"datastore", ds}};
    series_[ds] = Series{
        &r.GetCounter("cellar_purge_runs_total", "Background purge runs", labels),
        &r.GetCounter("cellar_purge_failures_total",
                      "Background purge runs with an error or a failed host", labels),
        &r.GetCounter("cellar_purge_cells_deleted_total", "Expired cells deleted by purge", labels),
        &r.GetCounter("cellar_purge_index_entries_removed_total",
                      "Index entries removed with the cells purge deleted", labels),
        &r.GetGauge("cellar_purge_held_back_cells",
                    "Expired cells kept at the last purge because the relay had not "
                    "published them",
                    labels)};
  }
}

const PurgeProbe::Series* PurgeProbe::For(const std::string& datastore) const {
  auto it = series_.find(datastore);
  return it == series_.end() ? nullptr : &it->second;
}

}  // namespace cellar
