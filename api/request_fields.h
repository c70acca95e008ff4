// Validation of the pieces of an HTTP request (path segments, query
// parameters, bodies) before anything reaches the store. Each failure is a
// Status whose code the API maps to its HTTP status (api/api_wire.h):
// InvalidArgument 400, NotFound 404 (unknown column), ResourceExhausted 413.
// Messages quote client input shortened to 64 bytes.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/uuid.h"
#include "cells/cell.h"
#include "config/cluster_config.h"

namespace cellar {

// `text` cut to 64 bytes (with "..." when cut), for quoting in messages.
std::string Shown(std::string_view text);

// A canonical UUID row key, else InvalidArgument.
Result<Uuid> ParseRowKey(std::string_view text);

// A decimal integer in [min, max] without sign or spaces ("007" is fine),
// else InvalidArgument naming `what`.
Result<int64_t> ParseDecimal(std::string_view what, std::string_view text, int64_t min,
                             int64_t max);

// ref_key: ParseDecimal in [0, INT64_MAX].
Result<int64_t> ParseRefKey(std::string_view text);

// The query parameter `read` of a cell read or an index query: "primary" or
// "replica" (ReadPreference, cells/cell.h), else InvalidArgument naming it.
Result<ReadPreference> ParseReadPreference(std::string_view text);

// OK when `ds` has `column`; NotFound naming both otherwise.
Status CheckColumn(const DatastoreConfig& ds, std::string_view column);

// A cell body: a JSON object (InvalidArgument otherwise) whose compact JSON is
// at most limits.max_body_bytes (ResourceExhausted otherwise). `where` names
// the cell in messages. `source_text_bytes`: the length of the JSON text the
// body was parsed from (or of a text holding it), when known. Parsing and
// dumping grows nothing but number tokens ("1e15", 4 characters, dumps as
// "1000000000000000.0"), by less than kMaxCompactJsonGrowth, so a text under
// the limit divided by it needs no dump to measure.
inline constexpr size_t kMaxCompactJsonGrowth = 8;
Status CheckCellBody(const nlohmann::json& body, const LimitsConfig& limits,
                     const std::string& where, size_t source_text_bytes = SIZE_MAX);

}  // namespace cellar
