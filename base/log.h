// Structured log lines on stderr: one line per event, logfmt style
//   ts=2026-11-22T01:58:34.123456Z level=info component=relay msg="..." shard=3
// Thread-safe: each line is written with a single write(2).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace cellar {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

using LogField = std::pair<std::string_view, std::string>;

// Lines below `level` are dropped. Default: kInfo; CELLAR_LOG_LEVEL=debug|info|warn|error.
void SetLogLevel(LogLevel level);

void Log(LogLevel level, std::string_view component, std::string_view msg,
         std::initializer_list<LogField> fields = {});

// Whether a line at `level` is written now: a hot path checks it before
// building the fields of a line that would be dropped.
bool LogEnabled(LogLevel level);

inline void LogInfo(std::string_view c, std::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, c, m, f);
}
inline void LogWarn(std::string_view c, std::string_view m,
                    std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarn, c, m, f);
}
inline void LogError(std::string_view c, std::string_view m,
                     std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, c, m, f);
}

}  // namespace cellar
