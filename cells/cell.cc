#include "cells/cell.h"

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
