// Index definitions, in Schemaless's YAML format:
//
//   table: driver_partner_index          # [a-z][a-z0-9_]{0,40}
//   datastore: trips
//   shard_field: driver_partner_uuid     # optional; default: the first field
//   column_defs:
//     - column_key: BASE
//       fields:
//         - { field: driver_partner_uuid, type: UUID }
//         - { field: city_uuid, type: UUID }
//         - { field: trip_created_at, type: datetime }
//         - { field: fare.total, type: float }   # dotted path into nested objects
//
// Types: UUID, string (<= 255 bytes), int, float, bool, datetime (RFC 3339
// text in the body; stored as UTC microseconds). A file holds one definition,
// or several under `indexes: [...]`.
//
// Each column_def is a source: a cell of that column yields one entry per row
// (keyed by row and column) holding that column_def's fields. Every column_def
// must contain the shard field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

enum class IndexFieldType { kUuid, kString, kInt, kFloat, kBool, kDatetime };

std::string_view IndexFieldTypeName(IndexFieldType t);

struct IndexField {
  std::string path;  // "fare.total"
  IndexFieldType type = IndexFieldType::kString;
  std::string sql_column;  // "f_fare__total"
};

struct IndexColumnDef {
  std::string column_key;
  std::vector<IndexField> fields;
};

struct IndexDefinition {
  std::string table;
  std::string datastore;
  std::string shard_field;  // path of the shard field
  std::vector<IndexColumnDef> column_defs;
  std::string source;  // file it came from

  // Every distinct field (by path) across column_defs, shard field first.
  std::vector<IndexField> AllFields() const;
  const IndexField* FindField(const std::string& path) const;
  const IndexColumnDef* FindColumnDef(const std::string& column) const;
  // Stable hash of the normalised definition: a change makes a new table version.
  std::string Fingerprint() const;
};

// Parses one file's definitions, validating against `cluster`. InvalidArgument
// lists every error as file:line: key: message (unknown type, duplicate field,
// a column the datastore does not have, a name that is not a safe identifier,
// a column_def without the shard field, ...).
Result<std::vector<IndexDefinition>> ParseIndexDefinitions(std::string_view yaml,
                                                           const std::string& source,
                                                           const ClusterConfig& cluster);
// Loads a file, or every *.yaml / *.yml file of a directory (sorted by name).
// NotFound naming `path` (and the working directory it was resolved against)
// when it does not exist; InvalidArgument naming the file for one that cannot
// be read or parsed (every parse error, with file and line).
Result<std::vector<IndexDefinition>> LoadIndexDefinitions(const std::string& path,
                                                          const ClusterConfig& cluster);

}  // namespace cellar
