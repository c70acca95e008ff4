// Shared by the index unit tests (indexes_unit_test.cc: definitions;
// indexes_entry_unit_test.cc: entries, filters, field sharding): a cluster
// config without servers and the example definitions they parse.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_definition.h"

namespace cellar::index_unit_test {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

inline const char* const kClusterYaml = R"(shards: 8
mysql:
  user: root
  hosts:
    - { name: db1, address: 127.0.0.1, port: 3306, shards: "0-7" }
datastores:
  - name: trips
    columns:
      BASE: {}
      STATUS: {}
  - name: users
    columns:
      PROFILE: {}
)";

inline const ClusterConfig& Cluster() {
  static const ClusterConfig* cfg = [] {
    auto c = ParseClusterConfig(kClusterYaml, "<unit>");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return new ClusterConfig(std::move(c).value());
  }();
  return *cfg;
}

inline Result<std::vector<IndexDefinition>> Parse(const std::string& yaml) {
  return ParseIndexDefinitions(yaml, "defs.yaml", Cluster());
}

// The error message of a definition that must not parse.
inline std::string ParseError(const std::string& yaml) {
  auto r = Parse(yaml);
  EXPECT_FALSE(r.ok()) << "parsed although invalid:\n" << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

inline int Lines(const std::string& s) {
  int n = s.empty() ? 0 : 1;
  for (char c : s) n += c == '\n';
  return n;
}

inline const char* const kExample = R"(table: driver_partner_index
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: city_uuid, type: UUID }
      - { field: trip_created_at, type: datetime }
      - { field: fare.total, type: float }
      - { field: status, type: string }
)";

inline IndexDefinition ExampleDef() {
  auto r = Parse(kExample);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->front() : IndexDefinition{};
}

// One field of every type, sharded on a string.
inline const char* const kAllTypes = R"(table: all_types
datastore: users
column_defs:
  - column_key: PROFILE
    fields:
      - { field: name, type: string }
      - { field: id, type: UUID }
      - { field: age, type: int }
      - { field: score.value, type: float }
      - { field: active, type: bool }
      - { field: seen_at, type: datetime }
      - { field: a.b.c, type: int }
)";

inline IndexDefinition AllTypesDef() {
  auto r = Parse(kAllTypes);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->front() : IndexDefinition{};
}

}  // namespace cellar::index_unit_test
