// DecodeBodyToJsonText (cells/body_codec.h): the stored body printed as
// compact JSON straight from its MessagePack must be byte for byte what the
// decoded document's dump() prints, and fail exactly as DecodeBody fails.
// internal::MsgpackToJsonText is its fast path: it must print every body
// EncodeBody writes without the document, and hand everything else back.
// CellJsonText (cells/cell.h), the HTTP API's answer built around that text,
// must print what CellToJson's document prints.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cells/body_codec.h"
#include "cells/cell.h"
#include "cells/internal/msgpack_json_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"

namespace cellar {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::optional<std::string> FastPath(const std::string& plain_stored) {
  return internal::MsgpackToJsonText(std::string_view(plain_stored).substr(1));
}

std::optional<std::string> FastPath(const json& body) {
  const std::vector<uint8_t> packed = json::to_msgpack(body);
  return internal::MsgpackToJsonText(
      std::string_view(reinterpret_cast<const char*>(packed.data()), packed.size()));
}

// Both ways of reading `stored` as text, compared.
void ExpectSameText(const std::string& stored) {
  Result<json> doc = DecodeBody(stored);
  Result<std::string> text = DecodeBodyToJsonText(stored);
  ASSERT_EQ(doc.ok(), text.ok()) << (doc.ok() ? text.status() : doc.status()).ToString();
  if (doc.ok()) {
    EXPECT_EQ(*text, Dump(*doc));
  } else {
    EXPECT_EQ(text.status().code(), doc.status().code());
    EXPECT_EQ(text.status().message(), doc.status().message());
  }
}

std::string RandomString(std::mt19937_64& rng) {
  static const std::string pieces[] = {"a",
                                       "Z",
                                       "0",
                                       " ",
                                       "\"",
                                       "\\",
                                       "/",
                                       "\n",
                                       "\t",
                                       "\x01",
                                       "\x1f",
                                       "\x7f",
                                       "caf\xc3\xa9",
                                       "\xe2\x82\xac",
                                       "\xf0\x9f\x9a\x95",
                                       "\xff",
                                       "\xc3",
                                       "key",
                                       ""};
  std::string s;
  const int n = static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) s += pieces[rng() % std::size(pieces)];
  return s;
}

json RandomValue(std::mt19937_64& rng, int depth) {
  switch (rng() % (depth > 0 ? 10 : 7)) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2: {
      static const int64_t ints[] = {0,
                                     1,
                                     -1,
                                     127,
                                     128,
                                     -32,
                                     -33,
                                     65535,
                                     -65536,
                                     std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max()};
      return ints[rng() % std::size(ints)];
    }
    case 3:
      return std::numeric_limits<uint64_t>::max() - rng() % 3;
    case 4: {
      static const double doubles[] = {0.0,
                                       -0.0,
                                       1.0,
                                       0.1,
                                       -2.5,
                                       1e300,
                                       1e-300,
                                       123456789.125,
                                       std::numeric_limits<double>::infinity(),
                                       std::nan(""),
                                       std::numeric_limits<double>::min(),
                                       3.0e10};
      return doubles[rng() % std::size(doubles)];
    }
    case 5:
    case 6:
      return RandomString(rng);
    case 7:
    case 8: {
      json o = json::object();
      const int n = static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) o[RandomString(rng)] = RandomValue(rng, depth - 1);
      return o;
    }
    default: {
      json a = json::array();
      const int n = static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) a.push_back(RandomValue(rng, depth - 1));
      return a;
    }
  }
}

TEST(BodyJsonTextTest, PrintsWhatTheDocumentPrintsForEveryKindOfValue) {
  const json bodies[] = {
      json::object(),
      json::array(),
      {{"city", "SF"}, {"fare", {{"total", 9.5}, {"items", {1, 2, 3}}}}, {"n", nullptr}},
      {{"quote\"back\\slash\nline", "caf\u00e9 \x01"}, {"z", nullptr}, {"a", true}},
      {{"bad_utf8", std::string("\xff\xfe")}, {std::string("k\xff"), false}},
      {{"ints", {0, -1, std::numeric_limits<int64_t>::min(), std::numeric_limits<uint64_t>::max()}},
       {"floats", {1.0, -0.0, 0.1, 1e300, 2.5e-7}}},
      {{"empty", {{"o", json::object()}, {"a", json::array()}, {"s", ""}}}},
      {{"a", {{"b", {{"c", {json::array({json::object(), json::array()})}}}}}}},
      json(42),  // bodies are objects, but the codec takes any value
      json("just a string"),
  };
  for (const json& body : bodies) {
    SCOPED_TRACE(Dump(body));
    const std::string stored = EncodeBody(body);
    Result<std::string> text = DecodeBodyToJsonText(stored);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, Dump(body));
    EXPECT_EQ(FastPath(body), Dump(body));
    ExpectSameText(stored);
  }
}

TEST(BodyJsonTextTest, RandomBodiesPlainAndCompressedPrintTheSame) {
  std::mt19937_64 rng(20261127);
  int compressed = 0;
  for (int i = 0; i < 3000; ++i) {
    json body = json::object();
    const int fields = 1 + static_cast<int>(rng() % (i % 10 == 0 ? 200 : 12));
    for (int f = 0; f < fields; ++f)
      body[RandomString(rng) + std::to_string(f)] = RandomValue(rng, 4);
    const std::string stored = EncodeBody(body);
    if (stored[0] == '\x01') ++compressed;
    SCOPED_TRACE("body " + std::to_string(i) + ": " + Dump(body).substr(0, 200));
    Result<std::string> text = DecodeBodyToJsonText(stored);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    ASSERT_EQ(*text, Dump(body));
    // ...and without the document.
    std::optional<std::string> fast = FastPath(body);
    ASSERT_TRUE(fast.has_value());
    ASSERT_EQ(*fast, Dump(body));
  }
  EXPECT_GT(compressed, 50) << "the zstd path was not exercised";
}

TEST(BodyJsonTextTest, DepthLimitIsDecodeBodysLimit) {
  json deep = json::object();
  for (int i = 1; i < kMaxBodyDepth; ++i) deep = json{{"d", std::move(deep)}};
  ASSERT_EQ(JsonDepth(deep), kMaxBodyDepth);
  Result<std::string> text = DecodeBodyToJsonText(EncodeBody(deep));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, Dump(deep));
  EXPECT_EQ(FastPath(deep), Dump(deep));

  json deeper = json::array({std::move(deep)});
  Result<std::string> refused = DecodeBodyToJsonText(EncodeBody(deeper));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("nests deeper than 100 levels"));
  ExpectSameText(EncodeBody(deeper));
  EXPECT_EQ(FastPath(deeper), std::nullopt);
}

// MessagePack that EncodeBody never writes, but a stored body could hold:
// the document sorts keys and keeps the last of duplicates, and prints a
// binary value as an object; the text must follow it.
TEST(BodyJsonTextTest, UnsortedDuplicatedKeysAndBinaryFollowTheDocument) {
  auto plain = [](std::string msgpack) { return std::string(1, '\x02') + msgpack; };
  const std::string unsorted = plain(
      "\x82\xa1"
      "b\x01\xa1"
      "a\x02");  // {"b":1,"a":2}
  const std::string duplicated = plain(
      "\x82\xa1"
      "a\x01\xa1"
      "a\x02");  // {"a":1,"a":2}
  const std::string nested = plain(
      "\x81\xa1"
      "x\x82\xa1"
      "z\xc0\xa1"
      "y\xc3");  // {"x":{"z":null,"y":true}}
  const std::string binary = plain(
      "\x81\xa1"
      "b\xc4\x02\x01\x02");  // {"b":bin[1,2]}
  for (const std::string& stored : {unsorted, duplicated, nested, binary}) {
    ExpectSameText(stored);
    EXPECT_EQ(FastPath(stored), std::nullopt) << "the fast path cannot vouch for this order";
  }
  EXPECT_EQ(*DecodeBodyToJsonText(unsorted), "{\"a\":2,\"b\":1}");
  EXPECT_EQ(*DecodeBodyToJsonText(duplicated), "{\"a\":2}");
  EXPECT_EQ(*DecodeBodyToJsonText(nested), "{\"x\":{\"y\":true,\"z\":null}}");
}

TEST(BodyJsonTextTest, CorruptInputFailsAsDecodeBodyDoes) {
  const std::string good = EncodeBody(json{{"a", {1, 2, 3}}, {"s", "text"}});
  std::string big_body(4000, 'x');
  const std::string big = EncodeBody(json{{"big", big_body}});
  ASSERT_EQ(big[0], '\x01');
  std::string corrupt_frame = big;
  corrupt_frame[corrupt_frame.size() / 2] ^= 0x5a;
  const std::string cases[] = {
      "",                                   // empty
      "\x07xyz",                            // unknown format byte
      std::string(1, '\x01') + "not zstd",  // not a frame
      corrupt_frame,                        // a frame with a flipped byte
      good.substr(0, good.size() - 3),      // truncated MessagePack
      good + "\x01",                        // trailing bytes
      std::string(1, '\x02') + "\xc1",      // a byte MessagePack never uses
  };
  for (const std::string& stored : cases) {
    SCOPED_TRACE(std::to_string(stored.size()) + " bytes");
    EXPECT_FALSE(DecodeBodyToJsonText(stored).ok());
    ExpectSameText(stored);
  }
  // Random corruption of a valid body: never a throw, always DecodeBody's verdict.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f)
      bad[1 + rng() % (bad.size() - 1)] = static_cast<char>(rng() % 256);
    ASSERT_NO_THROW(ExpectSameText(bad)) << "iteration " << i;
  }
}

// Each thread reuses one zstd decompression context: a corrupt frame, a
// truncated one or a different body must leave nothing behind in it.
TEST(BodyJsonTextTest, CompressedBodiesDecodeAfterCorruptOnesOnEveryThread) {
  const json a = {{"a", std::string(3000, 'a')}, {"n", 1}};
  const json b = {{"b", std::string(5000, 'b')}, {"list", {1, 2, 3}}};
  const std::string stored_a = EncodeBody(a), stored_b = EncodeBody(b);
  ASSERT_EQ(stored_a[0], '\x01');
  ASSERT_EQ(stored_b[0], '\x01');
  std::string corrupt = stored_b;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  const std::string truncated = stored_a.substr(0, stored_a.size() - 5);
  auto decode_in_turn = [&] {
    for (int round = 0; round < 3; ++round) {
      ASSERT_EQ(*DecodeBody(stored_a), a);
      EXPECT_FALSE(DecodeBody(corrupt).ok());
      ASSERT_EQ(*DecodeBody(stored_b), b);
      EXPECT_FALSE(DecodeBodyToJsonText(truncated).ok());
      ASSERT_EQ(*DecodeBodyToJsonText(stored_a), a.dump());
    }
  };
  decode_in_turn();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(decode_in_turn);
  for (auto& t : threads) t.join();
}

TEST(CellJsonTextTest, PrintsWhatCellToJsonPrints) {
  Cell live;
  live.row_key = Uuid::Random();
  live.column = "BASE";
  live.ref_key = 7;
  live.body = {{"quote\"back\\slash\nline", "caf\u00e9 \x01"}, {"fare", 9.5}, {"n", nullptr}};
  live.created_at = 1764915600123456;  // 2025-12-05T06:20:00.123456Z
  live.shard = 63;
  live.added_id = 18446744073709551615u;
  Cell tombstone = live;
  tombstone.tombstone = true;
  tombstone.body = nullptr;
  tombstone.ref_key = std::numeric_limits<int64_t>::max();
  Cell odd = live;
  odd.column = "col\"umn\\\x7f\xff";  // not a valid column: the printing still escapes it
  odd.body = json::object();
  odd.created_at = 0;
  for (const Cell& cell : {live, tombstone, odd}) {
    SCOPED_TRACE(Dump(CellToJson(cell)));
    const std::string body_text = cell.body.is_null() ? "" : Dump(cell.body);
    EXPECT_EQ(CellJsonText(cell, body_text), Dump(CellToJson(cell)));
    const CellText text = ToCellText(cell);
    EXPECT_TRUE(text.cell.body.is_null());
    EXPECT_EQ(text.body_json, body_text);
    EXPECT_EQ(CellJsonText(text.cell, text.body_json), Dump(CellToJson(cell)));
  }
  const std::vector<Cell> cells = {live, tombstone, odd};
  json array = json::array();
  for (const Cell& cell : cells) array.push_back(CellToJson(cell));
  EXPECT_EQ(CellsJsonText(ToCellTexts(cells)), Dump(array));
  EXPECT_EQ(CellsJsonText({}), Dump(json::array()));
}

}  // namespace
}  // namespace cellar
