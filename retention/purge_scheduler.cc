#include "retention/purge_scheduler.h"

#include <chrono>
#include <string>

#include "base/log.h"
#include "retention/purger.h"

namespace cellar {

PurgeScheduler::PurgeScheduler(CellStore* store, MetricsRegistry* metrics) : store_(store) {
  if (metrics) probe_ = std::make_unique<PurgeProbe>(metrics, PurgedDatastores(store_->config()));
}

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

std::vector<std::string> PurgeScheduler::PurgedDatastores(const ClusterConfig& config) {
  std::vector<std::string> out;
  for (const DatastoreConfig& ds : config.datastores) {
    bool has_ttl = false;
    for (const ColumnConfig& c : ds.columns) has_ttl |= c.ttl_ms > 0;
    if (has_ttl) out.push_back(ds.name);
  }
  return out;
}

void PurgeScheduler::RunOnce() {
  Purger purger(store_);
  for (const std::string& datastore : PurgedDatastores(store_->config())) {
    if (stop_) return;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = purger.Run(datastore, &stop_);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    const bool failed = !r.ok() || r->hosts_failed > 0;
    if (const PurgeProbe::Series* m = probe_ ? probe_->For(datastore) : nullptr) {
      m->runs->Increment();
      if (failed) m->failures->Increment();
      if (r.ok()) {
        m->cells_deleted->Increment(r->deleted);
        m->index_entries_removed->Increment(r->index_entries_removed);
        m->held_back->Set(static_cast<double>(r->held_back));
      }
    }
    if (!r.ok()) {
      LogWarn(
          "purge", "run failed",
          {{"datastore", datastore}, {"error", r.status().ToString()}, {"ms", std::to_string(ms)}});
    } else {
      std::string errors;
      for (const HostPurge& h : r->hosts)
        if (!h.error.empty()) errors += (errors.empty() ? "" : "; ") + h.host + ": " + h.error;
      Log(failed ? LogLevel::kWarn : LogLevel::kInfo, "purge", "run",
          {{"datastore", datastore},
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
