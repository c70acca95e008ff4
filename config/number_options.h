// CLI11 transforms for the numeric options of every Cellar program (`cellar`,
// `cellard` and the worker mains): decimal text only, and the value must fit.
// CLI11 2.1 converts with strtoll/strtoull/strtod in base 0 and keeps what
// they give, so without them `--ref 010` wrote ref_key 8, `0x20` 32, an
// out-of-range value the type's limit, `--after -1` read from 2^64-1 and
// `--watch 1abc` redrew every second.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "base/number_text.h"

namespace cellar {

// A whole number of type T from min to max (default: T's range): an optional
// '-' and digits (base/number_text.h), handed on to CLI11 in canonical form.
// Otherwise the program ends before it runs with "<option>: '<text>' is not a
// whole number from <min> to <max>" and the usage-error exit code.
template <typename T>
CLI::Validator DecimalInteger(T min = std::numeric_limits<T>::min(),
                              T max = std::numeric_limits<T>::max()) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        if (auto v = ParseDecimalInteger<T>(text); v && *v >= min && *v <= max) {
          text = std::to_string(*v);
          return "";
        }
        return "'" + text + "' is not a whole number from " + std::to_string(min) + " to " +
               std::to_string(max);
      },
      "");
}

// A number from min to max for options of any arithmetic type, when the type
// is the option's own business (the benchmark's many settings): decimal text
// only (base/number_text.h). A whole number is handed on in canonical form,
// so that CLI11's base-0 conversion reads "010" as ten, not eight; a
// fraction is handed on as written, and an integer option then refuses it.
// Otherwise "'<text>' is not a decimal number from <min> to <max>" and the
// usage-error exit code.
inline CLI::Validator DecimalInRange(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        if (auto i = ParseDecimalInteger<int64_t>(text)) {
          if (static_cast<double>(*i) >= min && static_cast<double>(*i) <= max) {
            text = std::to_string(*i);
            return "";
          }
        } else if (auto d = ParseDecimalDouble(text); d && *d >= min && *d <= max) {
          return "";
        }
        auto shown = [](double v) {
          if (std::abs(v) < 1e15 && v == static_cast<double>(static_cast<int64_t>(v)))
            return std::to_string(static_cast<int64_t>(v));
          std::ostringstream out;
          out << v;
          return out.str();
        };
        return "'" + text + "' is not a decimal number from " + shown(min) + " to " + shown(max);
      },
      "");
}

}  // namespace cellar
