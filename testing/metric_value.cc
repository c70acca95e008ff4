#include "testing/metric_value.h"

#include <cstdlib>
#include <sstream>

namespace cellar::testing {

double MetricValue(const std::string& text, const std::string& name,
                   const std::map<std::string, std::string>& labels) {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, name.size(), name) != 0) continue;
    const size_t after = name.size();
    if (after < line.size() && line[after] != '{' && line[after] != ' ') continue;  // a longer name
    std::string label_text;
    size_t value_at = after;
    if (after < line.size() && line[after] == '{') {
      const size_t close = line.find('}', after);
      if (close == std::string::npos) continue;
      label_text = line.substr(after + 1, close - after - 1);
      value_at = close + 1;
    }
    bool match = true;
    for (const auto& [k, v] : labels)
      match &= label_text.find(k + "=\"" + v + "\"") != std::string::npos;
    if (!match) continue;
    sum += std::strtod(line.c_str() + value_at, nullptr);
    found = true;
  }
  return found ? sum : -1;
}

}  // namespace cellar::testing
