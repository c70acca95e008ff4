// IndexWorker: keeps every applied index up to date from the change log.
//
// One Kafka consumer group (<prefix>.indexer, changelog/consumer_groups.h) over
// the change logs of every datastore that has an index, read with a
// KeyedConsumer (changelog/keyed_consumer.h) in batch mode. Each event is
// applied (IndexWriter::ApplyBatch) to every writable version (building or
// ready) of every index with a column_def for the event's column; the events
// queued for a lane (datastore, host of the row, shard mod lanes_per_host)
// are applied together in one transaction of that host, which also records
// how far each shard's log is applied (index_positions.h). Each
// version is written with the definition it was created from (the registry
// keeps it), so a worker started with an older or newer YAML than a version's
// still writes it correctly. The list of writable versions is cached for
// kWritableVersionsCacheMs, except that an index with no version yet is looked
// up again on each of its events; while the catalog was never read (its host
// down since the start) events wait. Offsets are committed only for events
// applied everywhere; Unavailable shards are retried with backoff, so nothing
// is skipped. A body left out of the change log (over
// kafka.max_event_body_bytes) is read from the store first; while that read
// fails the event waits: it is never applied without its body, except a
// version of a TTL column that is no longer stored (expired, it has no entry).
// Registers in its registry (options.metrics) the IndexProbe's metrics
// (index_probe.h): cellar_index_lag_seconds (the cell's created_at to its entry
// written, observed once per event that changed the index: an entry upserted
// or removed; replayed, stale and unindexed events are not lag),
// cellar_index_applied_total{index,outcome}, cellar_index_skipped_total{index},
// cellar_index_lag_events{index} and cellar_index_oldest_unprocessed_age_seconds{index}
// (updated after every offset commit round, commit_interval_ms);
// and the consumer's cellar_consumer_body_rereads_total{group,outcome}. It
// serves nothing: a program exports the registry (server/metrics_endpoint.h).
// Threading: Start/Stop from one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "cells/cell_store.h"
#include "indexes/index_definition.h"

namespace cellar {

struct IndexWorkerOptions {
  int concurrency = 8;         // batches applied in parallel (at most one per lane)
  int max_pending = 10000;     // queued events before polling pauses
  bool from_beginning = true;  // where a new consumer group starts
  // Events are applied in batches, one transaction per batch, one batch of a
  // lane at a time; a lane is (datastore, host, shard mod lanes_per_host).
  // Lanes write disjoint rows, so more lanes overlap more commits (4 held the
  // pipeline benchmark's index p99 under 100 ms at a rate where 2 did not);
  int lanes_per_host = 4;
  // A batch of fewer than this many events also takes the queued events of
  // its host's idle lanes (KeyedConsumerOptions::lane_share_below): at low
  // rates a relay transaction's events commit in one index transaction, not
  // one per lane; at high rates, with this many events per lane, lanes keep
  // overlapping their commits. 0: never.
  int lane_share_below = 32;
  int max_batch = 500;  // events per batch at most
  // A batch of fewer than max_batch events waits until its oldest event was
  // queued this many milliseconds ago (KeyedConsumerOptions::batch_linger_ms):
  // fewer, larger transactions at low rates, for up to this much more lag.
  int batch_linger_ms = 0;
  // How long Stop() lets queued events finish (retries going on) before it
  // starts no more of them and leaves the rest to the next worker (they are
  // delivered again). A batch in flight is always waited for. Give the
  // process this plus a few seconds to stop (Kubernetes' default grace is 30 s).
  int drain_timeout_ms = 30000;
  // Where the worker registers its metrics; not owned, must outlive the
  // worker. Null: a registry of the worker's own.
  MetricsRegistry* metrics = nullptr;
};

class IndexWorker {
 public:
  // `store` is not owned and must outlive the worker.
  IndexWorker(CellStore* store, std::vector<IndexDefinition> definitions,
              IndexWorkerOptions options = {});
  ~IndexWorker();

  // Unavailable when Kafka cannot be reached; InvalidArgument without indexes;
  // FailedPrecondition on a cluster still in the per-shard layout of an older
  // Cellar (CellStore::CheckLayout).
  Status Start();
  // Stops polling, finishes queued events for up to options.drain_timeout_ms
  // (then the batches in flight), commits offsets, leaves the group. Idempotent.
  void Stop();

  // The registry in use (options.metrics or the worker's own).
  MetricsRegistry& metrics();
  // p50/p99 of cell commit to index write, in milliseconds.
  double LagQuantileMs(double q) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
