// Unit tests of the index library without MySQL or Kafka: definition parsing
// and validation (every error as file:line: key: message), field extraction
// (ExtractEntry) for the six types, query filter parsing (ParseIndexFilter)
// and the shard of a field value (ShardForFieldValue, pinned to FNV-1a-64).
#include <cmath>
#include <cstdint>
#include <cstdio>
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
#include "tests/support/test_cluster.h"

namespace cellar {

[[maybe_unused]] static void PrintTo(StatusCode code, std::ostream* os) {
  *os << StatusCodeName(code);
}

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

const char* kClusterYaml = R"(shards: 8
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

const ClusterConfig& Cluster() {
  static const ClusterConfig* cfg = [] {
    auto c = ParseClusterConfig(kClusterYaml, "<unit>");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return new ClusterConfig(std::move(c).value());
  }();
  return *cfg;
}

Result<std::vector<IndexDefinition>> Parse(const std::string& yaml) {
  return ParseIndexDefinitions(yaml, "defs.yaml", Cluster());
}

// The error message of a definition that must not parse.
std::string ParseError(const std::string& yaml) {
  auto r = Parse(yaml);
  EXPECT_FALSE(r.ok()) << "parsed although invalid:\n" << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

int Lines(const std::string& s) {
  int n = s.empty() ? 0 : 1;
  for (char c : s) n += c == '\n';
  return n;
}

const char* kExample = R"(table: driver_partner_index
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

IndexDefinition ExampleDef() {
  auto r = Parse(kExample);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->front() : IndexDefinition{};
}

// One field of every type, sharded on a string.
const char* kAllTypes = R"(table: all_types
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

IndexDefinition AllTypesDef() {
  auto r = Parse(kAllTypes);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->front() : IndexDefinition{};
}

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
  EXPECT_FALSE(LoadIndexDefinitions(dir.File("missing.yaml"), Cluster()).ok());
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

// ---------------------------------------------------------------------------
// ExtractEntry

Cell MakeCell(const std::string& column, json body, int64_t ref_key = 3) {
  Cell c;
  c.row_key = *Uuid::Parse("0b7e1d7a-3c55-4c1e-9a1e-0c2f4c4d5e6f");
  c.column = column;
  c.ref_key = ref_key;
  c.body = std::move(body);
  c.added_id = 77;
  c.created_at = 1'700'000'000'000'000;
  return c;
}

const std::string kDriver = "9b2c7a8e-1111-4222-8333-944455556666";
const std::string kCity = "5c4e0a1b-aaaa-4bbb-8ccc-dddd0000eeee";

json TripBody() {
  return {{"driver_partner_uuid", kDriver},
          {"city_uuid", kCity},
          {"trip_created_at", "2026-03-01T12:30:00Z"},
          {"fare", {{"total", 23.5}, {"currency", "EUR"}}},
          {"status", "completed"},
          {"other", {1, 2, 3}}};
}

TEST(ExtractEntryTest, DriverPartnerTrip) {
  IndexDefinition d = ExampleDef();
  Cell c = MakeCell("BASE", TripBody());
  auto e = ExtractEntry(d, d.column_defs[0], c, 8);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->row_key, c.row_key);
  EXPECT_EQ(e->column_key, "BASE");
  EXPECT_EQ(e->ref_key, 3);
  EXPECT_EQ(e->added_id, 77u);
  EXPECT_EQ(e->source_shard, ShardForRow(c.row_key, 8));
  EXPECT_EQ(e->target_shard, ShardForRow(*Uuid::Parse(kDriver), 8));
  ASSERT_EQ(e->values.size(), 5u);
  EXPECT_EQ(std::get<std::string>(e->values[0]), Uuid::Parse(kDriver)->ToBytes());
  EXPECT_EQ(std::get<std::string>(e->values[1]), Uuid::Parse(kCity)->ToBytes());
  EXPECT_EQ(std::get<int64_t>(e->values[2]), *ParseRfc3339("2026-03-01T12:30:00Z"));
  EXPECT_EQ(std::get<double>(e->values[3]), 23.5);
  EXPECT_EQ(std::get<std::string>(e->values[4]), "completed");
}

TEST(ExtractEntryTest, AllSixTypesAndNestedPaths) {
  IndexDefinition d = AllTypesDef();
  const std::string id = "00112233-4455-6677-8899-aabbccddeeff";
  Cell c = MakeCell("PROFILE", {{"name", "ann"},
                                {"id", "00112233-4455-6677-8899-AABBCCDDEEFF"},
                                {"age", -41},
                                {"score", {{"value", 7}}},
                                {"active", false},
                                {"seen_at", "2026-01-01T02:00:00+02:00"},
                                {"a", {{"b", {{"c", int64_t{1} << 40}}}}}});
  auto e = ExtractEntry(d, d.column_defs[0], c, 8);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->values.size(), 7u);
  EXPECT_EQ(std::get<std::string>(e->values[0]), "ann");
  EXPECT_EQ(std::get<std::string>(e->values[1]), Uuid::Parse(id)->ToBytes());
  EXPECT_EQ(std::get<int64_t>(e->values[2]), -41);
  EXPECT_EQ(std::get<double>(e->values[3]), 7.0);  // an integer is a valid float
  EXPECT_EQ(std::get<int64_t>(e->values[4]), 0);
  EXPECT_EQ(std::get<int64_t>(e->values[5]), *ParseRfc3339("2026-01-01T00:00:00Z"));
  EXPECT_EQ(std::get<int64_t>(e->values[6]), int64_t{1} << 40);
  EXPECT_EQ(e->target_shard, ShardForFieldValue(d.column_defs[0].fields[0], e->values[0], 8));

  // Boundaries that are valid.
  c.body["name"] = std::string(255, 'x');
  c.body["age"] = std::numeric_limits<int64_t>::min();
  c.body["active"] = true;
  c.body["seen_at"] = "2026-01-01";  // a bare date is midnight UTC
  e = ExtractEntry(d, d.column_defs[0], c, 8);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(std::get<int64_t>(e->values[2]), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(std::get<int64_t>(e->values[4]), 1);
  EXPECT_EQ(std::get<int64_t>(e->values[5]), *ParseRfc3339("2026-01-01T00:00:00Z"));
}

TEST(ExtractEntryTest, MissingFieldsAndWrongTypesGiveAReason) {
  IndexDefinition d = AllTypesDef();
  const json good = {{"name", "ann"},
                     {"id", "00112233-4455-6677-8899-aabbccddeeff"},
                     {"age", 41},
                     {"score", {{"value", 7.5}}},
                     {"active", true},
                     {"seen_at", "2026-01-01T00:00:00Z"},
                     {"a", {{"b", {{"c", 1}}}}}};
  ASSERT_TRUE(ExtractEntry(d, d.column_defs[0], MakeCell("PROFILE", good), 8).ok());
  struct Case {
    std::string pointer;  // JSON pointer to replace ("" = remove key below)
    json value;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"/name", 5, "field name is not a string"},
      {"/name", std::string(256, 'x'), "field name is longer than 255 bytes"},
      {"/name", nullptr, "field name is not a string"},
      {"/id", "not-a-uuid", "field id is not a UUID string"},
      {"/id", "00112233445566778899aabbccddeeff", "field id is not a UUID string"},
      {"/id", 12, "field id is not a UUID string"},
      {"/age", 4.5, "field age is not an integer"},
      {"/age", "41", "field age is not an integer"},
      {"/age", 18446744073709551615ull, "field age is not an integer"},  // > INT64_MAX
      {"/age", uint64_t{1} << 63, "field age is not an integer"},
      {"/score/value", "7.5", "field score.value is not a number"},
      {"/score/value", json::object(), "field score.value is not a number"},
      {"/score", 7.5, "missing field score.value"},  // not an object: no path
      {"/active", 1, "field active is not a boolean"},
      {"/active", "true", "field active is not a boolean"},
      {"/seen_at", "2026-02-30T00:00:00Z", "field seen_at is not an RFC 3339 time"},
      {"/seen_at", "yesterday", "field seen_at is not an RFC 3339 time"},
      {"/seen_at", 1767225600, "field seen_at is not an RFC 3339 time"},
      {"/a/b", json::array({1}), "missing field a.b.c"},
  };
  for (const auto& k : cases) {
    json body = good;
    body[json::json_pointer(k.pointer)] = k.value;
    auto e = ExtractEntry(d, d.column_defs[0], MakeCell("PROFILE", body), 8);
    ASSERT_FALSE(e.ok()) << k.pointer << " = " << k.value.dump();
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(e.status().message(), k.reason) << k.pointer << " = " << k.value.dump();
  }
  for (const char* key : {"name", "id", "age", "active", "seen_at"}) {
    json body = good;
    body.erase(key);
    auto e = ExtractEntry(d, d.column_defs[0], MakeCell("PROFILE", body), 8);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().message(), std::string("missing field ") + key);
  }
  json body = good;
  body["score"].erase("value");
  EXPECT_EQ(ExtractEntry(d, d.column_defs[0], MakeCell("PROFILE", body), 8).status().message(),
            "missing field score.value");
  // A key with a literal dot is not the nested path.
  body = good;
  body.erase("score");
  body["score.value"] = 1.0;
  EXPECT_EQ(ExtractEntry(d, d.column_defs[0], MakeCell("PROFILE", body), 8).status().message(),
            "missing field score.value");
  // The body is not an object at all.
  EXPECT_FALSE(ExtractEntry(d, d.column_defs[0], MakeCell("PROFILE", json::array()), 8).ok());
}

// ---------------------------------------------------------------------------
// ParseIndexFilter

IndexFilter MustParse(const IndexDefinition& d, const std::string& text) {
  auto f = ParseIndexFilter(d, text);
  EXPECT_TRUE(f.ok()) << text << ": " << f.status().ToString();
  return f.ok() ? *f : IndexFilter{};
}

TEST(ParseIndexFilterTest, Operators) {
  IndexDefinition d = ExampleDef();
  IndexFilter f = MustParse(d, "city_uuid = " + kCity);
  EXPECT_EQ(f.field, "city_uuid");
  EXPECT_EQ(f.op, IndexFilter::Op::kEq);
  ASSERT_EQ(f.values.size(), 1u);
  EXPECT_EQ(std::get<std::string>(f.values[0]), Uuid::Parse(kCity)->ToBytes());

  const std::map<std::string, IndexFilter::Op> ops = {
      {"=", IndexFilter::Op::kEq},  {"!=", IndexFilter::Op::kNe}, {"<", IndexFilter::Op::kLt},
      {"<=", IndexFilter::Op::kLe}, {">", IndexFilter::Op::kGt},  {">=", IndexFilter::Op::kGe}};
  for (const auto& [tok, op] : ops) {
    for (const std::string& text : {"fare.total " + tok + " 12.5", "fare.total" + tok + "12.5",
                                    "  fare.total\t" + tok + "  12.5  "}) {
      f = MustParse(d, text);
      EXPECT_EQ(f.field, "fare.total") << text;
      EXPECT_EQ(f.op, op) << text;
      ASSERT_EQ(f.values.size(), 1u) << text;
      EXPECT_EQ(std::get<double>(f.values[0]), 12.5) << text;
    }
  }
  f = MustParse(d, "trip_created_at >= 2026-01-01T00:00:00Z");
  EXPECT_EQ(f.op, IndexFilter::Op::kGe);
  EXPECT_EQ(std::get<int64_t>(f.values[0]), *ParseRfc3339("2026-01-01T00:00:00Z"));
  f = MustParse(d, "trip_created_at < 2026-01-01");
  EXPECT_EQ(std::get<int64_t>(f.values[0]), *ParseRfc3339("2026-01-01T00:00:00Z"));
}

TEST(ParseIndexFilterTest, InLists) {
  IndexDefinition d = ExampleDef();
  for (const std::string& text : std::vector<std::string>{
           "status in (completed, canceled, open)", "status IN (completed,canceled,open)",
           "status in ('completed', \"canceled\", 'open')", "status in(completed, canceled, open)",
           "status in completed, canceled, open"}) {
    IndexFilter f = MustParse(d, text);
    EXPECT_EQ(f.field, "status") << text;
    EXPECT_EQ(f.op, IndexFilter::Op::kIn) << text;
    ASSERT_EQ(f.values.size(), 3u) << text;
    EXPECT_EQ(std::get<std::string>(f.values[0]), "completed") << text;
    EXPECT_EQ(std::get<std::string>(f.values[1]), "canceled") << text;
    EXPECT_EQ(std::get<std::string>(f.values[2]), "open") << text;
  }
  IndexFilter f = MustParse(d, "city_uuid in (" + kCity + ")");
  ASSERT_EQ(f.values.size(), 1u);
  EXPECT_EQ(std::get<std::string>(f.values[0]), Uuid::Parse(kCity)->ToBytes());
  // Commas inside quotes belong to the value.
  f = MustParse(d, "status in ('a, b', 'c')");
  ASSERT_EQ(f.values.size(), 2u);
  EXPECT_EQ(std::get<std::string>(f.values[0]), "a, b");
  EXPECT_EQ(std::get<std::string>(f.values[1]), "c");
  // One bad element fails the filter.
  EXPECT_FALSE(ParseIndexFilter(d, "city_uuid in (" + kCity + ", nope)").ok());
}

TEST(ParseIndexFilterTest, QuotedValuesAreData) {
  IndexDefinition d = ExampleDef();
  const std::map<std::string, std::string> cases = {
      {"status = 'hello world'", "hello world"},
      {"status = \"hello world\"", "hello world"},
      {"status = '  padded  '", "  padded  "},
      {"status = 'a = b'", "a = b"},
      {"status = 'a<=b'", "a<=b"},
      {"status = 'checked in'", "checked in"},
      {"status = 'x in (1, 2)'", "x in (1, 2)"},
      {"status = ''", ""},
      {"status = it's", "it's"},
      {"status = x'; DROP TABLE cells_trips; --", "x'; DROP TABLE cells_trips; --"},
      {"status = \"x'; DROP TABLE cells_trips; --\"", "x'; DROP TABLE cells_trips; --"},
  };
  for (const auto& [text, value] : cases) {
    IndexFilter f = MustParse(d, text);
    EXPECT_EQ(f.field, "status") << text;
    EXPECT_EQ(f.op, IndexFilter::Op::kEq) << text;
    ASSERT_EQ(f.values.size(), 1u) << text;
    EXPECT_EQ(std::get<std::string>(f.values[0]), value) << text;
  }
}

TEST(ParseIndexFilterTest, Errors) {
  IndexDefinition d = ExampleDef();
  auto err = [&](const std::string& text) {
    auto f = ParseIndexFilter(d, text);
    EXPECT_FALSE(f.ok()) << text;
    if (f.ok()) return std::string();
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << text;
    return f.status().message();
  };
  EXPECT_THAT(err("rider_uuid = " + kCity),
              HasSubstr("index 'driver_partner_index' has no field 'rider_uuid'"));
  EXPECT_THAT(err("fare = 3"), HasSubstr("has no field 'fare'"));
  EXPECT_THAT(err("status"), HasSubstr("expected 'field op value'"));
  EXPECT_THAT(err(""), HasSubstr("expected 'field op value'"));
  EXPECT_THAT(err("= 3"), Not(HasSubstr("DROP")));
  EXPECT_THAT(err("fare.total = abc"), HasSubstr("fare.total"));
  EXPECT_THAT(err("fare.total >= "), HasSubstr("fare.total"));
  EXPECT_THAT(err("trip_created_at >= yesterday"), HasSubstr("trip_created_at"));
  EXPECT_THAT(err("city_uuid = not-a-uuid"), HasSubstr("city_uuid"));
  EXPECT_THAT(err("city_uuid = ''"), HasSubstr("city_uuid"));
  IndexDefinition all = AllTypesDef();
  auto f = ParseIndexFilter(all, "age = 1.5");
  EXPECT_FALSE(f.ok());
  f = ParseIndexFilter(all, "age = 99999999999999999999");  // overflows int64
  EXPECT_FALSE(f.ok());
  f = ParseIndexFilter(all, "active = yes");
  EXPECT_FALSE(f.ok());
  IndexFilter ok = MustParse(all, "active = true");
  EXPECT_EQ(std::get<int64_t>(ok.values[0]), 1);
  ok = MustParse(all, "age in (1, -2, 3)");
  EXPECT_EQ(std::get<int64_t>(ok.values[1]), -2);
  ok = MustParse(all, "a.b.c != 4");
  EXPECT_EQ(ok.op, IndexFilter::Op::kNe);
}

// ---------------------------------------------------------------------------
// ShardForFieldValue

uint64_t ReferenceFnv1a64(const std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

TEST(ShardForFieldValueTest, PinnedToFnv1aOfTheCanonicalText) {
  IndexDefinition d = AllTypesDef();
  const auto& f = d.column_defs[0].fields;  // name id age score.value active seen_at a.b.c
  for (uint32_t shards : {1u, 8u, 64u, 1000u}) {
    EXPECT_EQ(ShardForFieldValue(f[0], SqlParam(std::string("ann")), shards),
              ReferenceFnv1a64("ann") % shards);
    Uuid u = *Uuid::Parse("00112233-4455-6677-8899-aabbccddeeff");
    EXPECT_EQ(ShardForFieldValue(f[1], SqlParam(u.ToBytes()), shards), ShardForRow(u, shards));
    EXPECT_EQ(ShardForFieldValue(f[2], SqlParam(int64_t{-42}), shards),
              ReferenceFnv1a64("-42") % shards);
    EXPECT_EQ(ShardForFieldValue(f[3], SqlParam(1.5), shards), ReferenceFnv1a64("1.5") % shards);
    EXPECT_EQ(ShardForFieldValue(f[3], SqlParam(0.1), shards), ReferenceFnv1a64("0.1") % shards);
    EXPECT_EQ(ShardForFieldValue(f[4], SqlParam(int64_t{1}), shards),
              ReferenceFnv1a64("true") % shards);
    EXPECT_EQ(ShardForFieldValue(f[4], SqlParam(int64_t{0}), shards),
              ReferenceFnv1a64("false") % shards);
    EXPECT_EQ(ShardForFieldValue(f[5], SqlParam(int64_t{1767225600000000}), shards),
              ReferenceFnv1a64("1767225600000000") % shards);
  }
  // Literal pins (8 shards): these must never change, the entries live there.
  EXPECT_EQ(ShardForFieldValue(f[0], SqlParam(std::string("ann")), 8), 0u);
  EXPECT_EQ(ShardForFieldValue(f[0], SqlParam(std::string("")), 8), ReferenceFnv1a64("") % 8);
}

// A query computes the shard from text, the writer from the body's JSON: for
// every type they must agree, also for values SQL considers equal.
TEST(ShardForFieldValueTest, TextAndJsonAgreeAndEqualValuesShareAShard) {
  IndexDefinition d = AllTypesDef();
  const auto& f = d.column_defs[0].fields;
  struct Case {
    size_t field;
    std::string text;
    json body_value;
  };
  const std::vector<Case> cases = {
      {0, "ann", "ann"},
      {1, "00112233-4455-6677-8899-aabbccddeeff", "00112233-4455-6677-8899-AABBCCDDEEFF"},
      {2, "42", 42},
      {2, "-7", -7},
      {3, "1.5", 1.5},
      {3, "1.50", 1.5},
      {3, "3", 3},
      {3, "0", -0.0},
      {3, "-0", 0.0},
      {3, "1e2", 100},
      {4, "true", true},
      {4, "false", false},
      {5, "2026-01-01T00:00:00Z", "2026-01-01T01:00:00+01:00"},
      {5, "2026-01-01", "2026-01-01T00:00:00.000000Z"},
  };
  for (uint32_t shards : {8u, 64u, 1009u}) {
    for (const auto& k : cases) {
      auto t = TextToFieldValue(f[k.field], k.text);
      auto j = JsonToFieldValue(f[k.field], k.body_value);
      ASSERT_TRUE(t.ok()) << k.text << ": " << t.status().ToString();
      ASSERT_TRUE(j.ok()) << k.body_value.dump() << ": " << j.status().ToString();
      EXPECT_EQ(ShardForFieldValue(f[k.field], *t, shards),
                ShardForFieldValue(f[k.field], *j, shards))
          << f[k.field].path << ": text '" << k.text << "' vs JSON " << k.body_value.dump();
      // Stable: the same value always maps to the same shard.
      EXPECT_EQ(ShardForFieldValue(f[k.field], *t, shards),
                ShardForFieldValue(f[k.field], *t, shards));
    }
  }
}

TEST(ShardForFieldValueTest, SpreadsOverEveryShard) {
  IndexDefinition d = AllTypesDef();
  std::map<uint32_t, int> counts;
  for (int i = 0; i < 8000; ++i)
    ++counts[ShardForFieldValue(d.column_defs[0].fields[0], SqlParam("driver-" + std::to_string(i)),
                                8)];
  ASSERT_EQ(counts.size(), 8u);
  for (const auto& [shard, n] : counts) {
    EXPECT_GT(n, 800) << shard;
    EXPECT_LT(n, 1200) << shard;
  }
}

}  // namespace
}  // namespace cellar
