// Index entries: the typed field values extracted from one cell version, and
// the shard they live on.
//
// Shard of an entry = shard of its shard-field value: for a UUID, exactly
// ShardForRow(value) (so an index sharded on a row key co-locates with that
// row); for other types FNV-1a-64 of its canonical text (string bytes; int and
// datetime-microseconds in decimal; float in shortest round-trip form, -0 as 0;
// true/false) modulo the shard count.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "cells/mysql_client.h"
#include "indexes/index_definition.h"

namespace cellar {

struct IndexEntry {
  Uuid row_key;
  std::string column_key;
  int64_t ref_key = 0;
  uint64_t added_id = 0;
  uint32_t source_shard = 0;     // the row's shard
  uint32_t target_shard = 0;     // the shard-field value's shard
  std::vector<SqlParam> values;  // parallel to the column_def's fields
};

// Extracts the column_def's fields from `cell`. InvalidArgument with a short
// reason ("missing field city_uuid", "field fare.total is not a number") when
// the body has no valid entry. REQUIRES: cell is not a tombstone.
Result<IndexEntry> ExtractEntry(const IndexDefinition& def, const IndexColumnDef& column_def,
                                const Cell& cell, uint32_t shards);

// A body value as the SQL parameter of a field. InvalidArgument names the field.
Result<SqlParam> JsonToFieldValue(const IndexField& field, const nlohmann::json& value);
// Text from the command line or a URL ("2026-01-01T00:00:00Z", "42", a UUID ...).
Result<SqlParam> TextToFieldValue(const IndexField& field, const std::string& text);
// A stored column value (as read by SqlRow) back to JSON.
nlohmann::json StoredToJson(const IndexField& field, const SqlRow& row, size_t column);

uint32_t ShardForFieldValue(const IndexField& field, const SqlParam& value, uint32_t shards);

}  // namespace cellar
