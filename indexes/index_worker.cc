#include "indexes/index_worker.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "changelog/change_log_consumer.h"
#include "changelog/keyed_executor.h"
#include "changelog/partition_offsets.h"
#include "indexes/index_catalog.h"
#include "indexes/index_writer.h"

namespace cellar {

struct IndexWorker::Impl {
  CellStore* store;
  std::vector<IndexDefinition> defs;
  IndexWorkerOptions options;
  MetricsRegistry metrics;
  IndexCatalog catalog;
  IndexWriter writer;
  std::unique_ptr<ChangeLogConsumer> consumer;
  std::unique_ptr<KeyedExecutor> executor;
  std::thread poll_thread;
  std::atomic<bool> stopping{false};
  std::unique_ptr<httplib::Server> http;
  std::thread http_thread;
  Histogram* lag = nullptr;

  std::mutex offsets_mu;
  std::map<std::pair<std::string, int32_t>, PartitionOffsets> offsets;
  std::map<std::pair<std::string, int32_t>, int64_t> committed;

  std::mutex versions_mu;
  // index -> writable versions, each with the definition it was created from
  // (a changed definition's new version has other columns than the old one).
  std::map<std::string, std::vector<std::pair<int, IndexDefinition>>> versions;
  std::map<std::pair<std::string, int>, IndexDefinition> version_defs;  // never change
  std::chrono::steady_clock::time_point versions_at{};

  Impl(CellStore* s, std::vector<IndexDefinition> d, IndexWorkerOptions o)
      : store(s), defs(std::move(d)), options(std::move(o)), catalog(s), writer(s, &metrics) {
    lag = &metrics.GetHistogram("cellar_index_lag_seconds", "Cell commit to index entry written");
  }

  // Re-reads the writable versions of `d`; false (keeping the previous answer)
  // when the catalog cannot be read. REQUIRES: versions_mu held.
  bool RefreshVersions(const IndexDefinition& d) {
    auto v = catalog.Writable(d.table);
    if (!v.ok()) return false;
    std::vector<std::pair<int, IndexDefinition>> out;
    for (const auto& x : *v) {
      auto cached = version_defs.find({d.table, x.version});
      if (cached == version_defs.end()) {
        auto def = catalog.DefinitionOf(d, x);
        if (!def.ok() && def.status().code() != StatusCode::kFailedPrecondition) return false;
        if (!def.ok())  // a registry row without its definition: assume ours (as before)
          LogWarn("index", "version without a stored definition; writing it with ours",
                  {{"index", d.table},
                   {"version", std::to_string(x.version)},
                   {"error", def.status().ToString()}});
        cached =
            version_defs.emplace(std::make_pair(d.table, x.version), def.ok() ? *def : d).first;
      }
      out.emplace_back(x.version, cached->second);
    }
    versions[d.table] = std::move(out);
    return true;
  }

  std::vector<std::pair<int, IndexDefinition>> WritableVersions(const IndexDefinition& d) {
    std::lock_guard<std::mutex> lock(versions_mu);
    auto now = std::chrono::steady_clock::now();
    if (now - versions_at > std::chrono::milliseconds(kWritableVersionsCacheMs)) {
      for (const auto& x : defs) RefreshVersions(x);  // on failure keep the previous answer
      versions_at = now;
    } else if (versions[d.table].empty()) {
      // Not applied when last looked: an index applied since then over an
      // empty datastore is ready at once and must not miss these events.
      RefreshVersions(d);
    }
    return versions[d.table];
  }

  // Applies `cell` to every writable version of every matching index, retrying
  // transient failures until done or stopping. False when abandoned.
  bool ApplyEverywhere(const std::string& datastore, const Cell& cell) {
    for (const auto& d : defs) {
      if (d.datastore != datastore || !d.FindColumnDef(cell.column)) continue;
      for (const auto& [version, vdef] : WritableVersions(d)) {
        if (!vdef.FindColumnDef(cell.column)) continue;
        for (int attempt = 0;; ++attempt) {
          auto r = writer.Apply(vdef, version, cell);
          if (r.ok()) {
            metrics
                .GetCounter("cellar_index_applied_total", "Cell versions applied to an index",
                            {{"index", d.table},
                             {"outcome", r->outcome == IndexApply::kUpserted  ? "upserted"
                                         : r->outcome == IndexApply::kRemoved ? "removed"
                                         : r->outcome == IndexApply::kStale   ? "stale"
                                         : r->outcome == IndexApply::kSkipped ? "skipped"
                                                                              : "not_indexed"}})
                .Increment();
            break;
          }
          if (stopping) return false;
          LogWarn("index", "apply failed; retrying",
                  {{"index", d.table},
                   {"cell", cell.Address(datastore)},
                   {"error", r.status().ToString()}});
          std::this_thread::sleep_for(
              std::chrono::milliseconds(std::min(2000, 50 << std::min(attempt, 5))));  // backoff
        }
      }
    }
    lag->Observe(std::max<double>(0, (NowMicros() - cell.created_at) / 1e6));
    return true;
  }

  void MarkDone(const std::pair<std::string, int32_t>& tp, int64_t offset) {
    std::lock_guard<std::mutex> lock(offsets_mu);
    offsets[tp].Done(offset);
  }

  void Commit() {
    std::vector<std::pair<std::pair<std::string, int32_t>, int64_t>> todo;
    {
      std::lock_guard<std::mutex> lock(offsets_mu);
      for (auto& [tp, off] : offsets)
        if (off.committable() >= 0 && off.committable() + 1 > committed[tp])
          todo.emplace_back(tp, off.committable());
    }
    for (const auto& [tp, c] : todo)
      if (consumer->Commit(tp.first, tp.second, c).ok()) {
        std::lock_guard<std::mutex> lock(offsets_mu);
        committed[tp] = c + 1;
      }
  }

  void PollLoop() {
    auto last_commit = std::chrono::steady_clock::now();
    while (!stopping) {
      if (executor->pending() >= static_cast<size_t>(options.max_pending)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // backpressure
      } else {
        auto ev = consumer->Poll(20);
        if (!ev.ok()) {
          LogWarn("index", "consume failed", {{"error", ev.status().ToString()}});
        } else if (ev->has_value()) {
          auto e = std::make_shared<ConsumedEvent>(std::move(**ev));
          std::pair<std::string, int32_t> tp{e->topic, e->partition};
          {
            std::lock_guard<std::mutex> lock(offsets_mu);
            offsets[tp].Track(e->offset);
          }
          executor->Submit(e->event.cell.row_key.ToString(), [this, e, tp] {
            Cell cell = e->event.cell;
            if (e->event.body_omitted) {  // too large for the log: read it
              auto full = store->Get(e->event.datastore, cell.row_key, cell.column, cell.ref_key);
              if (full.ok()) cell.body = full->body;
            }
            if (ApplyEverywhere(e->event.datastore, cell)) MarkDone(tp, e->offset);
          });
        }
      }
      if (std::chrono::steady_clock::now() - last_commit > std::chrono::milliseconds(200)) {
        Commit();
        last_commit = std::chrono::steady_clock::now();
      }
    }
  }
};

IndexWorker::IndexWorker(CellStore* store, std::vector<IndexDefinition> definitions,
                         IndexWorkerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(definitions), std::move(options))) {}

IndexWorker::~IndexWorker() { Stop(); }

MetricsRegistry& IndexWorker::metrics() { return impl_->metrics; }

double IndexWorker::LagQuantileMs(double q) const { return impl_->lag->Quantile(q) * 1000; }

Status IndexWorker::Start() {
  Impl& m = *impl_;
  if (m.defs.empty()) return InvalidArgument("the index worker has no index definitions");
  // Index tables live in the host databases: refuse a cluster still in the
  // per-shard layout (a host that is down is the poll loop's to retry).
  if (Status layout = m.store->CheckLayout(); layout.code() == StatusCode::kFailedPrecondition)
    return layout;
  std::vector<std::string> datastores;
  for (const auto& d : m.defs)
    if (std::find(datastores.begin(), datastores.end(), d.datastore) == datastores.end())
      datastores.push_back(d.datastore);
  ConsumerOptions opts;
  opts.group_id = m.store->config().kafka.topic_prefix + ".indexer";
  opts.from_beginning = m.options.from_beginning;
  opts.client_id = "cellar-indexer";
  CELLAR_ASSIGN_OR_RETURN(m.consumer,
                          ChangeLogConsumer::Create(m.store->config(), datastores, opts));
  m.executor = std::make_unique<KeyedExecutor>(m.options.concurrency);
  m.poll_thread = std::thread([&m] { m.PollLoop(); });
  if (!m.options.metrics_address.empty()) {
    auto colon = m.options.metrics_address.rfind(':');
    m.http = std::make_unique<httplib::Server>();
    m.http->Get("/metrics", [&m](const httplib::Request&, httplib::Response& res) {
      res.set_content(m.metrics.Render(), "text/plain; version=0.0.4");
    });
    if (colon == std::string::npos ||
        !m.http->bind_to_port(m.options.metrics_address.substr(0, colon).c_str(),
                              std::atoi(m.options.metrics_address.c_str() + colon + 1)))
      return Unavailable("cannot listen on " + m.options.metrics_address);
    m.http_thread = std::thread([&m] { m.http->listen_after_bind(); });
  }
  LogInfo("index", "worker started",
          {{"group", opts.group_id}, {"indexes", std::to_string(m.defs.size())}});
  return Status::Ok();
}

void IndexWorker::Stop() {
  Impl& m = *impl_;
  if (!m.poll_thread.joinable()) return;
  m.stopping = true;
  m.poll_thread.join();
  m.executor->WaitIdle(30000);
  m.executor->Shutdown();
  m.Commit();
  m.consumer->Close();
  if (m.http) {
    m.http->stop();
    if (m.http_thread.joinable()) m.http_thread.join();
  }
  LogInfo("index", "worker stopped");
}

}  // namespace cellar
