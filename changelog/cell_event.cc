#include "changelog/cell_event.h"

namespace cellar {

std::string ChangeLogTopic(const KafkaConfig& kafka, const std::string& datastore) {
  return kafka.topic_prefix + "." + datastore + ".cells";
}

int32_t ChangeLogPartition(const KafkaConfig& kafka, uint32_t shard) {
  return static_cast<int32_t>(shard % static_cast<uint32_t>(kafka.partitions));
}

std::string EncodeCellEvent(const std::string& datastore, const Cell& cell,
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
