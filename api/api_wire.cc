#include "api/api_wire.h"

#include <array>

namespace cellar {

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kConflict:
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

StatusCode StatusCodeForHttp(int http_status, std::string_view code_name) {
  static constexpr std::array<StatusCode, 10> kAll = {
      StatusCode::kInvalidArgument,    StatusCode::kNotFound,
      StatusCode::kConflict,           StatusCode::kAlreadyExists,
      StatusCode::kUnavailable,        StatusCode::kAborted,
      StatusCode::kDeadlineExceeded,   StatusCode::kResourceExhausted,
      StatusCode::kFailedPrecondition, StatusCode::kInternal};
  for (StatusCode c : kAll)
    if (StatusCodeName(c) == code_name) return c;
  switch (http_status) {
    case 400:
    case 405:
    case 414:
    case 415:
    case 431:
      return StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return StatusCode::kFailedPrecondition;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kConflict;
    case 413:
      return StatusCode::kResourceExhausted;
    case 408:
    case 429:
    case 502:
    case 503:
    case 504:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kInternal;
  }
}

nlohmann::json ErrorJson(std::string_view code, std::string_view message,
                         std::string_view address) {
  nlohmann::json e = {{"code", std::string(code)}, {"message", std::string(message)}};
  if (!address.empty()) e["address"] = std::string(address);
  return {{"error", std::move(e)}};
}

std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json PutResultToJson(const PutResult& r, const std::string& address) {
  nlohmann::json j = {{"shard", r.shard},
                      {"added_id", r.added_id},
                      {"ref_key", r.ref_key},
                      {"created_at", FormatRfc3339(r.created_at)},
                      {"created", r.created}};
  if (!address.empty()) j["address"] = address;
  if (!r.position.empty()) j["position"] = r.position;
  return j;
}

nlohmann::json CellsToJson(const std::vector<Cell>& cells) {
  nlohmann::json arr = nlohmann::json::array();
  for (const Cell& c : cells) arr.push_back(CellToJson(c));
  return arr;
}

namespace {

// Reads j[key] as T; InvalidArgument naming the key otherwise.
template <typename T>
Status Field(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return InvalidArgument(std::string("missing field '") + key + "'");
  try {
    *out = it->template get<T>();
  } catch (const std::exception&) {
    return InvalidArgument(std::string("field '") + key + "' has the wrong type");
  }
  return Status::Ok();
}

Status TimeField(const nlohmann::json& j, const char* key, MicrosSinceEpoch* out) {
  std::string text;
  CELLAR_RETURN_IF_ERROR(Field(j, key, &text));
  CELLAR_ASSIGN_OR_RETURN(*out, ParseRfc3339(text));
  return Status::Ok();
}

}  // namespace

Result<PutResult> PutResultFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("put result is not a JSON object");
  PutResult r;
  CELLAR_RETURN_IF_ERROR(Field(j, "shard", &r.shard));
  CELLAR_RETURN_IF_ERROR(Field(j, "added_id", &r.added_id));
  CELLAR_RETURN_IF_ERROR(Field(j, "ref_key", &r.ref_key));
  CELLAR_RETURN_IF_ERROR(Field(j, "created", &r.created));
  CELLAR_RETURN_IF_ERROR(TimeField(j, "created_at", &r.created_at));
  if (j.contains("position")) CELLAR_RETURN_IF_ERROR(Field(j, "position", &r.position));
  return r;
}

Result<Cell> CellFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("cell is not a JSON object");
  Cell c;
  std::string row;
  CELLAR_RETURN_IF_ERROR(Field(j, "row_key", &row));
  CELLAR_ASSIGN_OR_RETURN(c.row_key, Uuid::Parse(row));
  CELLAR_RETURN_IF_ERROR(Field(j, "column", &c.column));
  CELLAR_RETURN_IF_ERROR(Field(j, "ref_key", &c.ref_key));
  CELLAR_RETURN_IF_ERROR(Field(j, "tombstone", &c.tombstone));
  CELLAR_RETURN_IF_ERROR(Field(j, "shard", &c.shard));
  CELLAR_RETURN_IF_ERROR(Field(j, "added_id", &c.added_id));
  CELLAR_RETURN_IF_ERROR(TimeField(j, "created_at", &c.created_at));
  auto body = j.find("body");
  if (body == j.end()) return InvalidArgument("missing field 'body'");
  c.body = *body;
  return c;
}

}  // namespace cellar
