// RelayProbe: the relay's metrics (relay.h), each registered here and nowhere
// else; the relay updates them.
//   cellar_relay_events_published_total{datastore}   cell events published: acknowledged
//       by Kafka (exactly-once mode: counted when their fenced batch commits,
//       cells a takeover found already in Kafka included)
//   cellar_relay_lag_cells{host,datastore}           host-log positions committed but not
//       yet acknowledged (the stream's head minus its checkpoint, ReadRelayStatus)
//   cellar_relay_oldest_unpublished_age_seconds{host,datastore}  now minus the created_at
//       of the oldest cell not yet acknowledged; 0 when caught up (OldestUnpublishedAgeSeconds)
//   cellar_relay_checkpoint_age_seconds{host,datastore}  since the checkpoint last moved
//       (0 before its first checkpoint; it grows on an idle stream too: read it
//       with the lag)
//   cellar_relay_log_reads_total{host,datastore}     reads of the stream's host log (polls,
//       found something or not): each stream backs off on its own while idle
//   cellar_relay_transactions_total{host,datastore}  Kafka transactions committed (exactly-once
//       mode): each costs the broker and the producer about the same whatever it carries
//   cellar_relay_owned_streams                       streams this relay owns
//   cellar_relay_rewinds_total                       streams rewound after a failed delivery
//   cellar_relay_streams_fenced_total                streams dropped: another relay claimed them
//   cellar_relay_fenced_batches_rolled_back_total    exactly-once batches rolled back
//   cellar_relay_skipped_already_published_total     cells found in Kafka on takeover, not resent
//   cellar_relay_positions_reused_after_loss_total   positions where Kafka holds a cell the host
//                                                    lost (failover --accept-loss) and the log
//                                                    another: that one published too
//   cellar_relay_broker_loss_resets_total            streams republished: the broker lost events
// Every series of the cluster's hosts and datastores exists from construction
// (at 0). Ownership: the registry is not owned and outlives the probe.
// Threading: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/metrics.h"
#include "base/time.h"
#include "changelog/relay.h"
#include "config/cluster_config.h"

namespace cellar {

class RelayProbe {
 public:
  RelayProbe(MetricsRegistry* registry, const ClusterConfig& config);

  // `n` events of `datastore` published (an unknown datastore is ignored).
  void Published(const std::string& datastore, uint64_t n = 1);
  // One read of the host log of (host, datastore) (an unknown stream is ignored).
  void LogRead(const std::string& host, const std::string& datastore);
  // One Kafka transaction of (host, datastore) committed (an unknown stream is ignored).
  void TransactionCommitted(const std::string& host, const std::string& datastore);
  // Sets the per-stream gauges from `streams` (ReadRelayStatus) at time `now`;
  // a stream that could not be read keeps its previous values.
  void UpdateStreams(const std::vector<RelayStreamStatus>& streams, MicrosSinceEpoch now);

  Gauge& OwnedStreams() { return *owned_streams_; }
  Counter& Rewinds() { return *rewinds_; }
  Counter& StreamsFenced() { return *streams_fenced_; }
  Counter& FencedBatchesRolledBack() { return *fenced_batches_rolled_back_; }
  Counter& SkippedAlreadyPublished() { return *skipped_already_published_; }
  Counter& PositionsReusedAfterLoss() { return *positions_reused_after_loss_; }
  Counter& BrokerLossResets() { return *broker_loss_resets_; }

 private:
  struct StreamGauges {
    Gauge* lag;
    Gauge* oldest_age;
    Gauge* checkpoint_age;
    Counter* log_reads;
    Counter* transactions;
  };
  // Filled by the constructor, read-only afterwards.
  std::map<std::string, Counter*> published_;                            // by datastore
  std::map<std::pair<std::string, std::string>, StreamGauges> streams_;  // (host, datastore)
  Gauge* owned_streams_;
  Counter* rewinds_;
  Counter* streams_fenced_;
  Counter* fenced_batches_rolled_back_;
  Counter* skipped_already_published_;
  Counter* positions_reused_after_loss_;
  Counter* broker_loss_resets_;
};

}  // namespace cellar
