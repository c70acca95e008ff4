// PurgeScheduler: the background purge of a long-running process (cellard
// runs one when the config sets `purge: { interval: ... }`).
//
// Every config.purge.interval_ms (the first run one interval after Start) it
// runs Purger::Run for each datastore that has a column with a TTL, one after
// the other. Several processes may run schedulers over one cluster: the
// Purger's per-host lock lets one of them purge a host at a time, the others
// find it busy and skip it. Each datastore's run logs one line (component
// "purge", message "run": datastore, deleted, held_back,
// index_entries_removed, hosts_busy, hosts_failed, ms) and, with a metrics
// registry, updates its cellar_purge_* series (purge_probe.h; they exist at 0
// from construction for each datastore it purges).
// Threading: Start/Stop from one thread; runs() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "base/mutex.h"
#include "base/status.h"
#include "cells/cell_store.h"
#include "retention/purge_probe.h"

namespace cellar {

class PurgeScheduler {
 public:
  // Neither is owned; both must outlive the scheduler. metrics may be null.
  PurgeScheduler(CellStore* store, MetricsRegistry* metrics);
  ~PurgeScheduler();  // Stop()
  PurgeScheduler(const PurgeScheduler&) = delete;
  PurgeScheduler& operator=(const PurgeScheduler&) = delete;

  // Starts the background thread. FailedPrecondition when the config's
  // purge.interval_ms is 0 (the background purge is off) or it already runs.
  [[nodiscard]] Status Start();
  // Ends the wait or the run in progress (between batches: what is deleted
  // stays deleted, the rest waits for the next run) and joins. Idempotent.
  void Stop();

  // Datastore runs completed since Start (with or without failures).
  uint64_t runs() const { return runs_.load(); }

  // The datastores a run purges: those with a column with a TTL, in config order.
  static std::vector<std::string> PurgedDatastores(const ClusterConfig& config);

 private:
  void Loop();
  void RunOnce();

  CellStore* store_;
  std::unique_ptr<PurgeProbe> probe_;  // null without a registry
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> runs_{0};
  Mutex mu_;  // pairs Stop() with the wait on wake_ (stop_ itself is atomic)
  CondVar wake_;
  std::thread thread_;
};

}  // namespace cellar
