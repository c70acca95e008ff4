#include "changelog/cell_event.h"

namespace cellar {

std::string ChangeLogTopic(const KafkaConfig& kafka, const std::string& datastore) {
  return kafka.topic_prefix + "." + datastore + ".cells";
}

int32_t ChangeLogPartition(const KafkaConfig& kafka, uint32_t shard) {
  return static_cast<int32_t>(shard % static_cast<uint32_t>(kafka.partitions));
}

namespace {

// Appends `s` as a JSON string exactly as nlohmann::json::dump would (plain
// printable ASCII directly, anything else through the library).
void AppendJsonString(std::string& out, std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      out += nlohmann::json(std::string(s))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
    }
  out += '"';
  out += s;
  out += '"';
}

}  // namespace

// Encoded directly, without building a JSON document around the body (the
// relay's hottest step besides reading the log): the same bytes as the
// document's dump(), whose object keys are sorted, so the keys go in that
// order here. tests/trigger_config_unit_test.cc compares both encodings.
std::string EncodeCellEvent(const std::string& datastore, const Cell& cell,
                            int64_t max_body_bytes) {
  std::string body;
  bool omitted = false;
  if (!cell.tombstone) {
    body = cell.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    omitted = static_cast<int64_t>(body.size()) > max_body_bytes;
  }
  std::string out;
  out.reserve(body.size() + datastore.size() + cell.column.size() + 220);
  out += "{\"added_id\":";
  out += std::to_string(cell.added_id);
  out += ",\"body\":";
  if (cell.tombstone || omitted) {
    out += "null";
    if (omitted) out += ",\"body_omitted\":true";
  } else {
    out += body;
  }
  out += ",\"column\":";
  AppendJsonString(out, cell.column);
  out += ",\"created_at\":";
  AppendJsonString(out, FormatRfc3339(cell.created_at));
  out += ",\"datastore\":";
  AppendJsonString(out, datastore);
  out += ",\"ref_key\":";
  out += std::to_string(cell.ref_key);
  out += ",\"row_key\":\"";
  out += cell.row_key.ToString();
  out += "\",\"shard\":";
  out += std::to_string(cell.shard);
  out += ",\"tombstone\":";
  out += cell.tombstone ? "true" : "false";
  out += '}';
  return out;
}

std::string EncodeCellEventViaDocument(const std::string& datastore, const Cell& cell,
                                       int64_t max_body_bytes) {
  nlohmann::json j = {{"datastore", datastore},
                      {"shard", cell.shard},
                      {"added_id", cell.added_id},
                      {"row_key", cell.row_key.ToString()},
                      {"column", cell.column},
                      {"ref_key", cell.ref_key},
                      {"created_at", FormatRfc3339(cell.created_at)},
                      {"tombstone", cell.tombstone}};
  if (cell.tombstone) {
    j["body"] = nullptr;
  } else {
    std::string body = cell.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (static_cast<int64_t>(body.size()) > max_body_bytes) {
      j["body"] = nullptr;
      j["body_omitted"] = true;
    } else {
      j["body"] = cell.body;
    }
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<CellEvent> DecodeCellEvent(std::string_view value) {
  auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("event is not a JSON object");
  auto need = [&](const char* field, bool (nlohmann::json::*is)() const noexcept) -> Status {
    if (!j.contains(field) || !(j[field].*is)())
      return InvalidArgument(std::string("event field '") + field + "' is missing or mistyped");
    return Status::Ok();
  };
  CELLAR_RETURN_IF_ERROR(need("datastore", &nlohmann::json::is_string));
  CELLAR_RETURN_IF_ERROR(need("shard", &nlohmann::json::is_number_unsigned));
  CELLAR_RETURN_IF_ERROR(need("added_id", &nlohmann::json::is_number_unsigned));
  CELLAR_RETURN_IF_ERROR(need("row_key", &nlohmann::json::is_string));
  CELLAR_RETURN_IF_ERROR(need("column", &nlohmann::json::is_string));
  CELLAR_RETURN_IF_ERROR(need("ref_key", &nlohmann::json::is_number_integer));
  CELLAR_RETURN_IF_ERROR(need("created_at", &nlohmann::json::is_string));
  CELLAR_RETURN_IF_ERROR(need("tombstone", &nlohmann::json::is_boolean));
  CellEvent e;
  e.datastore = j["datastore"].get<std::string>();
  CELLAR_ASSIGN_OR_RETURN(e.cell.row_key, Uuid::Parse(j["row_key"].get<std::string>()));
  CELLAR_ASSIGN_OR_RETURN(e.cell.created_at, ParseRfc3339(j["created_at"].get<std::string>()));
  e.cell.shard = j["shard"].get<uint32_t>();
  e.cell.added_id = j["added_id"].get<uint64_t>();
  e.cell.column = j["column"].get<std::string>();
  e.cell.ref_key = j["ref_key"].get<int64_t>();
  e.cell.tombstone = j["tombstone"].get<bool>();
  if (j.contains("body")) e.cell.body = j["body"];
  e.body_omitted = j.value("body_omitted", false);
  return e;
}

}  // namespace cellar
