#include "triggers/trigger_probe.h"

namespace cellar {
namespace {

MetricLabels Labels(const std::string& trigger, const std::string& partition) {
  return {{"trigger", trigger}, {"partition", partition}};
}

}  // namespace

Counter& TriggerProbe::Handled(const std::string& trigger, const std::string& partition) {
  return registry_->GetCounter("cellar_trigger_handled_total", "Events handled successfully",
                               Labels(trigger, partition));
}

Counter& TriggerProbe::Retried(const std::string& trigger, const std::string& partition) {
  return registry_->GetCounter("cellar_trigger_retried_total", "Handler attempts retried",
                               Labels(trigger, partition));
}

Counter& TriggerProbe::SetAside(const std::string& trigger, const std::string& partition) {
  return registry_->GetCounter("cellar_trigger_set_aside_total",
                               "Events set aside in the dead-letter topic",
                               Labels(trigger, partition));
}

Histogram& TriggerProbe::HandlerSeconds(const std::string& trigger, const std::string& partition) {
  return registry_->GetHistogram("cellar_trigger_handler_seconds", "Handler latency",
                                 Labels(trigger, partition));
}

Gauge& TriggerProbe::Lag(const std::string& trigger, const std::string& topic, int32_t partition) {
  return registry_->GetGauge(
      "cellar_trigger_lag_events", "Records behind the partition end",
      {{"trigger", trigger}, {"topic", topic}, {"partition", std::to_string(partition)}});
}

Gauge& TriggerProbe::OldestUnprocessedAge(const std::string& trigger, const std::string& topic,
                                          int32_t partition) {
  return registry_->GetGauge(
      "cellar_trigger_oldest_unprocessed_age_seconds",
      "Seconds since the event time of the oldest event not yet handled (0 when caught up)",
      {{"trigger", trigger}, {"topic", topic}, {"partition", std::to_string(partition)}});
}

void TriggerProbe::UpdateProgress(const std::string& trigger,
                                  const std::vector<PartitionProgress>& progress, int64_t now_ms) {
  for (const auto& p : progress) {
    if (p.end < 0) continue;  // the end is not known yet: neither is the lag
    Lag(trigger, p.partition.topic, p.partition.partition).Set(static_cast<double>(p.lag));
    OldestUnprocessedAge(trigger, p.partition.topic, p.partition.partition)
        .Set(OldestUnprocessedAgeSeconds(p, now_ms));
  }
}

Gauge& TriggerProbe::Paused(const std::string& trigger) {
  return registry_->GetGauge(
      "cellar_trigger_paused",
      "1 while the trigger is paused (by an operator or the dead-letter policy)",
      {{"trigger", trigger}});
}

Counter& TriggerProbe::HandlerTimeouts(const std::string& trigger) {
  return registry_->GetCounter("cellar_trigger_handler_timeouts_total",
                               "Handler calls that passed the trigger's handler_timeout_ms "
                               "(failed attempts)",
                               {{"trigger", trigger}});
}

Gauge& TriggerProbe::HandlersPastDeadline(const std::string& trigger) {
  return registry_->GetGauge("cellar_trigger_handlers_past_deadline",
                             "Handler calls past their deadline that have not returned (each "
                             "holds a thread)",
                             {{"trigger", trigger}});
}

}  // namespace cellar
