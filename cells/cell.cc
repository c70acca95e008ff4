#include "cells/cell.h"

#include "cells/body_codec.h"

namespace cellar {

std::string CellAddress(const std::string& datastore, const Uuid& row, const std::string& column,
                        int64_t ref_key) {
  return datastore + "/" + row.ToString() + "/" + column + "/" + std::to_string(ref_key);
}

std::string Cell::Address(const std::string& datastore) const {
  return CellAddress(datastore, row_key, column, ref_key);
}

nlohmann::json CellToJson(const Cell& c) {
  return nlohmann::json{{"row_key", c.row_key.ToString()},
                        {"column", c.column},
                        {"ref_key", c.ref_key},
                        {"body", c.body},
                        {"tombstone", c.tombstone},
                        {"created_at", FormatRfc3339(c.created_at)},
                        {"shard", c.shard},
                        {"added_id", c.added_id}};
}

std::string CellJsonText(const Cell& c, std::string_view body_json) {
  // nlohmann's objects keep their keys sorted: the same order as CellToJson prints.
  std::string out;
  out.reserve(body_json.size() + 220);
  out += "{\"added_id\":";
  out += std::to_string(c.added_id);
  out += ",\"body\":";
  out += body_json.empty() ? std::string_view("null") : body_json;
  out += ",\"column\":";
  AppendJsonString(out, c.column);
  out += ",\"created_at\":";
  AppendJsonString(out, FormatRfc3339(c.created_at));
  out += ",\"ref_key\":";
  out += std::to_string(c.ref_key);
  out += ",\"row_key\":\"";
  out += c.row_key.ToString();  // hex digits and dashes: nothing to escape
  out += "\",\"shard\":";
  out += std::to_string(c.shard);
  out += ",\"tombstone\":";
  out += c.tombstone ? "true" : "false";
  out += "}";
  return out;
}

CellText ToCellText(Cell cell) {
  CellText t;
  if (!cell.body.is_null())
    t.body_json = cell.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  t.cell = std::move(cell);
  t.cell.body = nullptr;
  return t;
}

std::vector<CellText> ToCellTexts(std::vector<Cell> cells) {
  std::vector<CellText> out;
  out.reserve(cells.size());
  for (Cell& c : cells) out.push_back(ToCellText(std::move(c)));
  return out;
}

std::string CellsJsonText(const std::vector<CellText>& cells) {
  std::string out = "[";
  for (const CellText& c : cells) {
    if (out.size() > 1) out += ',';
    out += CellJsonText(c.cell, c.body_json);
  }
  out += ']';
  return out;
}

Status ValidateVersionQuery(const VersionQuery& q) {
  if (q.limit < 1 || q.limit > 10000)
    return InvalidArgument("limit must be between 1 and 10000, got " + std::to_string(q.limit));
  if (q.min_ref && q.max_ref && *q.min_ref > *q.max_ref)
    return InvalidArgument("min_ref " + std::to_string(*q.min_ref) + " is above max_ref " +
                           std::to_string(*q.max_ref));
  if (q.since && q.as_of && *q.since > *q.as_of)
    return InvalidArgument("since " + FormatRfc3339(*q.since) + " is after as_of " +
                           FormatRfc3339(*q.as_of));
  return Status::Ok();
}

const char* ReadPreferenceName(ReadPreference preference) {
  return preference == ReadPreference::kReplica ? "replica" : "primary";
}

}  // namespace cellar
