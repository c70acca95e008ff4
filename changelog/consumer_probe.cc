#include "changelog/consumer_probe.h"

#include <tuple>

namespace cellar {

ConsumerProbe::ConsumerProbe(MetricsRegistry* registry, const std::string& group) {
  static constexpr std::array<const char*, 4> kOutcomes = {"ok", "retry", "not_found", "error"};
  static_assert(kOutcomes.size() == std::tuple_size_v<decltype(rereads_)>);
  for (size_t i = 0; i < kOutcomes.size(); ++i)
    rereads_[i] =
        &registry->GetCounter("cellar_consumer_body_rereads_total",
                              "Reads of cell bodies left out of the change log, by outcome",
                              {{"group", group}, {"outcome", kOutcomes[i]}});
  fetch_paused_ = &registry->GetGauge(
      "cellar_consumer_fetch_paused",
      "1 while the consumer does not fetch (back-pressure or paused)", {{"group", group}});
  skipped_ = &registry->GetCounter(
      "cellar_consumer_skipped_records_total",
      "Records deleted by the topic's retention before the group read them", {{"group", group}});
  decoded_ = &registry->GetCounter("cellar_consumer_records_decoded_total",
                                   "Records the consumer decoded, one per record handed on",
                                   {{"group", group}});
}

}  // namespace cellar
