// Relay: publishes every committed cell to Kafka, in added_id order per host
// log, without ever losing one.
//
// Streams. Each (host, datastore) is one stream: the host's cells table is its
// log, ordered by added_id (cells/cell_store.h). The relay reads it with
// CellStore::HostLog, which returns a cell only once no smaller added_id can
// still commit (the write fence, cells/internal/write_fence.h), and publishes
// each cell to partition shard % kafka.partitions with key row_key. One shard
// lives on one host and one host log is published in order, so a shard's
// cells reach their partition in added_id order and per-row order holds.
//
// How nothing is lost after reading. The checkpoint (relay_checkpoint.h) moves
// to N only once Kafka acknowledged every cell of the stream up to N
// (idempotent producer, acks=all). A crash re-publishes from the checkpoint:
// consumers may see duplicates, never gaps. If a delivery fails or the
// producer hits a fatal error, the relay rewinds every stream to its
// acknowledged position.
//
// One owner per stream. A relay publishes a stream only while it holds the
// MySQL named lock RelayLockName(host database, datastore) on the stream's
// host. A relay that dies loses its connections and so its locks; another
// relay takes the stream over on its next ownership round
// (relay.lock_retry_ms). Live relays also hold one of 64 member locks on the
// first host; each relay owns at most ceil(streams / live relays), releasing
// extra streams (after flushing them) when another relay joins.
//
// Exactly once (relay.exactly_once, the default). Each stream publishes
// through two transactional producers of its own (RelayTransactionalIds),
// taking turns, one Kafka transaction per batch, whose position commits in
// the MySQL transaction that holds the stream's checkpoint row
// (internal/stream_claim.h). Two, because Kafka 3.x refuses a producer's next
// transaction (CONCURRENT_TRANSACTIONS) until the broker has written the
// previous one's commit markers, and librdkafka 2.0.2 retries that after a
// fixed 20 ms: with one producer, a busy stream's every batch waited for it.
// Batches stay sequential; only their producers alternate. A new owner's
// InitTransactions on both ids fences the previous owner's producers on the
// broker and aborts their open transactions, so a relay that stalls (SIGSTOP, a long GC
// pause, a lost MySQL connection) and resumes publishes nothing a
// read_committed reader sees; the new owner then reads what the stream has
// in Kafka beyond its checkpoint (committed records only) and skips it. A
// failed batch (fenced; librdkafka 2.0.2's OUT_OF_ORDER_SEQUENCE after a
// broker restart; a timeout) is rolled back by building new producers, whose
// InitTransactions aborts it with a bumped epoch: a late produce request of
// the batch is then refused by the broker, so the relay needs no broker-side
// transaction verification (docs/design.md, The broker).
//
// Kafka down: writes are unaffected (cells are already durable); the producer
// queues and retries, the relay logs once per outage and catches up.
//
// Metrics: with a registry the relay registers the RelayProbe's metrics
// (relay_probe.h) and updates them; the per-stream lag, oldest unpublished
// cell age and checkpoint age are
// read (ReadRelayStatus) every kRelayMetricsIntervalMs on a thread of their
// own. The relay serves nothing: a program exports the registry
// (server/metrics_endpoint.h).
//
// Threading: Start/Stop from one thread; stats() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "cells/cell_store.h"

namespace cellar {

// How often a relay with a registry refreshes its per-stream gauges.
inline constexpr int kRelayMetricsIntervalMs = 500;

struct RelayStats {
  uint64_t published = 0;                      // records handed to the producer
  uint64_t acknowledged = 0;                   // records Kafka acknowledged
  uint64_t rewinds = 0;                        // times a stream was rewound after a failed delivery
  uint64_t republished_after_broker_loss = 0;  // streams reset because the broker lost events
  std::vector<std::string> owned_streams;      // "<host name>/<datastore>"
  // Exactly-once mode:
  uint64_t fenced = 0;                     // streams dropped because another relay claimed them
  uint64_t skipped_already_published = 0;  // cells found in Kafka on takeover, not sent again
  // Positions at which Kafka held a cell the host no longer stores (lost by a
  // failover with --accept-loss) while the host's log has another cell there:
  // that cell was published too (exactly-once mode).
  uint64_t positions_reused_after_loss = 0;
  uint64_t failed_fenced_batches = 0;  // batches rolled back (transaction aborted or failed)
  uint64_t replaced_producers = 0;     // stream producer pairs rebuilt after a rolled-back batch
  // Kafka transactions committed: each costs the broker and the producer
  // about the same whatever it carries (docs/cost-per-write.md).
  uint64_t transactions = 0;
};

class Relay {
 public:
  // `store` is not owned and must outlive the relay. relay_id names this
  // process in logs. `metrics` (not owned, may be null: no metrics) must
  // outlive the relay.
  Relay(CellStore* store, std::string relay_id, MetricsRegistry* metrics = nullptr);
  ~Relay();

  // Creates the Kafka producer, the topics (kafka.partitions each) and the
  // checkpoint tables of reachable hosts, then starts publishing in the
  // background. InvalidArgument without kafka.brokers; Unavailable if Kafka
  // does not answer; FailedPrecondition when a host holds the per-shard
  // layout of an older Cellar (CellStore::CheckLayout).
  Status Start();
  // Stops publishing, waits (bounded) for outstanding acknowledgements, saves
  // checkpoints and releases every stream. Idempotent.
  void Stop();

  RelayStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Per stream (host, datastore) view for `cellar relay status` and the relay's
// cellar_relay_lag_cells / cellar_relay_oldest_unpublished_age_seconds.
// Read from MySQL alone, so it works with no relay running; "acknowledged"
// means saved in the stream's checkpoint (which trails Kafka's
// acknowledgements by about the relay's checkpoint save interval).
struct RelayStreamStatus {
  std::string host;  // host name
  std::string datastore;
  uint64_t checkpoint = 0;
  uint64_t head = 0;  // newest added_id of the host log
  uint64_t lag = 0;   // host-log positions committed but not yet acknowledged by Kafka
  MicrosSinceEpoch checkpoint_updated_at = 0;
  // created_at of the oldest committed cell above the checkpoint (the next
  // one to publish); 0 when the stream is caught up.
  MicrosSinceEpoch oldest_unpublished_created_at = 0;
  bool owned = false;  // a relay holds the stream's lock
  std::string error;   // non-empty when the host could not be read
};

// Every stream of the cluster, in host then datastore order of the config. A
// host that cannot be read gives its streams an `error` (the other fields
// are then not meaningful). Threading: any thread; one query batch per host.
std::vector<RelayStreamStatus> ReadRelayStatus(CellStore& store);

// Seconds from the stream's oldest unpublished cell's created_at to `now`
// (DynamoDB's IteratorAge); 0 when caught up (lag 0 or no such cell).
double OldestUnpublishedAgeSeconds(const RelayStreamStatus& status, MicrosSinceEpoch now);

// The transactional.ids of a stream's exactly-once producers:
// "<topic prefix>.relay.<host database>.<datastore>" (the id relays before
// the second producer used, so one of them is fenced too) and the same with
// ".1" appended.
std::vector<std::string> RelayTransactionalIds(const ClusterConfig& config,
                                               const std::string& host_database,
                                               const std::string& datastore);

// Lock name of a stream's relay ownership (at most 64 characters).
std::string RelayLockName(const std::string& host_database, const std::string& datastore);

}  // namespace cellar
