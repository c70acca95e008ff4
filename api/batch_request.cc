#include "api/batch_request.h"

#include <limits>
#include <string>

#include "api/request_fields.h"

namespace cellar {
namespace {

Status Prefixed(const std::string& where, const Status& s) {
  return Status(s.code(), where + ": " + s.message());
}

Result<CellWrite> ParseBatchCell(const nlohmann::json& item, const std::string& where,
                                 const DatastoreConfig& ds, const LimitsConfig& limits,
                                 size_t source_text_bytes) {
  if (!item.is_object()) return InvalidArgument(where + ": expected a JSON object");
  for (const auto& [key, value] : item.items()) {
    if (key != "row_key" && key != "column" && key != "ref_key" && key != "body")
      return InvalidArgument(where + ": unknown key '" + Shown(key) +
                             "' (allowed: row_key column ref_key body)");
  }
  for (const char* key : {"row_key", "column", "ref_key", "body"})
    if (!item.contains(key)) return InvalidArgument(where + ": missing key '" + key + "'");
  CellWrite w;
  const auto& row = item["row_key"];
  if (!row.is_string()) return InvalidArgument(where + ".row_key: expected a string");
  auto parsed_row = ParseRowKey(row.get_ref<const std::string&>());
  if (!parsed_row.ok()) return Prefixed(where + ".row_key", parsed_row.status());
  w.row_key = *parsed_row;
  const auto& column = item["column"];
  if (!column.is_string()) return InvalidArgument(where + ".column: expected a string");
  w.column = column.get<std::string>();
  Status col = CheckColumn(ds, w.column);
  if (!col.ok()) return Prefixed(where + ".column", col);
  const auto& ref = item["ref_key"];
  if (ref.is_number_unsigned() &&
      ref.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    w.ref_key = static_cast<int64_t>(ref.get<uint64_t>());
  } else if (ref.is_number_integer() && !ref.is_number_unsigned() && ref.get<int64_t>() >= 0) {
    w.ref_key = ref.get<int64_t>();
  } else {
    return InvalidArgument(
        where + ".ref_key: expected an integer between 0 and " +
        std::to_string(std::numeric_limits<int64_t>::max()) + ", got " +
        Shown(ref.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
  CELLAR_RETURN_IF_ERROR(CheckCellBody(item["body"], limits, where + ".body", source_text_bytes));
  w.body = item["body"];
  return w;
}

}  // namespace

Result<std::vector<CellWrite>> ParseBatchRequest(const nlohmann::json& doc,
                                                 const DatastoreConfig& ds,
                                                 const LimitsConfig& limits, int max_cells,
                                                 size_t source_text_bytes) {
  if (!doc.is_object()) return InvalidArgument("expected a JSON object {\"cells\": [...]}");
  for (const auto& [key, value] : doc.items())
    if (key != "cells") return InvalidArgument("unknown key '" + Shown(key) + "' (allowed: cells)");
  auto cells = doc.find("cells");
  if (cells == doc.end() || !cells->is_array())
    return InvalidArgument("expected \"cells\": a JSON array of cells");
  if (cells->size() > static_cast<size_t>(max_cells))
    return ResourceExhausted("the batch has " + std::to_string(cells->size()) +
                             " cells, over the limit of " + std::to_string(max_cells));
  std::vector<CellWrite> out;
  out.reserve(cells->size());
  for (size_t i = 0; i < cells->size(); ++i) {
    CELLAR_ASSIGN_OR_RETURN(
        CellWrite w, ParseBatchCell((*cells)[i], "cells[" + std::to_string(i) + "]", ds, limits,
                                    source_text_bytes));
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace cellar
