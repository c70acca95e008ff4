// Unit tests of index entries (ExtractEntry), query filters
// (ParseIndexFilter) and field-value sharding (ShardForFieldValue); no server.
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
#include "testing/status_printing.h"
#include "testing/test_cluster.h"
#include "tests/indexes_unit_test_defs.h"

namespace cellar {
namespace {

using namespace index_unit_test;  // NOLINT: the shared test definitions

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

// Query text (HTTP, Client, CLI) is decimal and finite: strtod took 'nan',
// 'inf', hex and overflowing exponents, and handed MariaDB a NaN or infinity.
TEST(TextToFieldValueTest, NumbersAreDecimalAndFiniteElseRefusedNamingTheText) {
  IndexDefinition d = AllTypesDef();
  const auto& f = d.column_defs[0].fields;
  const IndexField& integer = f[2];
  const IndexField& real = f[3];
  for (const char* raw : {"nan", "NaN", "inf", "-inf", "infinity", "0x10", "0x1p3", "1e400",
                          "-1e400", "", " 1", "1 ", "+1", "1.5x", "--1", "."}) {
    const std::string text = raw;
    auto v = TextToFieldValue(real, text);
    ASSERT_FALSE(v.ok()) << "'" << text << "' was taken as " << std::get<double>(*v);
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(v.status().message(), ::testing::HasSubstr("'" + text + "' is not a number"));
  }
  for (const char* raw : {"0x10", "010x", "9223372036854775808", "+1", " 1", "1e3", ""}) {
    const std::string text = raw;
    auto v = TextToFieldValue(integer, text);
    ASSERT_FALSE(v.ok()) << "'" << text << "' was taken";
    EXPECT_THAT(v.status().message(), ::testing::HasSubstr("'" + text + "' is not an integer"));
  }
  const std::vector<std::pair<std::string, double>> reals = {
      {"1.5", 1.5},   {"-0.25", -0.25}, {".5", 0.5},     {"5.", 5.0},
      {"1e-3", 1e-3}, {"1E2", 100.0},   {"1e308", 1e308}};
  for (const auto& [text, expected] : reals) {
    auto v = TextToFieldValue(real, text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status().ToString();
    EXPECT_EQ(std::get<double>(*v), expected) << text;
  }
  auto v = TextToFieldValue(integer, "-9223372036854775808");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(std::get<int64_t>(*v), std::numeric_limits<int64_t>::min());
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
