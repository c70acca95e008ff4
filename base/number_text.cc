#include "base/number_text.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace cellar {

std::optional<double> ParseDecimalDouble(std::string_view text, bool* out_of_range) {
  if (out_of_range) *out_of_range = false;
  // from_chars takes "inf", "infinity" and "nan": only a digit or a point may
  // follow the sign.
  const size_t first = !text.empty() && text[0] == '-' ? 1 : 0;
  if (first >= text.size()) return std::nullopt;
  const unsigned char c = static_cast<unsigned char>(text[first]);
  if (!std::isdigit(c) && c != '.') return std::nullopt;
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ptr != end) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Overflow and underflow both report it, leaving `value` untouched.
    // strtod (the grammar is checked above) tells them apart: underflow
    // (1e-400) rounds towards zero, as a JSON parser reads it.
    const double rounded = std::strtod(std::string(text).c_str(), nullptr);
    if (std::isfinite(rounded)) return rounded;
    if (out_of_range) *out_of_range = true;
    return std::nullopt;
  }
  if (ec != std::errc() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace cellar
