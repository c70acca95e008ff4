// Whole numbers and decimal numbers read from text a person typed (command
// lines, query parameters, YAML scalars): decimal only, the whole text, and
// the value must fit. strtoll/strtod, which these replace, skip spaces, take
// '+', hex and (strtod) inf/nan, and quietly saturate or wrap on overflow.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace cellar {

// An optional '-' and decimal digits that fit T, nothing else (no '+', no
// spaces, no 0x; "010" is ten). nullopt otherwise.
template <typename T>
std::optional<T> ParseDecimalInteger(std::string_view text) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// `v` in decimal: integers plainly, doubles in the shortest form that reads
// back as the same double ("0.1", "1e+300"). For machine-read text
// (Prometheus samples, SQL values as the server's text protocol shows them).
template <typename T>
std::string DecimalText(T v) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  char buf[32];  // longest: a double's shortest form, 24 chars
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string();
}

// A finite decimal number: an optional '-', digits with an optional '.', an
// optional exponent ("1.5", ".5", "5.", "-2e-3"). No '+', spaces, hex, inf or
// nan; a value beyond a double's range (1e400) is refused, not made infinite.
// nullopt otherwise; *out_of_range (when given) tells that case apart.
std::optional<double> ParseDecimalDouble(std::string_view text, bool* out_of_range = nullptr);

}  // namespace cellar
