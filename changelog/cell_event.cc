#include "changelog/cell_event.h"

#include "cells/body_codec.h"

namespace cellar {

std::string ChangeLogTopic(const KafkaConfig& kafka, const std::string& datastore) {
  return kafka.topic_prefix + "." + datastore + ".cells";
}

std::string CellSubject(const Cell& cell) {
  return cell.row_key.ToString() + "/" + cell.column + "/" + std::to_string(cell.ref_key);
}

int32_t ChangeLogPartition(const KafkaConfig& kafka, uint32_t shard) {
  return static_cast<int32_t>(shard % static_cast<uint32_t>(kafka.partitions));
}

std::vector<EventHeader> CloudEventHeaders(CloudEventBinding binding, const KafkaConfig& kafka,
                                           const std::string& datastore, const Cell& cell) {
  const char* prefix = binding == CloudEventBinding::kKafka ? "ce_" : "ce-";
  auto name = [&](const char* attribute) { return std::string(prefix) + attribute; };
  std::vector<EventHeader> h;
  h.reserve(7);
  h.push_back({name("specversion"), "1.0"});
  h.push_back({name("id"),
               datastore + ":" + std::to_string(cell.shard) + ":" + std::to_string(cell.added_id)});
  h.push_back({name("source"), "cellar://" + kafka.topic_prefix + "/" + datastore});
  h.push_back({name("type"), cell.tombstone ? "cellar.cell.erased" : "cellar.cell.written"});
  h.push_back({name("time"), FormatRfc3339(cell.created_at)});
  h.push_back({name("subject"), CellSubject(cell)});
  if (binding == CloudEventBinding::kKafka) h.push_back({"content-type", "application/json"});
  return h;
}

// Encoded directly, without building a JSON document around the body (the
// relay's hottest step besides reading the log): the same bytes as the
// document's dump(), whose object keys are sorted, so the keys go in that
// order here. tests/trigger_config_unit_test.cc compares both encodings.
std::string EncodeCellEvent(const std::string& datastore, const Cell& cell,
                            int64_t max_body_bytes) {
  return EncodeCellEvent(
      datastore, cell,
      cell.tombstone ? std::string()
                     : cell.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      max_body_bytes);
}

std::string EncodeCellEvent(const std::string& datastore, const Cell& cell, std::string_view body,
                            int64_t max_body_bytes) {
  const bool omitted = !cell.tombstone && static_cast<int64_t>(body.size()) > max_body_bytes;
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
  // One lookup per field, and strings and the body are moved out of the
  // document rather than copied (the body is most of an event).
  auto field = [&](const char* name,
                   bool (nlohmann::json::*is)() const noexcept) -> Result<nlohmann::json*> {
    auto it = j.find(name);
    if (it == j.end() || !((*it).*is)())
      return InvalidArgument(std::string("event field '") + name + "' is missing or mistyped");
    return &*it;
  };
  auto text = [](nlohmann::json* v) -> std::string&& {
    return std::move(v->get_ref<std::string&>());
  };
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * datastore,
                          field("datastore", &nlohmann::json::is_string));
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * shard,
                          field("shard", &nlohmann::json::is_number_unsigned));
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * added_id,
                          field("added_id", &nlohmann::json::is_number_unsigned));
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * row_key, field("row_key", &nlohmann::json::is_string));
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * column, field("column", &nlohmann::json::is_string));
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * ref_key,
                          field("ref_key", &nlohmann::json::is_number_integer));
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * created_at,
                          field("created_at", &nlohmann::json::is_string));
  CELLAR_ASSIGN_OR_RETURN(nlohmann::json * tombstone,
                          field("tombstone", &nlohmann::json::is_boolean));
  CellEvent e;
  e.datastore = text(datastore);
  CELLAR_ASSIGN_OR_RETURN(e.cell.row_key, Uuid::Parse(row_key->get_ref<const std::string&>()));
  CELLAR_ASSIGN_OR_RETURN(e.cell.created_at,
                          ParseRfc3339(created_at->get_ref<const std::string&>()));
  e.cell.shard = shard->get<uint32_t>();
  e.cell.added_id = added_id->get<uint64_t>();
  e.cell.column = text(column);
  e.cell.ref_key = ref_key->get<int64_t>();
  e.cell.tombstone = tombstone->get<bool>();
  if (auto it = j.find("body"); it != j.end()) e.cell.body = std::move(*it);
  if (auto it = j.find("body_omitted"); it != j.end() && it->is_boolean())
    e.body_omitted = it->get<bool>();
  return e;
}

}  // namespace cellar
