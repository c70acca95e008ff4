// MetricValue: reads one metric out of Prometheus text (MetricsRegistry::Render
// or a scraped /metrics), for tests that check what a component exported.
#pragma once

#include <map>
#include <string>

namespace cellar::testing {

// Sum of the values of Prometheus samples named `name` whose labels include
// every pair of `labels` (e.g. {{"trigger","billing"}}). -1 when none matched.
double MetricValue(const std::string& text, const std::string& name,
                   const std::map<std::string, std::string>& labels = {});

}  // namespace cellar::testing
