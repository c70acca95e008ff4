// PurgeProbe: the background purge's metrics (purge_scheduler.h), each
// registered here and nowhere else; the scheduler updates them. Labelled by
// datastore:
//   cellar_purge_runs_total                   runs
//   cellar_purge_failures_total               runs with an error or a failed host
//   cellar_purge_cells_deleted_total          cells deleted
//   cellar_purge_index_entries_removed_total  index entries removed with them
//   cellar_purge_held_back_cells              expired cells the relay had not
//                                             published at the last run (kept)
// Every series of the datastores named at construction exists from then (at 0).
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/metrics.h"

namespace cellar {

class PurgeProbe {
 public:
  struct Series {
    Counter* runs;
    Counter* failures;
    Counter* cells_deleted;
    Counter* index_entries_removed;
    Gauge* held_back;
  };

  PurgeProbe(MetricsRegistry* registry, const std::vector<std::string>& datastores);

  // The series of `datastore`; null for one not named at construction.
  const Series* For(const std::string& datastore) const;

 private:
  std::map<std::string, Series> series_;  // filled by the constructor, read-only afterwards
};

}  // namespace cellar
