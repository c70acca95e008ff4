#include "api/index_request.h"

#include <limits>
#include <set>

#include "api/request_fields.h"

namespace cellar {

Result<IndexQuery> ParseIndexQueryParams(
    const IndexDefinition& def, const std::vector<std::pair<std::string, std::string>>& params) {
  IndexQuery q;
  q.index = def.table;
  std::set<std::string> seen;
  bool have_shard_value = false;
  for (const auto& [name, value] : params) {
    if (name == "where") {
      auto f = ParseIndexFilter(def, value);
      if (!f.ok()) return InvalidArgument("where '" + Shown(value) + "': " + f.status().message());
      q.filters.push_back(std::move(f).value());
      continue;
    }
    if (name == "field") {
      q.fields.push_back(value);
      continue;
    }
    if (!seen.insert(name).second)
      return InvalidArgument("query parameter '" + name + "' is given more than once");
    if (name == "shard_value") {
      q.shard_value = value;
      have_shard_value = true;
    } else if (name == "order_by") {
      q.order_by = value;
    } else if (name == "order") {
      if (value != "asc" && value != "desc")
        return InvalidArgument("order must be asc or desc, got '" + Shown(value) + "'");
      q.descending = value == "desc";
    } else if (name == "limit") {
      CELLAR_ASSIGN_OR_RETURN(int64_t limit, ParseDecimal("limit", value, 1, 1000));
      q.limit = static_cast<int>(limit);
    } else if (name == "cursor") {
      q.cursor = value;
    } else if (name == "after") {
      if (value.empty()) return InvalidArgument("after: empty position token");
      q.after = value;
    } else if (name == "read") {
      CELLAR_ASSIGN_OR_RETURN(q.read, ParseReadPreference(value));
    } else if (name == "verify") {
      if (value != "true" && value != "false")
        return InvalidArgument("verify must be true or false, got '" + Shown(value) + "'");
      q.verify = value == "true";
    } else {
      return InvalidArgument("unknown query parameter '" + Shown(name) +
                             "' (allowed: shard_value where field order_by order limit cursor "
                             "verify after read)");
    }
  }
  if (!have_shard_value || q.shard_value.empty())
    return InvalidArgument("index '" + def.table +
                           "' needs shard_value, the value of its shard "
                           "field '" +
                           def.shard_field + "'");
  return q;
}

nlohmann::json IndexQueryResultToJson(const std::string& index, const IndexQueryResult& result,
                                      bool verify) {
  nlohmann::json hits = nlohmann::json::array();
  for (const IndexHit& h : result.hits)
    hits.push_back({{"row_key", h.row_key.ToString()},
                    {"column", h.column_key},
                    {"ref_key", h.ref_key},
                    {"fields", h.fields}});
  nlohmann::json out = {{"index", index}, {"version", result.version}, {"hits", std::move(hits)}};
  if (!result.next_cursor.empty()) out["next_cursor"] = result.next_cursor;
  if (verify) out["dropped_by_verify"] = result.dropped_by_verify;
  return out;
}

}  // namespace cellar
