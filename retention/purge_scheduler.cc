#include "retention/purge_scheduler.h"

#include <chrono>
#include <string>

#include "base/log.h"
#include "retention/purger.h"

namespace cellar {

PurgeScheduler::~PurgeScheduler() { Stop(); }

Status PurgeScheduler::Start() {
  if (store_->config().purge.interval_ms <= 0)
    return FailedPrecondition("the background purge is off (purge.interval is not set)");
  if (thread_.joinable()) return FailedPrecondition("the purge scheduler already runs");
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
  LogInfo("purge", "scheduled",
          {{"interval_ms", std::to_string(store_->config().purge.interval_ms)}});
  return Status::Ok();
}

void PurgeScheduler::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void PurgeScheduler::Loop() {
  const auto interval = std::chrono::milliseconds(store_->config().purge.interval_ms);
  while (true) {
    {
      // stop_ is atomic; mu_ orders Stop()'s store and notify with this wait.
      MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + interval;
      while (!stop_.load())
        if (!wake_.WaitUntil(&mu_, deadline)) break;
      if (stop_.load()) return;
    }
    RunOnce();
  }
}

void PurgeScheduler::RunOnce() {
  Purger purger(store_);
  for (const DatastoreConfig& ds : store_->config().datastores) {
    bool has_ttl = false;
    for (const ColumnConfig& c : ds.columns) has_ttl |= c.ttl_ms > 0;
    if (!has_ttl) continue;
    if (stop_) return;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = purger.Run(ds.name, &stop_);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    const MetricLabels labels{{"datastore", ds.name}};
    const bool failed = !r.ok() || r->hosts_failed > 0;
    if (metrics_) {
      metrics_->GetCounter("cellar_purge_runs_total", "Background purge runs", labels).Increment();
      // Created at 0 on the first run, so that a rate() over it exists.
      Counter& failures =
          metrics_->GetCounter("cellar_purge_failures_total",
                               "Background purge runs with an error or a failed host", labels);
      if (failed) failures.Increment();
      if (r.ok()) {
        metrics_
            ->GetCounter("cellar_purge_cells_deleted_total", "Expired cells deleted by purge",
                         labels)
            .Increment(r->deleted);
        metrics_
            ->GetCounter("cellar_purge_index_entries_removed_total",
                         "Index entries removed with the cells purge deleted", labels)
            .Increment(r->index_entries_removed);
        metrics_
            ->GetGauge("cellar_purge_held_back_cells",
                       "Expired cells kept at the last purge because the relay had not "
                       "published them",
                       labels)
            .Set(static_cast<double>(r->held_back));
      }
    }
    if (!r.ok()) {
      LogWarn(
          "purge", "run failed",
          {{"datastore", ds.name}, {"error", r.status().ToString()}, {"ms", std::to_string(ms)}});
    } else {
      std::string errors;
      for (const HostPurge& h : r->hosts)
        if (!h.error.empty()) errors += (errors.empty() ? "" : "; ") + h.host + ": " + h.error;
      Log(failed ? LogLevel::kWarn : LogLevel::kInfo, "purge", "run",
          {{"datastore", ds.name},
           {"deleted", std::to_string(r->deleted)},
           {"held_back", std::to_string(r->held_back)},
           {"index_entries_removed", std::to_string(r->index_entries_removed)},
           {"hosts_busy", std::to_string(r->hosts_busy)},
           {"hosts_failed", std::to_string(r->hosts_failed)},
           {"errors", errors},
           {"ms", std::to_string(ms)}});
    }
    runs_.fetch_add(1);
  }
}

}  // namespace cellar
