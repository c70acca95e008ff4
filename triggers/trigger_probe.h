// TriggerProbe: the trigger runners' metrics, each registered here and nowhere
// else; the runners (internal/trigger_runner.h) update them.
//   cellar_trigger_handled_total{trigger,partition}     events handled successfully
//   cellar_trigger_retried_total{trigger,partition}     handler attempts retried
//   cellar_trigger_set_aside_total{trigger,partition}   events set aside in the DLQ
//   cellar_trigger_handler_seconds{trigger,partition}   handler latency histogram
//   cellar_trigger_lag_events{trigger,topic,partition}  records behind the partition end
//   cellar_trigger_oldest_unprocessed_age_seconds{trigger,topic,partition}  now minus the
//       record timestamp (the cell's created_at) of the oldest event received and not
//       handled, or of the record at the next offset when none is in hand; 0 when
//       caught up (changelog/keyed_consumer.h OldestUnprocessedAgeSeconds)
//   cellar_trigger_handler_timeouts_total{trigger}      calls past handler_timeout_ms
//   cellar_trigger_handlers_past_deadline{trigger}      such calls that still run (each
//                                                       holds a thread)
//   cellar_trigger_paused{trigger}                      1 while paused (`cellar trigger pause`
//                                                       or the dead-letter policy;
//                                                       trigger_control.h)
// `partition` is the partition number, "retry" (the retry topic) or "replay".
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe; returned references live as long as the registry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "changelog/keyed_consumer.h"

namespace cellar {

class TriggerProbe {
 public:
  explicit TriggerProbe(MetricsRegistry* registry) : registry_(registry) {}

  Counter& Handled(const std::string& trigger, const std::string& partition);
  Counter& Retried(const std::string& trigger, const std::string& partition);
  Counter& SetAside(const std::string& trigger, const std::string& partition);
  Histogram& HandlerSeconds(const std::string& trigger, const std::string& partition);
  Gauge& Lag(const std::string& trigger, const std::string& topic, int32_t partition);
  Gauge& OldestUnprocessedAge(const std::string& trigger, const std::string& topic,
                              int32_t partition);
  // Sets both gauges of every partition of `progress` whose end is known.
  void UpdateProgress(const std::string& trigger, const std::vector<PartitionProgress>& progress,
                      int64_t now_ms);
  Gauge& Paused(const std::string& trigger);
  Counter& HandlerTimeouts(const std::string& trigger);
  Gauge& HandlersPastDeadline(const std::string& trigger);

  MetricsRegistry& registry() { return *registry_; }

 private:
  MetricsRegistry* registry_;
};

}  // namespace cellar
