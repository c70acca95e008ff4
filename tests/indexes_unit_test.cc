// Unit tests of index definitions without MySQL or Kafka: parsing and
// validation (every error as file:line: key: message). Entries, filters and
// field sharding: indexes_entry_unit_test.cc.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "base/time.h"
#include "base/uuid.h"
#include "cells/cell.h"
#include "cells/shard_map.h"
#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_definition.h"
#include "indexes/index_entry.h"
#include "indexes/index_query.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"
#include "tests/indexes_unit_test_defs.h"

namespace cellar {
namespace {

using namespace index_unit_test;  // NOLINT: the shared test definitions

// ---------------------------------------------------------------------------
// Definitions

TEST(IndexDefinitionTest, ParsesTheDriverPartnerExampleFile) {
  auto defs = LoadIndexDefinitions(
      std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes/driver_partner_index.yaml",
      Cluster());
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 1u);
  const IndexDefinition& d = defs->front();
  EXPECT_EQ(d.table, "driver_partner_index");
  EXPECT_EQ(d.datastore, "trips");
  EXPECT_EQ(d.shard_field, "driver_partner_uuid");  // the first field by default
  EXPECT_THAT(d.source, HasSubstr("driver_partner_index.yaml"));
  ASSERT_EQ(d.column_defs.size(), 1u);
  EXPECT_EQ(d.column_defs[0].column_key, "BASE");
  const auto& f = d.column_defs[0].fields;
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].type, IndexFieldType::kUuid);
  EXPECT_EQ(f[1].type, IndexFieldType::kUuid);
  EXPECT_EQ(f[2].type, IndexFieldType::kDatetime);
  EXPECT_EQ(f[3].path, "fare.total");
  EXPECT_EQ(f[3].type, IndexFieldType::kFloat);
  EXPECT_EQ(f[3].sql_column, "f_fare__total");
  EXPECT_EQ(f[4].type, IndexFieldType::kString);
  EXPECT_EQ(d.AllFields().front().path, "driver_partner_uuid");
  EXPECT_NE(d.FindField("fare.total"), nullptr);
  EXPECT_EQ(d.FindField("fare"), nullptr);
  EXPECT_NE(d.FindColumnDef("BASE"), nullptr);
  EXPECT_EQ(d.FindColumnDef("STATUS"), nullptr);
}

TEST(IndexDefinitionTest, ExplicitShardFieldAndSeveralColumnDefs) {
  auto defs = Parse(R"(table: by_city
datastore: trips
shard_field: city_uuid
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: city_uuid, type: UUID }
  - column_key: STATUS
    fields:
      - { field: state, type: string }
      - { field: city_uuid, type: UUID }
)");
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  const IndexDefinition& d = defs->front();
  EXPECT_EQ(d.shard_field, "city_uuid");
  auto all = d.AllFields();
  ASSERT_EQ(all.size(), 3u);  // city_uuid once, shard field first
  EXPECT_EQ(all[0].path, "city_uuid");
  EXPECT_EQ(all[1].path, "driver_partner_uuid");
  EXPECT_EQ(all[2].path, "state");
}

TEST(IndexDefinitionTest, SeveralDefinitionsInOneFile) {
  auto defs = Parse(R"(indexes:
  - table: one
    datastore: trips
    column_defs: [ { column_key: BASE, fields: [ { field: a, type: int } ] } ]
  - table: two
    datastore: users
    column_defs: [ { column_key: PROFILE, fields: [ { field: b, type: bool } ] } ]
)");
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 2u);
  EXPECT_EQ((*defs)[0].table, "one");
  EXPECT_EQ((*defs)[1].datastore, "users");
}

TEST(IndexDefinitionTest, UnknownTypeNamesFileLineAndKey) {
  std::string e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: city_uuid, type: uuidd }
)");
  EXPECT_THAT(e, HasSubstr("defs.yaml:7: column_defs[0].fields[1].type: unknown type 'uuidd'"));
}

TEST(IndexDefinitionTest, DuplicateFieldNamesFileLineAndKey) {
  std::string e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: city_uuid, type: UUID }
      - { field: city_uuid, type: UUID }
)");
  EXPECT_THAT(e, HasSubstr("defs.yaml:8: column_defs[0].fields[2].field: duplicate field "
                           "'city_uuid'"));
}

TEST(IndexDefinitionTest, ColumnTheDatastoreDoesNotHave) {
  std::string e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
  - column_key: PROFILE
    fields:
      - { field: driver_partner_uuid, type: UUID }
)");
  EXPECT_THAT(e, HasSubstr("defs.yaml:7: column_defs[1].column_key: datastore 'trips' has no "
                           "column 'PROFILE'"));
}

TEST(IndexDefinitionTest, UnknownDatastore) {
  std::string e = ParseError(R"(table: t1
datastore: tripz
column_defs:
  - column_key: BASE
    fields: [ { field: a, type: int } ]
)");
  EXPECT_THAT(e, HasSubstr("defs.yaml:2: datastore: unknown datastore 'tripz'"));
}

TEST(IndexDefinitionTest, UnsafeTableNames) {
  for (const std::string& bad :
       std::vector<std::string>{"Trips", "1trips", "trips-index", "trips index", "t;drop", "t`x",
                                "_t", "a_table_name_that_is_far_too_long_for_an_index_x"}) {
    std::string e = ParseError("table: \"" + bad + "\"\n" + R"(datastore: trips
column_defs:
  - column_key: BASE
    fields: [ { field: a, type: int } ]
)");
    EXPECT_THAT(e, HasSubstr("defs.yaml:1: table: must match")) << bad;
  }
}

TEST(IndexDefinitionTest, UnsafeFieldNames) {
  const std::string long_part(41, 'x');
  for (const std::string& bad :
       std::vector<std::string>{"fare total", "fare..total", ".fare", "fare.", "x`y", "a.b-c",
                                "a;DROP TABLE x", "9lives", "", "naïve", long_part}) {
    std::string e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: ")" + bad + R"(", type: int }
)");
    EXPECT_THAT(e, HasSubstr("defs.yaml:7: column_defs[0].fields[1].field: '" + bad +
                             "' is not a safe identifier path"))
        << bad;
  }
  // A path whose SQL column name would exceed 64 characters.
  std::string path = std::string(31, 'a') + "." + std::string(31, 'b');
  EXPECT_THAT(ParseError("table: t1\ndatastore: trips\ncolumn_defs:\n  - column_key: BASE\n"
                         "    fields: [ { field: " +
                         path + ", type: int } ]\n"),
              HasSubstr("is not a safe identifier path"));
}

// Two different paths must not map to one SQL column: MySQL column names are
// case-insensitive and '.' becomes "__".
TEST(IndexDefinitionTest, FieldsThatCollideAsSqlColumnsAreRejected) {
  std::string e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: fare.total, type: float }
      - { field: fare__total, type: float }
)");
  EXPECT_THAT(e, AllOf(HasSubstr("defs.yaml:8: column_defs[0].fields[2].field:"),
                       HasSubstr("same SQL column")));
  e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: City, type: string }
      - { field: city, type: string }
)");
  EXPECT_THAT(e, AllOf(HasSubstr("defs.yaml:8: column_defs[0].fields[2].field:"),
                       HasSubstr("same SQL column")));
}

TEST(IndexDefinitionTest, ColumnDefWithoutTheShardFieldPointsAtThatColumnDef) {
  std::string e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: city_uuid, type: UUID }
  - column_key: STATUS
    fields:
      - { field: city_uuid, type: UUID }
)");
  EXPECT_THAT(e, HasSubstr("defs.yaml:8: column_defs[1]: does not contain the shard field "
                           "'driver_partner_uuid'"));
  // An explicit shard_field that no column_def has.
  e = ParseError(R"(table: t1
datastore: trips
shard_field: rider_uuid
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
)");
  EXPECT_THAT(e, HasSubstr("defs.yaml:5: column_defs[0]: does not contain the shard field "
                           "'rider_uuid'"));
}

TEST(IndexDefinitionTest, OneFieldWithTwoTypesAcrossColumnDefs) {
  std::string e = ParseError(R"(table: t1
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: amount, type: int }
  - column_key: STATUS
    fields:
      - { field: driver_partner_uuid, type: string }
      - { field: amount, type: float }
)");
  EXPECT_THAT(e, HasSubstr("'driver_partner_uuid' has different types"));
  EXPECT_THAT(e, HasSubstr("field 'amount' has different types"));
}

TEST(IndexDefinitionTest, StructuralErrors) {
  EXPECT_THAT(ParseError("table: t1\ndatastore: trips\ncolum_defs: []\n"),
              AllOf(HasSubstr("defs.yaml:3: colum_defs:"),
                    HasSubstr("defs.yaml:1: column_defs: missing required key")));
  EXPECT_THAT(ParseError("datastore: trips\ncolumn_defs:\n  - column_key: BASE\n"
                         "    fields: [ { field: a, type: int } ]\n"),
              HasSubstr("table: missing required key"));
  EXPECT_THAT(ParseError("table: t1\ndatastore: trips\ncolumn_defs: []\n"),
              HasSubstr("column_defs: needs at least one column_def"));
  EXPECT_THAT(ParseError("table: t1\ndatastore: trips\ncolumn_defs:\n  - column_key: BASE\n"
                         "    fields: []\n"),
              HasSubstr("defs.yaml:5: column_defs[0].fields: needs at least one field"));
  EXPECT_THAT(ParseError("table: t1\ndatastore: trips\ncolumn_defs:\n  - column_key: BASE\n"
                         "    fields: [ { field: a } ]\n"),
              HasSubstr("column_defs[0].fields[0].type: missing required key"));
  EXPECT_THAT(ParseError("table: t1\ndatastore: trips\ncolumn_defs:\n  - column_key: BASE\n"
                         "    fields: [ { field: a, type: int, unique: true } ]\n"),
              HasSubstr("column_defs[0].fields[0].unique"));
  EXPECT_THAT(ParseError("table: [t1\n"), HasSubstr("defs.yaml"));  // YAML syntax error
}

TEST(IndexDefinitionTest, EveryErrorIsReportedOnItsOwnLine) {
  std::string e = ParseError(R"(table: Bad-Name
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: driver_partner_uuid, type: UUID }
      - { field: city uuid, type: UUID }
      - { field: when, type: timestamp }
      - { field: driver_partner_uuid, type: UUID }
  - column_key: NOPE
    fields:
      - { field: driver_partner_uuid, type: UUID }
)");
  EXPECT_THAT(e, HasSubstr("defs.yaml:1: table:"));
  EXPECT_THAT(e, HasSubstr("defs.yaml:7: column_defs[0].fields[1].field:"));
  EXPECT_THAT(e, HasSubstr("defs.yaml:8: column_defs[0].fields[2].type: unknown type"));
  EXPECT_THAT(e, HasSubstr("defs.yaml:9: column_defs[0].fields[3].field: duplicate field"));
  EXPECT_THAT(e, HasSubstr("defs.yaml:10: column_defs[1].column_key:"));
  EXPECT_EQ(Lines(e), 5) << e;
}

TEST(IndexDefinitionTest, DuplicateIndexNames) {
  EXPECT_THAT(ParseError(R"(indexes:
  - table: one
    datastore: trips
    column_defs: [ { column_key: BASE, fields: [ { field: a, type: int } ] } ]
  - table: one
    datastore: trips
    column_defs: [ { column_key: STATUS, fields: [ { field: a, type: int } ] } ]
)"),
              HasSubstr("defs.yaml:5: indexes[1].table: duplicate index 'one'"));
  testing::TempDir dir("idxdefs");
  for (const char* name : {"a.yaml", "b.yml"}) {
    FILE* f = std::fopen(dir.File(name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kExample, f);
    std::fclose(f);
  }
  auto r = LoadIndexDefinitions(dir.path(), Cluster());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(
      r.status().message(),
      AllOf(HasSubstr("b.yml: duplicate index 'driver_partner_index'"), HasSubstr("a.yaml")));
  auto missing = LoadIndexDefinitions(dir.File("missing.yaml"), Cluster());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(StatusCode::kNotFound, missing.status().code());
  EXPECT_THAT(missing.status().message(),
              AllOf(HasSubstr(dir.File("missing.yaml")), HasSubstr("do not exist")));
}

TEST(IndexDefinitionTest, RelativeMissingPathNamesTheWorkingDirectory) {
  auto r = LoadIndexDefinitions("no-such-indexes-dir", Cluster());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              AllOf(HasSubstr("'no-such-indexes-dir'"),
                    HasSubstr("relative to " + std::filesystem::current_path().string())));
}

TEST(IndexDefinitionTest, FingerprintFollowsTheDefinitionNotTheFile) {
  IndexDefinition a = ExampleDef();
  auto b = ParseIndexDefinitions(kExample, "elsewhere.yaml", Cluster());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.Fingerprint(), b->front().Fingerprint());
  EXPECT_EQ(a.Fingerprint().size(), 16u);
  IndexDefinition added = a;
  added.column_defs[0].fields.push_back({"distance", IndexFieldType::kFloat, "f_distance"});
  EXPECT_NE(added.Fingerprint(), a.Fingerprint());
  IndexDefinition retyped = a;
  retyped.column_defs[0].fields[4].type = IndexFieldType::kInt;
  EXPECT_NE(retyped.Fingerprint(), a.Fingerprint());
}

}  // namespace
}  // namespace cellar
