// ConsumerProbe: the keyed consumer's metrics (keyed_consumer.h), each
// registered here and nowhere else; the consumer updates them.
//   cellar_consumer_body_rereads_total{group,outcome}  reads of cell bodies left
//       out of the change log, one per attempt; outcome = ok | retry (a
//       transient error: tried again) | not_found | error
//   cellar_consumer_fetch_paused{group}                1 while the consumer does
//       not fetch (back-pressure or paused), else 0
//   cellar_consumer_skipped_records_total{group}       records deleted by the
//       topic's retention before the group read them (lost to it; alert on
//       any increase)
//   cellar_consumer_records_decoded_total{group}       records the consumer
//       decoded (into an event, or to pass them by): one per record handed on,
//       again for each re-delivery; its rate is what the group reads
// Every series of the group exists from construction (at 0).
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe.
#pragma once

#include <array>
#include <string>

#include "base/metrics.h"

namespace cellar {

enum class BodyRereadOutcome { kOk, kRetry, kNotFound, kError };

class ConsumerProbe {
 public:
  ConsumerProbe(MetricsRegistry* registry, const std::string& group);

  Counter& BodyRereads(BodyRereadOutcome outcome) { return *rereads_[static_cast<int>(outcome)]; }
  Gauge& FetchPaused() { return *fetch_paused_; }
  Counter& SkippedRecords() { return *skipped_; }
  Counter& RecordsDecoded() { return *decoded_; }

 private:
  // Filled by the constructor, read-only afterwards.
  std::array<Counter*, 4> rereads_;  // by BodyRereadOutcome
  Gauge* fetch_paused_;
  Counter* skipped_;
  Counter* decoded_;
};

}  // namespace cellar
