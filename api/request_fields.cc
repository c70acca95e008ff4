#include "api/request_fields.h"

#include <limits>

namespace cellar {

std::string Shown(std::string_view text) {
  constexpr size_t kMax = 64;
  if (text.size() <= kMax) return std::string(text);
  return std::string(text.substr(0, kMax)) + "...";
}

Result<Uuid> ParseRowKey(std::string_view text) {
  auto u = Uuid::Parse(text);
  if (!u.ok())
    return InvalidArgument("row key '" + Shown(text) +
                           "' is not a UUID (expected 8-4-4-4-12 hex digits)");
  return *u;
}

Result<int64_t> ParseDecimal(std::string_view what, std::string_view text, int64_t min,
                             int64_t max) {
  const std::string bad = std::string(what) + " must be an integer between " + std::to_string(min) +
                          " and " + std::to_string(max) + ", got '" + Shown(text) + "'";
  if (text.empty() || text.size() > 19) return InvalidArgument(bad);
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return InvalidArgument(bad);
    v = v * 10 + static_cast<uint64_t>(c - '0');  // 19 digits cannot overflow uint64
  }
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return InvalidArgument(bad);
  const auto s = static_cast<int64_t>(v);
  if (s < min || s > max) return InvalidArgument(bad);
  return s;
}

Result<int64_t> ParseRefKey(std::string_view text) {
  return ParseDecimal("ref_key", text, 0, std::numeric_limits<int64_t>::max());
}

Result<ReadPreference> ParseReadPreference(std::string_view text) {
  for (ReadPreference p : {ReadPreference::kPrimary, ReadPreference::kReplica})
    if (text == ReadPreferenceName(p)) return p;
  return InvalidArgument("query parameter 'read' must be primary or replica, got '" + Shown(text) +
                         "'");
}

Status CheckColumn(const DatastoreConfig& ds, std::string_view column) {
  if (ds.FindColumn(column) != nullptr) return Status::Ok();
  return NotFound("unknown column '" + Shown(column) + "' in datastore '" + ds.name + "'");
}

Status CheckCellBody(const nlohmann::json& body, const LimitsConfig& limits,
                     const std::string& where, size_t source_text_bytes) {
  if (!body.is_object())
    return InvalidArgument(where + ": the body must be a JSON object, got " +
                           std::string(body.type_name()));
  if (source_text_bytes <= static_cast<size_t>(limits.max_body_bytes) / kMaxCompactJsonGrowth)
    return Status::Ok();
  const size_t size = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  if (size > static_cast<size_t>(limits.max_body_bytes))
    return ResourceExhausted(where + ": the body is " + std::to_string(size) +
                             " bytes of JSON, over the limit of " +
                             std::to_string(limits.max_body_bytes) + " (limits.max_body_bytes)");
  return Status::Ok();
}

}  // namespace cellar
