// The headline figures of each benchmark that `cellar-bench all` reports
// (bench_all.cc): rows of figure / value / baseline / ratio / target, read from
// the benchmark's JSON line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cellar::bench {

// One row of the report table; empty strings mean "none".
struct FigureRow {
  std::string figure;
  std::string value;
  std::string baseline;
  std::string ratio;
  std::string target;
};

// The rows of benchmark `name` ("put", "http", "relay", "trigger", "index",
// "pipeline") from its JSON line `j`; a missing key shows as "n/a". Empty for
// another name.
std::vector<FigureRow> BenchFigureRows(const std::string& name, const nlohmann::ordered_json& j);

// "shards 64, rate 500, ..." from the settings keys the benchmark reported
// ("n/a" when none).
std::string SettingsText(const nlohmann::ordered_json& j);

}  // namespace cellar::bench
