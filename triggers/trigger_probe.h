// TriggerProbe: the trigger runners' metrics, each registered here and nowhere
// else; the runners (internal/trigger_runner.h) update them.
//   cellar_trigger_handled_total{trigger,partition}     events handled successfully
//   cellar_trigger_retried_total{trigger,partition}     handler attempts retried
//   cellar_trigger_set_aside_total{trigger,partition}   events set aside in the DLQ
//   cellar_trigger_handler_seconds{trigger,partition}   handler latency histogram
//   cellar_trigger_lag{trigger,topic,partition}         records behind the partition end
//   cellar_trigger_paused{trigger}                      1 while paused (`cellar trigger pause`
//                                                       or the dead-letter policy; trigger_control.h)
// `partition` is the partition number, "retry" (the retry topic) or "replay".
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe; returned references live as long as the registry.
#pragma once

#include <cstdint>
#include <string>

#include "base/metrics.h"

namespace cellar {

class TriggerProbe {
 public:
  explicit TriggerProbe(MetricsRegistry* registry) : registry_(registry) {}

  Counter& Handled(const std::string& trigger, const std::string& partition);
  Counter& Retried(const std::string& trigger, const std::string& partition);
  Counter& SetAside(const std::string& trigger, const std::string& partition);
  Histogram& HandlerSeconds(const std::string& trigger, const std::string& partition);
  Gauge& Lag(const std::string& trigger, const std::string& topic, int32_t partition);
  Gauge& Paused(const std::string& trigger);

  MetricsRegistry& registry() { return *registry_; }

 private:
  MetricsRegistry* registry_;
};

}  // namespace cellar
