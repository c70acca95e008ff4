#include "indexes/index_worker.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "base/log.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "base/time.h"
#include "cells/shard_map.h"
#include "changelog/cell_event.h"
#include "changelog/consumer_groups.h"
#include "changelog/keyed_consumer.h"
#include "indexes/index_catalog.h"
#include "indexes/index_positions.h"
#include "indexes/index_writer.h"

namespace cellar {
namespace {

const char* OutcomeName(IndexApply outcome) {
  switch (outcome) {
    case IndexApply::kUpserted:
      return "upserted";
    case IndexApply::kRemoved:
      return "removed";
    case IndexApply::kStale:
      return "stale";
    case IndexApply::kSkipped:
      return "skipped";
    case IndexApply::kNotIndexed:
      break;
  }
  return "not_indexed";
}

// The outcome changed what the index holds for the row (an entry written or
// removed, or the pointer moved to a version without an entry).
bool ChangedTheIndex(IndexApply outcome) {
  return outcome == IndexApply::kUpserted || outcome == IndexApply::kRemoved ||
         outcome == IndexApply::kSkipped;
}

}  // namespace

struct IndexWorker::Impl {
  using Versions = std::vector<std::pair<int, IndexDefinition>>;

  CellStore* store;
  std::vector<IndexDefinition> defs;
  IndexWorkerOptions options;
  MetricsRegistry own_metrics;
  MetricsRegistry* metrics;
  IndexProbe probe;
  IndexCatalog catalog;
  IndexWriter writer;
  std::unique_ptr<KeyedConsumer> consumer;

  Mutex versions_mu;
  // index -> writable versions, each with the definition it was created from
  // (a changed definition's new version has other columns than the old one).
  std::map<std::string, Versions> versions GUARDED_BY(versions_mu);
  // indexes whose catalog was read at least once
  std::set<std::string> versions_known GUARDED_BY(versions_mu);
  // never change
  std::map<std::pair<std::string, int>, IndexDefinition> version_defs GUARDED_BY(versions_mu);
  std::chrono::steady_clock::time_point versions_at GUARDED_BY(versions_mu){};

  Impl(CellStore* s, std::vector<IndexDefinition> d, IndexWorkerOptions o)
      : store(s),
        defs(std::move(d)),
        options(std::move(o)),
        metrics(options.metrics ? options.metrics : &own_metrics),
        probe(metrics),
        catalog(s),
        writer(s, &probe) {}

  // Re-reads the writable versions of `d`; false (keeping the previous answer)
  // when the catalog cannot be read.
  bool RefreshVersions(const IndexDefinition& d) REQUIRES(versions_mu) {
    auto v = catalog.Writable(d.table);
    if (!v.ok()) return false;
    Versions out;
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
    versions_known.insert(d.table);
    return true;
  }

  // The writable versions of `d`, or nullopt while its catalog was never read
  // (the host is down since the worker started: the event must wait).
  std::optional<Versions> WritableVersions(const IndexDefinition& d) {
    MutexLock lock(&versions_mu);
    auto now = std::chrono::steady_clock::now();
    if (now - versions_at > std::chrono::milliseconds(kWritableVersionsCacheMs)) {
      for (const auto& x : defs) RefreshVersions(x);  // on failure keep the previous answer
      versions_at = now;
    } else if (versions[d.table].empty()) {
      // Not applied when last looked: an index applied since then over an
      // empty datastore is ready at once and must not miss these events.
      RefreshVersions(d);
    }
    if (!versions_known.count(d.table)) return std::nullopt;
    return versions[d.table];
  }

  // Waits before attempt+1 of something that failed; false when stopping.
  bool Backoff(int attempt) {
    return consumer->WaitUnlessStopping(std::min(2000, 50 << std::min(attempt, 5)));
  }

  // Applies `cells` (one call's events: one datastore, rows of one host, each
  // lane's in log order) to every writable version of every index of the datastore, in
  // one batch (IndexWriter::ApplyBatch, which also records the positions),
  // retrying transient failures until done or stopping. False when abandoned.
  bool ApplyEvents(const std::string& datastore, const std::vector<const Cell*>& cells) {
    std::vector<std::pair<std::string, Versions>> writable;  // index -> its versions
    for (const auto& d : defs) {
      if (d.datastore != datastore) continue;
      std::optional<Versions> v;
      for (int attempt = 0; !(v = WritableVersions(d)); ++attempt) {
        LogWarn("index", "cannot read the index catalog; the events wait",
                {{"index", d.table}, {"events", std::to_string(cells.size())}});
        if (!Backoff(attempt)) return false;
      }
      writable.emplace_back(d.table, std::move(*v));
    }
    std::vector<IndexVersionRef> refs;
    std::vector<const std::string*> tables;  // parallel to refs
    for (const auto& [table, versions] : writable)
      for (const auto& [version, vdef] : versions) {
        refs.push_back(IndexVersionRef{&vdef, version});
        tables.push_back(&table);
      }
    // No index of the datastore applied yet: nothing to write, and no query
    // to answer (a backfill covers these cells once one is applied).
    if (refs.empty()) return true;
    for (int attempt = 0;; ++attempt) {
      auto r = writer.ApplyBatch(datastore, refs, cells, /*record_positions=*/true);
      if (r.ok()) {
        const double now_s = NowMicros() / 1e6;
        for (size_t i = 0; i < cells.size(); ++i) {
          bool changed = false;
          for (size_t v = 0; v < refs.size(); ++v) {
            const IndexApply outcome = (*r)[i][v].outcome;
            if (outcome == IndexApply::kNotIndexed) continue;
            probe.Applied(*tables[v], OutcomeName(outcome)).Increment();
            changed |= ChangedTheIndex(outcome);
          }
          // Only events that changed the index count: a replayed, stale or
          // unindexed event's age is no lag of the index.
          if (changed) probe.Lag().Observe(std::max<double>(0, now_s - cells[i]->created_at / 1e6));
        }
        return true;
      }
      LogWarn("index", "apply failed; retrying",
              {{"datastore", datastore},
               {"events", std::to_string(cells.size())},
               {"first", cells.front()->Address(datastore)},
               {"error", r.status().ToString()}});
      if (!Backoff(attempt)) return false;
    }
  }

  bool ApplyBatch(std::vector<KeyedEvent*>& events) {
    std::vector<const Cell*> cells;
    cells.reserve(events.size());
    for (const KeyedEvent* e : events) cells.push_back(&e->event.cell);
    return ApplyEvents(events.front()->event.datastore, cells);
  }

  // The lane of an event: its datastore and the host of its row (a batch is
  // one transaction of that host), split in lanes_per_host by shard.
  std::string Lane(const CellEvent& e) const {
    const ClusterConfig& cfg = store->config();
    const uint32_t shard = ShardForRow(e.cell.row_key, cfg.shards);
    const uint32_t split = static_cast<uint32_t>(std::max(1, options.lanes_per_host));
    return e.datastore + "/" + std::to_string(store->HostOfShard(shard)) + "/" +
           std::to_string(shard % split);
  }

  // The body left out of the log cannot be read, and not for a transient
  // reason. NotFound in a column with a TTL: the version expired (and may be
  // purged), and an expired version has no entry whatever its body, so it is
  // applied without one (IndexWriter gives it none). Anything else: the event
  // waits and the read is tried again (the consumer logs it), as failed
  // applies are: nothing is skipped.
  std::optional<Disposition> Unreadable(KeyedEvent& e, const Status& error) {
    const DatastoreConfig* ds = store->config().FindDatastore(e.event.datastore);
    const ColumnConfig* col = ds ? ds->FindColumn(e.event.cell.column) : nullptr;
    if (error.code() != StatusCode::kNotFound || !col || col->ttl_ms <= 0) return std::nullopt;
    return ApplyEvents(e.event.datastore, {&e.event.cell}) ? Disposition::kDone
                                                           : Disposition::kAbandoned;
  }

  // The group of a lane (Lane()): its datastore and host, without the split.
  static std::string LaneGroup(const std::string& lane) { return lane.substr(0, lane.rfind('/')); }

  // Events of columns no index covers still go through their lane, without
  // their body (never read again): they move the shard's applied position.
  Result<std::optional<CellEvent>> Decode(const ConsumedRecord& rec) const {
    CELLAR_ASSIGN_OR_RETURN(CellEvent e, DecodeCellEvent(rec.value));
    for (const auto& d : defs)
      if (d.datastore == e.datastore && d.FindColumnDef(e.cell.column))
        return std::optional<CellEvent>(std::move(e));
    e.cell.body.clear();
    e.body_omitted = false;
    return std::optional<CellEvent>(std::move(e));
  }
};

IndexWorker::IndexWorker(CellStore* store, std::vector<IndexDefinition> definitions,
                         IndexWorkerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(definitions), std::move(options))) {}

IndexWorker::~IndexWorker() { Stop(); }

MetricsRegistry& IndexWorker::metrics() { return *impl_->metrics; }

double IndexWorker::LagQuantileMs(double q) const { return impl_->probe.Lag().Quantile(q) * 1000; }

Status IndexWorker::Start() {
  Impl& m = *impl_;
  if (m.defs.empty()) return InvalidArgument("the index worker has no index definitions");
  // Index tables live in the host databases: refuse a cluster still in the
  // per-shard layout (a host that is down is the consumer's to wait for).
  if (Status layout = m.store->CheckLayout(); layout.code() == StatusCode::kFailedPrecondition)
    return layout;
  // Index tables of an older Cellar lack the positions table: create it on
  // every host that answers (`cellar index apply` creates it too).
  const ClusterConfig& cfg = m.store->config();
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    auto lease = m.store->PoolForHost(h).Acquire();
    Status s = lease.ok() ? EnsureIndexPositionsTable(**lease, cfg.HostDatabase(cfg.mysql.hosts[h]))
                          : lease.status();
    if (!s.ok())
      LogWarn("index", "cannot create the index positions table",
              {{"host", cfg.mysql.hosts[h].name}, {"error", s.ToString()}});
  }
  KeyedConsumerOptions o;
  for (const auto& d : m.defs)
    if (std::find(o.datastores.begin(), o.datastores.end(), d.datastore) == o.datastores.end())
      o.datastores.push_back(d.datastore);
  o.group_id = IndexerGroup(m.store->config().kafka);
  o.client_id = "cellar-indexer";
  o.from_beginning = m.options.from_beginning;
  o.concurrency = m.options.concurrency;
  o.max_pending = m.options.max_pending;
  o.log_component = "index";
  o.metrics = m.metrics;
  KeyedConsumerCallbacks cb;
  cb.decode = [&m](const ConsumedRecord& rec) { return m.Decode(rec); };
  o.max_batch = m.options.max_batch;
  o.batch_linger_ms = m.options.batch_linger_ms;
  o.lane_share_below = m.options.lane_share_below;
  cb.lane = [&m](const CellEvent& e) { return m.Lane(e); };
  // A host's idle lanes share a call, one transaction (ApplyBatch): at low
  // rates one relay batch's events commit once, not once per lane.
  cb.lane_group = &Impl::LaneGroup;
  cb.handle_batch = [&m](std::vector<KeyedEvent*>& events) {
    return m.ApplyBatch(events) ? Disposition::kDone : Disposition::kAbandoned;
  };
  cb.unreadable = [&m](KeyedEvent& e, const Status& error) { return m.Unreadable(e, error); };
  // Lag and oldest unprocessed age per index, after every commit round.
  std::vector<std::pair<std::string, std::string>> index_topics;
  for (const auto& d : m.defs) {
    index_topics.emplace_back(d.table, ChangeLogTopic(m.store->config().kafka, d.datastore));
    m.probe.LagEvents(d.table).Set(0);  // every series exists from the start
    m.probe.OldestUnprocessedAge(d.table).Set(0);
  }
  cb.on_progress = [&m, index_topics](const std::vector<PartitionProgress>& progress) {
    m.probe.UpdateProgress(index_topics, progress, NowMicros() / 1000);
  };
  m.consumer = std::make_unique<KeyedConsumer>(m.store, std::move(o), std::move(cb));
  CELLAR_RETURN_IF_ERROR(m.consumer->Start());
  LogInfo("index", "worker started",
          {{"group", m.consumer->group()}, {"indexes", std::to_string(m.defs.size())}});
  return Status::Ok();
}

void IndexWorker::Stop() {
  Impl& m = *impl_;
  if (!m.consumer) return;
  m.consumer->Stop(m.options.drain_timeout_ms);
  m.consumer.reset();
  LogInfo("index", "worker stopped");
}

}  // namespace cellar
