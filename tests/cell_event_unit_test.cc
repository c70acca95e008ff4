// Unit tests of the change-log event's JSON (changelog/cell_event.h): the
// relay encodes events directly, and the bytes must stay those of the JSON
// document encoding every consumer already reads; DecodeCellEvent returns
// every field and names a bad one; DecodeCellEventAsPublished reads the same
// envelope without the body. Part of the changelog_unit_test binary.
#include <cstdint>
#include <string>

#include "changelog/cell_event.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cell_event_testing.h"

namespace cellar {
namespace {

TEST(CellEventEncodingTest, DirectEncodingIsByteIdenticalToTheDocumentEncoding) {
  Cell c = EventCell(18'446'744'073'709'551'000ULL);
  const nlohmann::json bodies[] = {
      {{"city", "SF"}, {"fare", {{"total", 9.5}, {"items", {1, 2, 3}}}}},
      {{"quote\"back\\slash\nline", "caf\u00e9 \x01"}, {"z", nullptr}, {"a", true}},
      nlohmann::json::object(),
      {{"bad_utf8", std::string("\xff\xfe")}},
  };
  for (const std::string& datastore : {std::string("trips"), std::string("d\"s\u00e9")}) {
    for (const std::string& column : {std::string("BASE"), std::string("c\\ol\t")}) {
      c.column = column;
      for (const auto& body : bodies) {
        c.body = body;
        for (bool tombstone : {false, true}) {
          c.tombstone = tombstone;
          for (int64_t max : {INT64_C(-1), INT64_C(10), INT64_MAX}) {
            SCOPED_TRACE(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                         " tombstone " + std::to_string(tombstone) + " max " + std::to_string(max));
            const std::string direct = EncodeCellEvent(datastore, c, max);
            EXPECT_EQ(direct, EncodeCellEventViaDocument(datastore, c, max));
            // The relay's way: the body already printed (HostLogPage::body_texts).
            const std::string text =
                tombstone ? ""
                          : body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
            EXPECT_EQ(direct, EncodeCellEvent(datastore, c, text, max));
            auto back = DecodeCellEvent(direct);
            ASSERT_TRUE(back.ok()) << back.status().ToString();
            EXPECT_EQ(back->cell.added_id, c.added_id);
          }
        }
      }
    }
  }
  c.ref_key = -1;  // not a valid cell, but the number must still encode the same
  EXPECT_EQ(EncodeCellEvent("trips", c, INT64_MAX),
            EncodeCellEventViaDocument("trips", c, INT64_MAX));
}

// Every field comes back (the body moved out of the parsed document, not
// copied), and a missing or mistyped field is an error naming it.
TEST(CellEventEncodingTest, DecodeReturnsEveryFieldAndNamesABadOne) {
  Cell c = EventCell(1042);
  c.body = {{"city", "SF"}, {"fare", {{"total", 9.5}}}};
  auto back = DecodeCellEvent(EncodeCellEvent("trips", c, INT64_MAX));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->datastore, "trips");
  EXPECT_EQ(back->cell.row_key, c.row_key);
  EXPECT_EQ(back->cell.column, "BASE");
  EXPECT_EQ(back->cell.ref_key, 3);
  EXPECT_EQ(back->cell.created_at, c.created_at);
  EXPECT_EQ(back->cell.shard, 7u);
  EXPECT_EQ(back->cell.added_id, 1042u);
  EXPECT_FALSE(back->cell.tombstone);
  EXPECT_EQ(back->cell.body, c.body);
  EXPECT_FALSE(back->body_omitted);
  auto omitted = DecodeCellEvent(EncodeCellEvent("trips", c, 5));
  ASSERT_TRUE(omitted.ok());
  EXPECT_TRUE(omitted->body_omitted);
  EXPECT_TRUE(omitted->cell.body.is_null());

  // Both decoders name the same bad field the same way.
  const nlohmann::json good = nlohmann::json::parse(EncodeCellEvent("trips", c, INT64_MAX));
  for (auto* decode : {&DecodeCellEvent, &DecodeCellEventAsPublished}) {
    for (const char* field : {"datastore", "shard", "added_id", "row_key", "column", "ref_key",
                              "created_at", "tombstone"}) {
      nlohmann::json missing = good, mistyped = good, nested = good;
      missing.erase(field);
      mistyped[field] = nlohmann::json::array();
      nested[field] = {{field, good[field]}};
      for (const auto& bad : {missing, mistyped, nested}) {
        auto r = decode(bad.dump());
        ASSERT_FALSE(r.ok()) << field << " in " << bad.dump();
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
        EXPECT_THAT(r.status().message(), ::testing::HasSubstr(std::string("'") + field + "'"));
      }
    }
    nlohmann::json negative_shard = good, float_ref_key = good, text_tombstone = good;
    negative_shard["shard"] = -7;
    float_ref_key["ref_key"] = 3.5;
    text_tombstone["tombstone"] = "false";
    for (const auto& bad : {negative_shard, float_ref_key, text_tombstone})
      EXPECT_FALSE(decode(bad.dump()).ok()) << bad.dump();
    nlohmann::json bad_key = good;
    bad_key["row_key"] = "not-a-uuid";
    EXPECT_FALSE(decode(bad_key.dump()).ok());
    for (const char* not_an_object :
         {"[1]", "not json", "1", "\"text\"", "", "{}{}", "{\"datastore\":\"trips\"", "[{}]"}) {
      auto r = decode(not_an_object);
      ASSERT_FALSE(r.ok()) << not_an_object;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << not_an_object;
    }
  }
}

// The envelope without the body: every field as DecodeCellEvent gives it,
// the body null and never parsed, and the record's text kept as published.
// Members of the body named like envelope fields are the body's, not the
// event's.
TEST(CellEventEncodingTest, DecodingAsPublishedKeepsTheTextAndSkipsTheBody) {
  Cell c = EventCell(1042);
  const nlohmann::json bodies[] = {
      {{"city", "SF"}, {"fare", {{"total", 9.5}, {"items", {1, 2, 3}}}}},
      {{"shard", "x"},
       {"datastore", 5},
       {"tombstone", "no"},
       {"body", {{"added_id", -1}, {"row_key", nullptr}}},
       {"list", {{{"column", 1}}, nlohmann::json::array(), 2.5}}},
      nlohmann::json::object(),
  };
  for (const auto& body : bodies) {
    c.body = body;
    for (bool tombstone : {false, true}) {
      c.tombstone = tombstone;
      for (int64_t max : {INT64_C(10), INT64_MAX}) {
        const std::string value = EncodeCellEvent("trips", c, max);
        SCOPED_TRACE(value);
        auto full = DecodeCellEvent(value);
        auto published = DecodeCellEventAsPublished(value);
        ASSERT_TRUE(full.ok()) << full.status().ToString();
        ASSERT_TRUE(published.ok()) << published.status().ToString();
        EXPECT_EQ(published->datastore, full->datastore);
        EXPECT_EQ(published->cell.row_key, full->cell.row_key);
        EXPECT_EQ(published->cell.column, full->cell.column);
        EXPECT_EQ(published->cell.ref_key, full->cell.ref_key);
        EXPECT_EQ(published->cell.created_at, full->cell.created_at);
        EXPECT_EQ(published->cell.shard, full->cell.shard);
        EXPECT_EQ(published->cell.added_id, full->cell.added_id);
        EXPECT_EQ(published->cell.tombstone, full->cell.tombstone);
        EXPECT_EQ(published->body_omitted, full->body_omitted);
        EXPECT_TRUE(published->cell.body.is_null());
        EXPECT_EQ(published->published_json, value);
        EXPECT_TRUE(full->published_json.empty());
      }
    }
  }
}

}  // namespace
}  // namespace cellar
