// Timestamps: microseconds since the Unix epoch, UTC, everywhere in Cellar.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace cellar {

using MicrosSinceEpoch = int64_t;

// Wall clock now, in microseconds since the epoch (UTC).
MicrosSinceEpoch NowMicros();

// "2026-11-22T01:58:34.123456Z" (RFC 3339, UTC, always 6 fraction digits).
std::string FormatRfc3339(MicrosSinceEpoch t);
// Accepts RFC 3339 with 'Z' or a numeric offset, 0-9 fraction digits, and a
// bare date "2026-01-01" (midnight UTC). InvalidArgument names the input otherwise.
Result<MicrosSinceEpoch> ParseRfc3339(std::string_view text);

// MySQL DATETIME(6) text "2026-11-22 01:58:34.123456" (the server session runs in UTC).
std::string FormatSqlDatetime(MicrosSinceEpoch t);
Result<MicrosSinceEpoch> ParseSqlDatetime(std::string_view text);

// Durations like "30d", "12h", "15m", "45s", "500ms" -> seconds/millis.
// InvalidArgument for anything else (no unit, negative, overflow).
Result<int64_t> ParseDurationMillis(std::string_view text);

}  // namespace cellar
