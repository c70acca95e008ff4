#include "changelog/relay_probe.h"

#include <algorithm>

namespace cellar {

RelayProbe::RelayProbe(MetricsRegistry* registry, const ClusterConfig& config) {
  MetricsRegistry& r = *registry;
  for (const auto& ds : config.datastores)
    published_[ds.name] =
        &r.GetCounter("cellar_relay_events_published_total",
                      "Cell events published (acknowledged by Kafka)", {{"datastore", ds.name}});
  for (const auto& host : config.mysql.hosts)
    for (const auto& ds : config.datastores) {
      const MetricLabels labels{{"host", host.name}, {"datastore", ds.name}};
      streams_[{host.name, ds.name}] = StreamGauges{
          &r.GetGauge("cellar_relay_lag_cells",
                      "Host-log positions committed but not yet acknowledged by Kafka", labels),
          &r.GetGauge("cellar_relay_oldest_unpublished_age_seconds",
                      "Seconds since the created_at of the oldest cell not yet acknowledged "
                      "(0 when caught up)",
                      labels),
          &r.GetGauge("cellar_relay_checkpoint_age_seconds",
                      "Seconds since the stream's checkpoint last moved", labels),
          &r.GetCounter("cellar_relay_log_reads_total",
                        "Reads (polls) of the stream's host log, whether or not they found cells",
                        labels),
          &r.GetCounter("cellar_relay_transactions_total",
                        "Kafka transactions the relay committed for the stream (exactly-once "
                        "mode); each costs about the same whatever it carries",
                        labels)};
    }
  owned_streams_ = &r.GetGauge("cellar_relay_owned_streams", "Streams this relay owns");
  rewinds_ = &r.GetCounter("cellar_relay_rewinds_total",
                           "Streams rewound to their acknowledged position after a failure");
  streams_fenced_ = &r.GetCounter("cellar_relay_streams_fenced_total",
                                  "Streams dropped because another relay claimed them");
  fenced_batches_rolled_back_ =
      &r.GetCounter("cellar_relay_fenced_batches_rolled_back_total",
                    "Exactly-once batches rolled back (delivery failed or timed out)");
  skipped_already_published_ = &r.GetCounter("cellar_relay_skipped_already_published_total",
                                             "Cells found in Kafka on takeover and not sent again");
  positions_reused_after_loss_ = &r.GetCounter(
      "cellar_relay_positions_reused_after_loss_total",
      "Log positions at which Kafka held a cell the host lost (failover with --accept-loss) and "
      "the host's log holds another, which was published too");
  broker_loss_resets_ =
      &r.GetCounter("cellar_relay_broker_loss_resets_total",
                    "Streams republished from the beginning because the broker lost events");
}

void RelayProbe::Published(const std::string& datastore, uint64_t n) {
  auto it = published_.find(datastore);
  if (it != published_.end()) it->second->Increment(n);
}

void RelayProbe::UpdateStreams(const std::vector<RelayStreamStatus>& streams,
                               MicrosSinceEpoch now) {
  for (const RelayStreamStatus& st : streams) {
    if (!st.error.empty()) continue;
    auto it = streams_.find({st.host, st.datastore});
    if (it == streams_.end()) continue;
    it->second.lag->Set(static_cast<double>(st.lag));
    it->second.oldest_age->Set(OldestUnpublishedAgeSeconds(st, now));
    const MicrosSinceEpoch since = st.checkpoint_updated_at > 0 ? st.checkpoint_updated_at : now;
    it->second.checkpoint_age->Set(static_cast<double>(std::max<MicrosSinceEpoch>(0, now - since)) /
                                   1e6);
  }
}

void RelayProbe::LogRead(const std::string& host, const std::string& datastore) {
  auto it = streams_.find({host, datastore});
  if (it != streams_.end()) it->second.log_reads->Increment();
}

void RelayProbe::TransactionCommitted(const std::string& host, const std::string& datastore) {
  auto it = streams_.find({host, datastore});
  if (it != streams_.end()) it->second.transactions->Increment();
}

}  // namespace cellar
