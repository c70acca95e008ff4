// Unit tests without MySQL: row-key hashing and shard mapping (pinned to the
// documented FNV-1a-64 by an independent implementation) and the body codec.
// Uuid, time and duration parsing are in base_unit_test.cc.
#include <time.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "base/uuid.h"
#include "cells/body_codec.h"
#include "cells/cell.h"
#include "cells/internal/batch_transaction.h"
#include "cells/log_position.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"

namespace cellar {

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// ---------------------------------------------------------------------------
// Hashing and shard mapping

// Reference FNV-1a 64 over arbitrary bytes, written from the published
// algorithm (http://www.isthe.com/chongo/tech/comp/fnv/), not from shard_map.cc.
uint64_t ReferenceFnv1a64(const std::string& bytes) {
  constexpr uint64_t kOffsetBasis = 14695981039346656037ull;  // 0xcbf29ce484222325
  constexpr uint64_t kPrime = 1099511628211ull;               // 2^40 + 2^8 + 0xb3
  uint64_t hash = kOffsetBasis;
  for (unsigned char c : bytes) {
    hash = hash ^ static_cast<uint64_t>(c);
    hash = hash * kPrime;  // modulo 2^64
  }
  return hash;
}

Uuid U(const std::string& text) {
  Result<Uuid> u = Uuid::Parse(text);
  EXPECT_TRUE(u.ok()) << u.status().ToString();
  return u.ok() ? *u : Uuid();
}

TEST(ShardMapTest, ReferenceImplementationMatchesPublishedVectors) {
  // Test vectors of the FNV reference code (test_fnv.c, FNV1a_64).
  EXPECT_EQ(0xcbf29ce484222325ull, ReferenceFnv1a64(""));
  EXPECT_EQ(0xaf63dc4c8601ec8cull, ReferenceFnv1a64("a"));
  EXPECT_EQ(0x85944171f73967e8ull, ReferenceFnv1a64("foobar"));
}

TEST(ShardMapTest, PinnedHashesAndShards) {
  // Values computed once from the documented algorithm; they are part of the
  // on-disk format and must never change.
  struct Pin {
    const char* uuid;
    uint64_t hash;
    uint32_t shard64;
    uint32_t shard7;
  };
  const Pin pins[] = {
      {"00000000-0000-0000-0000-000000000000", 0x88201fb960ff6465ull, 37, 0},
      {"00010203-0405-0607-0809-0a0b0c0d0e0f", 0x7c84dc9477851775ull, 53, 0},
      {"123e4567-e89b-12d3-a456-426614174000", 0x7f0c9ad0139933e0ull, 32, 5},
      {"ffffffff-ffff-ffff-ffff-ffffffffffff", 0xd6607508f5a1e855ull, 21, 5},
      {"6ba7b810-9dad-11d1-80b4-00c04fd430c8", 0x90fc22069f42281cull, 28, 6},
  };
  for (const Pin& p : pins) {
    SCOPED_TRACE(p.uuid);
    const Uuid u = U(p.uuid);
    EXPECT_EQ(p.hash, ReferenceFnv1a64(u.ToBytes()));
    EXPECT_EQ(p.hash, RowKeyHash(u));
    EXPECT_EQ(p.shard64, ShardForRow(u, 64));
    EXPECT_EQ(p.shard7, ShardForRow(u, 7));
    EXPECT_EQ(0u, ShardForRow(u, 1));
  }
}

TEST(ShardMapTest, MatchesReferenceForRandomRowsAndHashesBytesInUuidOrder) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    const Uuid u = Uuid::Random();
    const uint64_t want = ReferenceFnv1a64(u.ToBytes());
    ASSERT_EQ(want, RowKeyHash(u)) << u.ToString();
    for (uint32_t n : {1u, 2u, 7u, 64u, 1000u, 65536u, static_cast<uint32_t>(rng() | 1)})
      ASSERT_EQ(static_cast<uint32_t>(want % n), ShardForRow(u, n)) << u.ToString() << " n=" << n;
  }
  // Byte order matters: the printed form's byte order, first byte first.
  const Uuid forward = U("00010203-0405-0607-0809-0a0b0c0d0e0f");
  const Uuid backward = U("0f0e0d0c-0b0a-0908-0706-050403020100");
  EXPECT_NE(RowKeyHash(forward), RowKeyHash(backward));
  std::string bytes;
  for (int i = 0; i < 16; ++i) bytes.push_back(static_cast<char>(i));
  EXPECT_EQ(ReferenceFnv1a64(bytes), RowKeyHash(forward));
}

TEST(ShardMapTest, RandomRowsSpreadEvenlyOverShards) {
  constexpr int kShards = 64, kRows = 64000;
  std::vector<int> count(kShards, 0);
  for (int i = 0; i < kRows; ++i) ++count[ShardForRow(Uuid::Random(), kShards)];
  for (int s = 0; s < kShards; ++s) {
    // Expected 1000 per shard, standard deviation ~31.
    EXPECT_GT(count[s], 800) << "shard " << s;
    EXPECT_LT(count[s], 1200) << "shard " << s;
  }
}

// ---------------------------------------------------------------------------
// Body codec

// A zstd frame holding `content` in one raw (uncompressed) block, built by
// hand from RFC 8878 so the stored format is checked independently of libzstd.
std::string RawZstdFrame(const std::string& content, int declared_size = -1) {
  if (declared_size < 0) declared_size = static_cast<int>(content.size());
  EXPECT_LT(declared_size, 256);
  std::string f("\x28\xb5\x2f\xfd", 4);  // magic number 0xFD2FB528, little-endian
  f.push_back('\x20');                   // descriptor: single segment, 1-byte content size
  f.push_back(static_cast<char>(declared_size));
  const uint32_t block =
      1u /*last*/ | (0u << 1) /*raw*/ | (static_cast<uint32_t>(content.size()) << 3);
  f.push_back(static_cast<char>(block & 0xff));
  f.push_back(static_cast<char>((block >> 8) & 0xff));
  f.push_back(static_cast<char>((block >> 16) & 0xff));
  return f + content;
}

std::string Stored(const std::string& frame) { return std::string(1, '\x01') + frame; }

json MustDecode(const std::string& stored) {
  Result<json> r = DecodeBody(stored);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : json();
}

// A cluster of two hosts, four shards each, and databases named by `prefix`.
ClusterConfig TwoHostConfig(const std::string& prefix) {
  ClusterConfig cfg;
  cfg.shards = 8;
  cfg.mysql.database_prefix = prefix;
  cfg.mysql.hosts.resize(2);
  cfg.mysql.hosts[0].name = "db1";
  cfg.mysql.hosts[0].shards = {0, 1, 2, 3};
  cfg.mysql.hosts[1].name = "db2";
  cfg.mysql.hosts[1].shards = {4, 5, 6, 7};
  return cfg;
}

// Multi-row statements come in few sizes, so a connection prepares few texts.
TEST(StatementRowCountsTest, SplitsEveryCountIntoFewLadderSizesThatAddUp) {
  EXPECT_THAT(StatementRowCounts(0, 500), ::testing::IsEmpty());
  EXPECT_THAT(StatementRowCounts(7, 500), ::testing::ElementsAre(7));
  EXPECT_THAT(StatementRowCounts(37, 500), ::testing::ElementsAre(32, 5));
  EXPECT_THAT(StatementRowCounts(255, 500), ::testing::ElementsAre(224, 24, 7));
  EXPECT_THAT(StatementRowCounts(1000, 500), ::testing::ElementsAre(480, 480, 40));
  EXPECT_THAT(StatementRowCounts(5, 1), ::testing::ElementsAre(1, 1, 1, 1, 1));
  for (size_t max_rows : {1, 7, 64, 256, 500}) {
    std::set<size_t> sizes;
    for (size_t rows = 1; rows <= 2000; ++rows) {
      const std::vector<size_t> counts = StatementRowCounts(rows, max_rows);
      size_t sum = 0;
      for (size_t c : counts) {
        EXPECT_LE(c, max_rows);
        sum += c;
        sizes.insert(c);
      }
      EXPECT_EQ(sum, rows);
      EXPECT_TRUE(std::is_sorted(counts.rbegin(), counts.rend())) << rows;
      if (rows <= max_rows) {
        EXPECT_LE(counts.size(), 3u) << rows;
      }
    }
    EXPECT_LE(sizes.size(), 28u) << max_rows;  // against up to max_rows exact sizes
  }
}

// The ladder's step above 64 rows is a parameter.
TEST(StatementRowCountsTest, LargeStepSetsTheLadderAbove64Rows) {
  EXPECT_THAT(StatementRowCounts(255, 500, 8, 16), ::testing::ElementsAre(240, 8, 7));
  EXPECT_THAT(StatementRowCounts(255, 500, 8, 8), ::testing::ElementsAre(248, 7));
  EXPECT_THAT(StatementRowCounts(60, 500, 8, 16), ::testing::ElementsAre(56, 4));
}

// Cells INSERTs: exact up to 32 cells (one statement for a typical group
// commit of single puts), then the ladder in steps of 16; 48 texts at most.
// FitsOneStatement is StatementRowCounts(...).size() == 1 without the vector.
TEST(StatementRowCountsTest, FitsOneStatementAgreesWithTheCounts) {
  for (size_t large_step : {8, 16, 32})
    for (size_t exact_rows : {8, 32, 64})
      for (size_t max_rows : {1, 7, 64, 100, 256, 500})
        for (size_t rows = 0; rows <= 2 * max_rows + 70; ++rows)
          ASSERT_EQ(StatementRowCounts(rows, max_rows, exact_rows, large_step).size() == 1,
                    FitsOneStatement(rows, max_rows, exact_rows, large_step))
              << rows << " rows, max " << max_rows << ", exact " << exact_rows << ", step "
              << large_step;
  EXPECT_FALSE(internal::FitsOneInsert(0));
  EXPECT_TRUE(internal::FitsOneInsert(17));
  EXPECT_TRUE(internal::FitsOneInsert(112));
  EXPECT_FALSE(internal::FitsOneInsert(113));
  EXPECT_FALSE(internal::FitsOneInsert(600));
}

TEST(StatementRowCountsTest, CellsInsertsAreExactUpTo32ThenOnTheLadder) {
  EXPECT_THAT(internal::InsertRowCounts(0), ::testing::IsEmpty());
  EXPECT_THAT(internal::InsertRowCounts(17), ::testing::ElementsAre(17));
  EXPECT_THAT(internal::InsertRowCounts(32), ::testing::ElementsAre(32));
  EXPECT_THAT(internal::InsertRowCounts(45), ::testing::ElementsAre(40, 5));
  EXPECT_THAT(internal::InsertRowCounts(112), ::testing::ElementsAre(112));
  EXPECT_THAT(internal::InsertRowCounts(255), ::testing::ElementsAre(240, 15));
  EXPECT_THAT(internal::InsertRowCounts(600), ::testing::ElementsAre(256, 256, 80, 8));
  std::set<size_t> sizes;
  for (size_t cells = 1; cells <= 2000; ++cells) {
    size_t sum = 0;
    for (size_t c : internal::InsertRowCounts(cells)) {
      EXPECT_LE(c, internal::kMaxInsertRows);
      sum += c;
      sizes.insert(c);
    }
    EXPECT_EQ(sum, cells);
    if (cells <= internal::kExactInsertRows) {
      EXPECT_EQ(1u, internal::InsertRowCounts(cells).size());
    }
  }
  EXPECT_EQ(48u, sizes.size());
}

// Units of `cells_each` cells; units[i].joins_previous for i in `joined`.
std::vector<internal::WriteUnit> UnitsOf(std::vector<size_t> cells_each,
                                         std::set<size_t> joined = {}) {
  std::vector<internal::WriteUnit> units(cells_each.size());
  for (size_t i = 0; i < units.size(); ++i) {
    units[i].cells.resize(cells_each[i]);
    units[i].joins_previous = joined.count(i) > 0;
  }
  return units;
}

size_t TakeFor(std::vector<internal::WriteUnit>& units) {
  std::vector<internal::WriteUnit*> ptrs;
  for (auto& u : units) ptrs.push_back(&u);
  return internal::UnitsForOneStatement(ptrs);
}

// A group transaction takes the longest run of waiting units whose cells fit
// one INSERT, unless that leaves more than a quarter behind or splits units
// submitted together.
TEST(UnitsForOneStatementTest, TakesTheLongestPrefixThatFitsOneInsert) {
  auto ten_cell_rows = [](size_t n) { return std::vector<size_t>(n, 10); };
  auto none = UnitsOf({});
  EXPECT_EQ(0u, TakeFor(none));
  auto one = UnitsOf({300});  // one unit, however large, is taken
  EXPECT_EQ(1u, TakeFor(one));
  auto small = UnitsOf(std::vector<size_t>(31, 1));  // 31 cells: exact
  EXPECT_EQ(31u, TakeFor(small));
  auto on_ladder = UnitsOf(ten_cell_rows(8));  // 80 cells: on the ladder
  EXPECT_EQ(8u, TakeFor(on_ladder));
  auto ninety = UnitsOf(ten_cell_rows(9));  // 90 = 80 + 10 left
  EXPECT_EQ(8u, TakeFor(ninety));
  auto hundred_ten = UnitsOf(ten_cell_rows(11));  // 80 would leave 30 > 110 / 4
  EXPECT_EQ(11u, TakeFor(hundred_ten));
  auto singles = UnitsOf(std::vector<size_t>(70, 1));  // 70 = 64 + 6 left
  EXPECT_EQ(64u, TakeFor(singles));
  // Units 7 and 8 came in one Submit (a put_batch): 80 cells would separate
  // them, and the next prefix on the ladder (40) would leave too much.
  auto batch = UnitsOf(ten_cell_rows(10), {8});
  EXPECT_EQ(10u, TakeFor(batch));
  auto batch_given_back_whole = UnitsOf(ten_cell_rows(10), {9});  // 80 + units 8-9
  EXPECT_EQ(8u, TakeFor(batch_given_back_whole));
  auto batch_at_end = UnitsOf(ten_cell_rows(9), {8});
  EXPECT_EQ(9u, TakeFor(batch_at_end));
}

TEST(LogPositionTest, TokensRoundTripAndForeignOrMalformedOnesAreRefusedByName) {
  const ClusterConfig cfg = TwoHostConfig("cellar");
  const std::string token = EncodeLogPosition(cfg, "trips", 5, 123456789012);
  auto back = DecodeLogPosition(cfg, "trips", token);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shard, 5u);
  EXPECT_EQ(back->added_id, 123456789012u);

  // Another datastore, another cluster (database prefix), the shard moved.
  EXPECT_EQ(DecodeLogPosition(cfg, "users", token).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeLogPosition(TwoHostConfig("other"), "trips", token).status().code(),
            StatusCode::kInvalidArgument);
  ClusterConfig moved = cfg;
  moved.mysql.hosts[1].shards = {4, 6, 7};
  moved.mysql.hosts[0].shards = {0, 1, 2, 3, 5};
  auto foreign = DecodeLogPosition(moved, "trips", token);
  EXPECT_EQ(foreign.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(foreign.status().message(), ::testing::HasSubstr(token));
  EXPECT_THAT(foreign.status().message(), ::testing::HasSubstr("not one of trips"));

  for (const char* text :
       {"", "p1", "p1.5.12", "p2.5.12.00000000", "p1.x.12.00000000", "p1.5.-1.00000000",
        "p1.5.12.000", "p1.5.12.00000000.1", "p1.99999999999999999999999.1.00000000"}) {
    const std::string bad = text;
    auto r = DecodeLogPosition(cfg, "trips", bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("after: '" + bad + "'")) << bad;
  }
  // A shard beyond the cluster's: named as foreign, not read.
  const std::string far = "p1.8.1." + token.substr(token.rfind('.') + 1);
  EXPECT_EQ(DecodeLogPosition(cfg, "trips", far).status().code(), StatusCode::kInvalidArgument);
}

TEST(BodyCodecTest, FormatByteAndHandBuiltFrameDecode) {
  // A small body is stored as its plain MessagePack: 81 a1 61 01 = {"a": 1}.
  const std::string small = EncodeBody(json{{"a", 1}});
  EXPECT_EQ(std::string("\x02\x81\xa1\x61\x01", 5), small);
  EXPECT_EQ(json({{"a", 1}}), MustDecode(small));
  // From kCompressFromBytes of MessagePack on, a zstd frame.
  const json big = {{"route", std::string(kCompressFromBytes, 'x')}};
  const std::string enc = EncodeBody(big);
  ASSERT_FALSE(enc.empty());
  EXPECT_EQ('\x01', enc[0]);
  EXPECT_EQ(std::string("\x28\xb5\x2f\xfd", 4), enc.substr(1, 4)) << "payload is a zstd frame";
  EXPECT_LT(enc.size(), kCompressFromBytes / 4) << "a repetitive body compresses";
  EXPECT_EQ(big, MustDecode(enc));
  const json just_below = {{"r", std::string(kCompressFromBytes - 8, 'x')}};
  EXPECT_EQ('\x02', EncodeBody(just_below)[0]);

  // MessagePack {"a": 1} = 81 a1 61 01, in a hand-made frame.
  EXPECT_EQ(json({{"a", 1}}), MustDecode(Stored(RawZstdFrame(std::string("\x81\xa1\x61\x01", 4)))));
  // {"x": 1.5 (float64), "neg": -3, "s": "é"}
  const std::string packed = std::string("\x83\xa1x\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 12) +
                             "\xa3neg\xfd" + "\xa1s\xa2\xc3\xa9";
  json got = MustDecode(Stored(RawZstdFrame(packed)));
  EXPECT_EQ(1.5, got["x"].get<double>());
  EXPECT_TRUE(got["x"].is_number_float());
  EXPECT_EQ(-3, got["neg"].get<int64_t>());
  EXPECT_EQ("\xc3\xa9", got["s"].get<std::string>());
}

TEST(BodyCodecTest, RoundTripKeepsTypesAndValues) {
  json body = {
      {"int", -5},
      {"zero", 0},
      {"int64_min", std::numeric_limits<int64_t>::min()},
      {"int64_max", std::numeric_limits<int64_t>::max()},
      {"uint64_max", std::numeric_limits<uint64_t>::max()},
      {"beyond_double", int64_t{9007199254740993}},  // 2^53 + 1: not exact as a double
      {"float", 0.1},
      {"float_whole", 3.0},
      {"neg_zero", -0.0},
      {"tiny", 5e-324},
      {"huge", 1.7976931348623157e308},
      {"t", true},
      {"f", false},
      {"null", nullptr},
      {"empty_string", ""},
      {"empty_array", json::array()},
      {"empty_object", json::object()},
      {"unicode", "日本語 — Ünïcödé ☃ 😀 e\u0301 עברית"},
      {"日本", {{"ключ", "значение"}}},
      {std::string("k\0ey", 4), std::string("a\0b\0", 4)},
      {"escapes", "quote\" backslash\\ newline\n tab\t ctl\x01"},
      {"nested", {{"a", {1, 2.5, "x", {{"b", {nullptr, true}}}}}}},
  };
  const std::string enc = EncodeBody(body);
  Result<json> dec = DecodeBody(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const json& d = *dec;
  EXPECT_EQ(body, d);
  EXPECT_EQ(body.size(), d.size());
  EXPECT_EQ(std::numeric_limits<int64_t>::min(), d["int64_min"].get<int64_t>());
  EXPECT_EQ(std::numeric_limits<int64_t>::max(), d["int64_max"].get<int64_t>());
  EXPECT_TRUE(d["uint64_max"].is_number_unsigned());
  EXPECT_EQ(std::numeric_limits<uint64_t>::max(), d["uint64_max"].get<uint64_t>());
  EXPECT_TRUE(d["beyond_double"].is_number_integer());
  EXPECT_EQ(9007199254740993, d["beyond_double"].get<int64_t>());
  EXPECT_TRUE(d["int"].is_number_integer());
  EXPECT_EQ(-5, d["int"].get<int64_t>());
  EXPECT_TRUE(d["float"].is_number_float());
  EXPECT_EQ(0.1, d["float"].get<double>());
  EXPECT_TRUE(d["float_whole"].is_number_float()) << "3.0 must stay a float, not become 3";
  EXPECT_TRUE(d["neg_zero"].is_number_float());
  EXPECT_TRUE(std::signbit(d["neg_zero"].get<double>()));
  EXPECT_EQ(5e-324, d["tiny"].get<double>());
  EXPECT_EQ(1.7976931348623157e308, d["huge"].get<double>());
  EXPECT_TRUE(d["null"].is_null());
  EXPECT_EQ(std::string("a\0b\0", 4), d[std::string("k\0ey", 4)].get<std::string>());
  EXPECT_EQ(body["unicode"], d["unicode"]);
  EXPECT_EQ(body.dump(), d.dump());
}

TEST(BodyCodecTest, DeepNestingAndLargeBodies) {
  json deep = json::object();
  json* cur = &deep;
  // As deep as a body may be (kMaxBodyDepth): the arrays add two levels.
  for (int i = 0; i < kMaxBodyDepth - 2; ++i) {
    (*cur)["level"] = i;
    (*cur)["arr"] = json::array({i, json::array({i})});
    (*cur)["child"] = json::object();
    cur = &(*cur)["child"];
  }
  ASSERT_EQ(kMaxBodyDepth, JsonDepth(deep));
  EXPECT_EQ(deep, MustDecode(EncodeBody(deep)));

  // A large, repetitive (realistic) body compresses well; a random one round-trips.
  json trip = {{"rider", "r-123"}, {"events", json::array()}};
  for (int i = 0; i < 5000; ++i)
    trip["events"].push_back({{"t", 1700000000 + i}, {"lat", 52.52 + i * 1e-5}, {"kind", "gps"}});
  const std::string enc = EncodeBody(trip);
  EXPECT_LT(enc.size() * 3, trip.dump().size())
      << "compressed " << enc.size() << " of " << trip.dump().size();
  EXPECT_EQ(trip, MustDecode(enc));

  std::mt19937 rng(7);
  std::string noise(1 << 20, '\0');
  for (char& c : noise) c = static_cast<char>(rng());  // any bytes, including invalid UTF-8
  json random = {{"noise", noise}};
  EXPECT_EQ(noise, MustDecode(EncodeBody(random))["noise"].get<std::string>());
}

// ValidateWrite checks limits.max_body_bytes against the MessagePack size times
// kMaxJsonBytesPerMsgpackByte and only dumps bodies that may be over: the
// bound must hold for every body, including the worst cases.
double JsonPerMsgpackByte(const json& body) {
  const size_t text = body.dump(-1, ' ', false, json::error_handler_t::replace).size();
  return static_cast<double>(text) / static_cast<double>(json::to_msgpack(body).size());
}

json RandomJson(std::mt19937& rng, int depth) {
  switch (depth > 3 ? rng() % 7 : rng() % 9) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng()) - (1ll << 31);
    case 3:
      return -static_cast<int64_t>(rng() % 33);  // negative fixint
    case 4:
      return std::ldexp(1.0, -static_cast<int>(rng() % 160));  // floats, float32 subnormals
    case 5: {
      std::string s(rng() % 4, '\0');
      for (char& c : s)
        c = static_cast<char>(rng() % 3 == 0 ? rng() % 32 : rng());  // control, invalid
      return s;
    }
    case 6:
      return "";
    case 7: {
      json a = json::array();
      for (int i = static_cast<int>(rng() % 5); i > 0; --i) a.push_back(RandomJson(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = static_cast<int>(rng() % 5); i > 0; --i)
        o[std::string(1, static_cast<char>(rng() % 32))] = RandomJson(rng, depth + 1);
      return o;
    }
  }
}

TEST(BodyCodecTest, CompactJsonIsAtMostSixBytesPerMessagePackByte) {
  const double bound = static_cast<double>(kMaxJsonBytesPerMsgpackByte);
  // The worst cases: 6 chars per byte, approached as they grow.
  EXPECT_GT(JsonPerMsgpackByte(json(std::vector<bool>(10000, false))), 5.99);
  EXPECT_GT(JsonPerMsgpackByte(json(std::string(10000, '\x01'))), 5.99);
  const std::vector<json> edge_cases = {
      json(std::vector<bool>(10000, false)),
      json(std::string(10000, '\x01')),
      json(std::string(3, '\x1f')),
      json(std::string(5000, '\xff')),  // invalid UTF-8: each byte dumps as U+FFFD
      json::array({json::array(), json::array(), json::object()}),
      json::object({{std::string(1, '\x01'), false}, {"", nullptr}}),
      json(std::vector<json>(100, json(std::ldexp(1.0, -149)))),  // float32 subnormal
      json(std::vector<json>(100, json(-1.2345678901234567e-300))),
      json(std::vector<json>(100, json(int64_t{-32}))),
      json(std::vector<json>(100, json(std::numeric_limits<int64_t>::min()))),
      json(std::vector<json>(100, json(""))),
  };
  for (const json& body : edge_cases)
    EXPECT_LE(JsonPerMsgpackByte(body), bound)
        << body.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 80);
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) {
    const json body = RandomJson(rng, 0);
    ASSERT_LE(JsonPerMsgpackByte(body), bound)
        << body.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

TEST(BodyCodecTest, PackedEncodingMatchesAndIsSafeFromManyThreads) {
  std::mt19937 rng(5);
  std::vector<json> bodies;
  for (int i = 0; i < 64; ++i) bodies.push_back({{"i", i}, {"v", RandomJson(rng, 1)}});
  bodies.push_back({{"big", std::string(4000, 'x')}});  // compressed
  for (const json& b : bodies) {
    const EncodedBody measured = EncodeBodyMeasured(b);
    const std::vector<uint8_t> packed = json::to_msgpack(b);
    EXPECT_EQ(packed.size(), measured.msgpack_bytes);
    if (packed.size() < kCompressFromBytes)  // format 0x02: the MessagePack itself
      EXPECT_EQ(std::string(1, '\x02') + std::string(packed.begin(), packed.end()),
                measured.stored);
    else
      EXPECT_EQ('\x01', measured.stored[0]);
    auto decoded = DecodeBody(measured.stored);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(b, *decoded);
  }
  // Each thread reuses its own zstd context: interleaved calls stay correct.
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        const json& b = bodies[(t * 7 + round) % bodies.size()];
        Result<json> back = DecodeBody(EncodeBody(b));
        if (!back.ok() || *back != b) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(0, wrong.load());
}

TEST(BodyCodecTest, EncodingIsDeterministicAndIndependentOfInsertionOrder) {
  json a = json::object();
  a["z"] = 1;
  a["a"] = {{"y", 2}, {"b", 3}};
  a["m"] = "x";
  json b = json::object();
  b["m"] = "x";
  b["a"] = {{"b", 3}, {"y", 2}};
  b["z"] = 1;
  EXPECT_EQ(EncodeBody(a), EncodeBody(b));
  EXPECT_EQ(EncodeBody(a), EncodeBody(a));
  EXPECT_NE(EncodeBody(a), EncodeBody(json{{"z", 2}}));
  // Any JSON value can be encoded (the object rule is the store's, not the codec's).
  for (const json& v : {json::array({1, 2}), json("s"), json(5), json(nullptr), json(1.25)})
    EXPECT_EQ(v, MustDecode(EncodeBody(v))) << v.dump();
}

void ExpectInvalid(const std::string& stored, const std::string& what) {
  Result<json> r(json{});
  ASSERT_NO_THROW(r = DecodeBody(stored));
  ASSERT_FALSE(r.ok()) << "decoded to " << r->dump();
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
  EXPECT_THAT(r.status().message(), HasSubstr(what));
}

TEST(BodyCodecTest, CorruptInputIsInvalidArgumentNamingTheProblem) {
  ExpectInvalid("", "stored body is empty");
  ExpectInvalid(std::string("\x03", 1) + RawZstdFrame("\x80"), "unknown format byte 3");
  ExpectInvalid(std::string("\x02\x81\xa1", 3), "not valid MessagePack");
  // 200 nested one-element arrays (0x91) around nil, stored plain.
  ExpectInvalid("\x02" + std::string(200, '\x91') + "\xc0", "nests deeper than 100");
  ExpectInvalid("{\"a\":1}", "unknown format byte 123");
  ExpectInvalid(std::string("\x00\x01", 2), "unknown format byte 0");
  ExpectInvalid("\x01", "not a zstd frame");
  ExpectInvalid("\x01hello world", "not a zstd frame");
  // A frame that does not declare its size: window descriptor, no content size.
  ExpectInvalid(Stored(std::string("\x28\xb5\x2f\xfd\x00\x00\x01\x00\x00", 9)),
                "not a zstd frame with a known size");
  // A frame that claims to decode to 300 MiB (zip-bomb guard), without the data.
  std::string bomb("\x28\xb5\x2f\xfd\xe0", 5);
  const uint64_t claimed = 300ull << 20;
  for (int i = 0; i < 8; ++i) bomb.push_back(static_cast<char>((claimed >> (8 * i)) & 0xff));
  bomb += std::string("\x01\x00\x00", 3);
  ExpectInvalid(Stored(bomb), "more than 256 MiB");
  // Declared size differs from the data.
  ExpectInvalid(Stored(RawZstdFrame(std::string("\x81\xa1\x61\x01", 4), 10)), "corrupt zstd frame");
  // A real frame cut short.
  json big = {{"s", std::string(5000, 'x') + "tail"}, {"n", 1}};
  std::string enc = EncodeBody(big);
  ExpectInvalid(enc.substr(0, enc.size() - 3), "corrupt zstd frame");
  // Valid frames whose content is not (exactly one) MessagePack value.
  ExpectInvalid(Stored(RawZstdFrame("\xc1")), "not valid MessagePack");  // 0xc1 is never used
  ExpectInvalid(Stored(RawZstdFrame("\x81\xa1\x61")), "not valid MessagePack");  // truncated
  ExpectInvalid(Stored(RawZstdFrame(std::string("\x81\xa1\x61\x01\x00", 5))),
                "not valid MessagePack");  // trailing byte
  ExpectInvalid(Stored(RawZstdFrame("")), "not valid MessagePack");
}

TEST(BodyCodecTest, RandomCorruptionNeverThrows) {
  std::mt19937 rng(1234);
  json body = {{"name", "trip"}, {"values", json::array()}};
  for (int i = 0; i < 300; ++i) body["values"].push_back({{"i", i}, {"s", std::to_string(i * 7)}});
  const std::string good = EncodeBody(body);
  ASSERT_GT(good.size(), 64u);
  int errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Past the frame header (<= 18 bytes): a corrupted declared size could
      // legitimately ask for up to 256 MiB of memory.
      const size_t pos = 20 + rng() % (bad.size() - 20);
      bad[pos] = static_cast<char>(rng());
    }
    if (iter % 3 == 0) bad.resize(20 + rng() % (bad.size() - 20));
    Result<json> r(json{});
    ASSERT_NO_THROW(r = DecodeBody(bad)) << "iteration " << iter;
    if (!r.ok()) {
      ++errors;
      EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code()) << r.status().ToString();
    }
  }
  EXPECT_GT(errors, 1000) << "most corruptions must be detected";
  // Random garbage behind the format byte.
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bad(1 + rng() % 64, '\0');
    for (char& c : bad) c = static_cast<char>(rng());
    bad[0] = '\x01';
    Result<json> r(json{});
    ASSERT_NO_THROW(r = DecodeBody(bad));
  }
}

// ---------------------------------------------------------------------------
// Cell helpers

TEST(CellTest, AddressAndJsonShape) {
  const Uuid row = U("123e4567-e89b-12d3-a456-426614174000");
  EXPECT_EQ("trips/123e4567-e89b-12d3-a456-426614174000/BASE/3",
            CellAddress("trips", row, "BASE", 3));
  Cell c;
  c.row_key = row;
  c.column = "STATUS";
  c.ref_key = 9;
  c.body = {{"a", 1}};
  c.created_at = 1795312714123456;
  c.shard = 5;
  c.added_id = 77;
  EXPECT_EQ("users/123e4567-e89b-12d3-a456-426614174000/STATUS/9", c.Address("users"));
  const json j = CellToJson(c);
  EXPECT_EQ("123e4567-e89b-12d3-a456-426614174000", j["row_key"]);
  EXPECT_EQ("STATUS", j["column"]);
  EXPECT_EQ(9, j["ref_key"]);
  EXPECT_EQ(json({{"a", 1}}), j["body"]);
  EXPECT_EQ(false, j["tombstone"]);
  EXPECT_EQ("2026-11-22T01:58:34.123456Z", j["created_at"]);
  EXPECT_EQ(5, j["shard"]);
  EXPECT_EQ(77, j["added_id"]);
}
}  // namespace
}  // namespace cellar

namespace cellar {
namespace {

// Found by the body codec fuzzer: nesting ~20,000 deep overflowed the stack in
// the recursive MessagePack reader. Decoding refuses anything deeper than the
// limit before that reader runs (writes refuse it too: cells_bad_input_test).
TEST(BodyCodecTest, DeeplyNestedStoredBodyIsRejectedNotACrash) {
  nlohmann::json deep = nullptr;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::json::array({std::move(deep)});
  auto r = DecodeBody(EncodeBody(deep));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("deeper than"));
}

TEST(BodyCodecTest, DepthLimitIsExact) {
  nlohmann::json deep = nlohmann::json::object();
  for (int i = 1; i < kMaxBodyDepth; ++i) deep = nlohmann::json{{"a", deep}};
  EXPECT_EQ(JsonDepth(deep), kMaxBodyDepth);
  auto ok = DecodeBody(EncodeBody(deep));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, deep);
  nlohmann::json deeper = nlohmann::json::array({deep});
  EXPECT_EQ(JsonDepth(deeper), kMaxBodyDepth + 1);
  EXPECT_FALSE(DecodeBody(EncodeBody(deeper)).ok());
  EXPECT_EQ(JsonDepth(nlohmann::json(3)), 0);
  EXPECT_EQ(JsonDepth(nlohmann::json::object()), 1);
  // Far deeper input is counted only to the limit, and a deep branch is found
  // beside shallow ones.
  nlohmann::json far = nlohmann::json::array();
  // Moved in, not copied: copying a 5,000-deep value recurses once per level
  // (nlohmann's copy constructor), which overflows the stack under ASan.
  for (int i = 0; i < 5000; ++i) {
    nlohmann::json outer = nlohmann::json::array();
    outer.push_back(std::move(far));
    far = std::move(outer);
  }
  EXPECT_EQ(JsonDepth(far), kMaxBodyDepth + 1);
  EXPECT_EQ(JsonDepth(nlohmann::json{{"x", 1}, {"y", {{"z", nlohmann::json::array({deep})}}}}),
            kMaxBodyDepth + 1);
  EXPECT_EQ(JsonDepth(nlohmann::json{{"x", 1}, {"y", {{"z", nlohmann::json::array({1})}}}}), 3);
}

}  // namespace
}  // namespace cellar
