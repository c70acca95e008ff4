// Malformed requests: each is a clear InvalidArgument naming what was wrong,
// and nothing is written (every shard head of every datastore is unchanged).
// Also: bodies are binary safe (NUL inside strings, ~900 KB bodies).
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/private_mariadb.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"
#include "testing/test_cluster.h"

namespace cellar {

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr uint32_t kShards = 4;
constexpr int kSmallBodyLimit = 1000;
constexpr int kSmallBatchLimit = 5;

// The shared store, plus the same cluster with small limits, from YAML.
class BadInputEnv : public testing::StoreEnvironment {
 public:
  BadInputEnv() : StoreEnvironment({"badinput"}, kShards) {}
  void SetUp() override {
    StoreEnvironment::SetUp();
    if (!store) return;
    const std::string yaml = testing::MakeClusterYaml({dbs[0].get()}, kShards) +
                             "limits:\n  max_body_bytes: " + std::to_string(kSmallBodyLimit) +
                             "\n  max_batch_cells: " + std::to_string(kSmallBatchLimit) + "\n";
    Result<ClusterConfig> small = ParseClusterConfig(yaml, "small.yaml");
    ASSERT_TRUE(small.ok()) << small.status().ToString();
    small_store = CellStore::Open(*small);
  }
  void TearDown() override {
    small_store.reset();
    StoreEnvironment::TearDown();
  }

  std::unique_ptr<CellStore> small_store;
};

BadInputEnv* const env =
    static_cast<BadInputEnv*>(::testing::AddGlobalTestEnvironment(new BadInputEnv));

const char* const kInjection = "BASE'; DROP TABLE x; --";

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(nullptr, env->store) << "the MariaDB server did not start";
    store_ = env->store.get();
    heads_ = AllHeads();
    tables_ = HostTables();
    ASSERT_THAT(tables_, HasSubstr("cells_trips"));
    ASSERT_THAT(tables_, HasSubstr("cells_users"));
  }

  // Nothing was written: every shard head of both datastores is unchanged,
  // and the host database has the same tables as before.
  void TearDown() override {
    if (!expect_nothing_written_ || !store_) return;
    EXPECT_EQ(heads_, AllHeads()) << "a rejected request wrote something";
    EXPECT_EQ(tables_, HostTables()) << "a table disappeared or appeared";
  }

  // The tables of the (one) host database, sorted, comma-separated.
  static std::string HostTables() {
    std::string out;
    EXPECT_TRUE(env->dbs[0]->Execute(
        "SELECT GROUP_CONCAT(table_name ORDER BY table_name) FROM information_schema.tables"
        " WHERE table_schema = '" +
            env->config.HostDatabase(env->config.mysql.hosts[0]) + "'",
        &out));
    return out;
  }

  std::vector<uint64_t> AllHeads() {
    std::vector<uint64_t> heads;
    for (const char* ds : {"trips", "users"})
      for (uint32_t s = 0; s < kShards; ++s) {
        Result<uint64_t> h = store_->ShardHead(ds, s);
        EXPECT_TRUE(h.ok()) << h.status().ToString();
        heads.push_back(h.ok() ? *h : ~0ull);
      }
    return heads;
  }

  template <typename T>
  static void ExpectInvalid(const Result<T>& r, const std::string& what,
                            const std::string& also = "") {
    ASSERT_FALSE(r.ok()) << "accepted; wanted an error about " << what;
    EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code()) << r.status().ToString();
    EXPECT_THAT(r.status().message(), HasSubstr(what));
    if (!also.empty()) {
      EXPECT_THAT(r.status().message(), HasSubstr(also));
    }
  }

  // Put, and put_batch of the same cell alone, are both rejected.
  void ExpectWriteRejected(CellStore* store, const std::string& ds, const CellWrite& w,
                           const std::string& what, const std::string& also = "") {
    ExpectInvalid(store->Put(ds, w), what, also);
    std::vector<Result<PutResult>> batch = store->PutBatch(ds, {w});
    ASSERT_EQ(1u, batch.size());
    ExpectInvalid(batch[0], what, also);
  }

  CellStore* store_ = nullptr;
  std::vector<uint64_t> heads_;
  std::string tables_;
  bool expect_nothing_written_ = true;
};

TEST_F(BadInputTest, NonObjectBodies) {
  const Uuid row = Uuid::Random();
  const std::vector<std::pair<json, std::string>> bodies = {
      {json::array({1, 2}), "array"}, {json("trip"), "string"}, {json(5), "number"},
      {json(2.5), "number"},          {json(nullptr), "null"},  {json(true), "boolean"},
  };
  for (const auto& [body, type] : bodies) {
    SCOPED_TRACE(body.dump());
    ExpectWriteRejected(store_, "trips", {row, "BASE", 0, body},
                        "body must be a JSON object, got " + type,
                        CellAddress("trips", row, "BASE", 0));
  }
}

TEST_F(BadInputTest, InvalidUuids) {
  for (const std::string& text : std::vector<std::string>{
           "", "not-a-uuid", "123e4567-e89b-12d3-a456-42661417400",
           "123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400z",
           "'; DROP TABLE cells_trips; --   aaaaaaaaa",
           std::string("123e4567-e89b-12d3-a456-4266141740\0"
                       "0",
                       36)}) {
    Result<Uuid> u = Uuid::Parse(text);
    ExpectInvalid(u, "invalid UUID '" + text.substr(0, 64) + "'");
  }
}

TEST_F(BadInputTest, NegativeRefKey) {
  const Uuid row = Uuid::Random();
  for (int64_t ref : {int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    ExpectWriteRejected(store_, "trips", {row, "BASE", ref, {{"a", 1}}},
                        "ref_key must be >= 0, got " + std::to_string(ref),
                        CellAddress("trips", row, "BASE", ref));
    ExpectInvalid(store_->Get("trips", row, "BASE", ref), "ref_key must be >= 0");
  }
}

TEST_F(BadInputTest, UnknownDatastoreOrColumn) {
  const Uuid row = Uuid::Random();
  for (const std::string ds : {"nope", "Trips", "trips ", ""}) {
    SCOPED_TRACE("datastore '" + ds + "'");
    const std::string what = "unknown datastore '" + ds + "'";
    ExpectWriteRejected(store_, ds, {row, "BASE", 0, {{"a", 1}}}, what);
    ExpectInvalid(store_->Get(ds, row, "BASE", 0), what);
    ExpectInvalid(store_->Latest(ds, row, "BASE"), what);
    ExpectInvalid(store_->Row(ds, row), what);
    ExpectInvalid(store_->Versions(ds, row, "BASE", VersionQuery{}), what);
    ExpectInvalid(store_->Erase(ds, row, "BASE"), what);
    ExpectInvalid(store_->ShardLog(ds, 0, 0, 10), what);
    ExpectInvalid(store_->ShardHead(ds, 0), what);
    ExpectInvalid(store_->HostLog(ds, 0, 0, 10), what);
    ExpectInvalid(store_->HostHead(ds, 0), what);
    ExpectInvalid(store_->Purge(ds), what);
  }
  // Columns are per datastore and case-sensitive.
  for (const std::string col : {"NOPE", "base", "PROFILE", "", "BASE "}) {
    SCOPED_TRACE("column '" + col + "'");
    const std::string what = "unknown column '" + col + "' in datastore 'trips'";
    ExpectWriteRejected(store_, "trips", {row, col, 0, {{"a", 1}}}, what);
    ExpectInvalid(store_->Get("trips", row, col, 0), what);
    ExpectInvalid(store_->Latest("trips", row, col), what);
    ExpectInvalid(store_->Versions("trips", row, col, VersionQuery{}), what);
    ExpectInvalid(store_->Erase("trips", row, col), what);
  }
}

TEST_F(BadInputTest, NamesWithQuotesAndSemicolons) {
  const Uuid row = Uuid::Random();
  const std::vector<std::string> names = {kInjection,
                                          "trips'; DROP TABLE x; --",
                                          "trips`; DROP TABLE x; --",
                                          "trips\"",
                                          "cells_trips",
                                          "trips;",
                                          std::string("trips\0x", 7),
                                          "trips/../users"};
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    // As a datastore name.
    const std::string ds_what = "unknown datastore '" + name + "'";
    ExpectWriteRejected(store_, name, {row, "BASE", 0, {{"a", 1}}}, ds_what);
    ExpectInvalid(store_->Get(name, row, "BASE", 0), ds_what);
    ExpectInvalid(store_->Versions(name, row, "BASE", VersionQuery{}), ds_what);
    ExpectInvalid(store_->Erase(name, row, "BASE"), ds_what);
    ExpectInvalid(store_->ShardLog(name, 0, 0, 10), ds_what);
    ExpectInvalid(store_->Purge(name), ds_what);
    // As a column name.
    const std::string col_what = "unknown column '" + name + "' in datastore 'trips'";
    ExpectWriteRejected(store_, "trips", {row, name, 0, {{"a", 1}}}, col_what);
    ExpectInvalid(store_->Get("trips", row, name, 0), col_what);
    ExpectInvalid(store_->Latest("trips", row, name), col_what);
    ExpectInvalid(store_->Erase("trips", row, name), col_what);
  }
  // A very long name is shown shortened.
  Result<PutResult> r = store_->Put(std::string(100000, 'x') + kInjection, {row, "BASE", 0, {}});
  ExpectInvalid(r, "unknown datastore 'xxxx");
  EXPECT_LT(r.status().message().size(), 1000u);
  // Quotes and SQL inside the body or keys are just data (checked by the
  // binary-safety test); the table still exists.
}

TEST_F(BadInputTest, TwentyMegabyteBodyOverDefaultLimit) {
  const Uuid row = Uuid::Random();
  ASSERT_EQ(1 << 20, env->config.limits.max_body_bytes);
  const json body = {{"blob", std::string(20 << 20, 'x')}};
  const size_t size = body.dump().size();
  ExpectWriteRejected(store_, "trips", {row, "BASE", 0, body},
                      "body is " + std::to_string(size) +
                          " bytes, over the limit of 1048576 bytes (limits.max_body_bytes)",
                      CellAddress("trips", row, "BASE", 0));
  // One byte over the limit is rejected as well.
  const json over = {{"s", std::string((1 << 20) - 8 + 1, 'y')}};
  ASSERT_EQ(static_cast<size_t>((1 << 20) + 1), over.dump().size());
  ExpectWriteRejected(store_, "trips", {row, "BASE", 1, over},
                      "body is 1048577 bytes, over the limit of 1048576 bytes");
}

// Bodies nested ~20,000 deep overflowed the stack in the codec; the store
// refuses anything deeper than kMaxBodyDepth (1,000 here: deep enough to prove
// the limit, shallow enough for nlohmann's recursive copy in this test).
TEST_F(BadInputTest, BodyNestedTooDeep) {
  const Uuid row = Uuid::Random();
  json deep = json::object();
  json* cur = &deep;
  for (int i = 0; i < 1000; ++i) cur = &((*cur)["a"] = json::object());
  ExpectWriteRejected(store_, "trips", {row, "BASE", 0, deep}, "body nests deeper than 100 levels",
                      CellAddress("trips", row, "BASE", 0));
}

TEST_F(BadInputTest, ConfiguredSmallerBodyLimit) {
  CellStore* small = env->small_store.get();
  ASSERT_NE(nullptr, small);
  const Uuid row = Uuid::Random();
  // {"s":"<n>"} is n + 8 bytes of compact JSON.
  const json over = {{"s", std::string(kSmallBodyLimit - 8 + 1, 'a')}};
  ASSERT_EQ(static_cast<size_t>(kSmallBodyLimit + 1), over.dump().size());
  ExpectWriteRejected(small, "trips", {row, "BASE", 0, over},
                      "body is 1001 bytes, over the limit of 1000 bytes (limits.max_body_bytes)");
  // Multi-byte characters count as bytes.
  std::string euros;
  for (int i = 0; i < 400; ++i) euros += "\xe2\x82\xac";  // 1200 bytes
  ExpectWriteRejected(small, "trips", {row, "BASE", 0, {{"e", euros}}},
                      "body is 1208 bytes, over the limit of 1000 bytes");
  EXPECT_EQ(heads_, AllHeads());
  expect_nothing_written_ = false;
  // The default store takes the same cell.
  EXPECT_TRUE(store_->Put("trips", {row, "BASE", 0, over}).ok());
  // Exactly at the limit is accepted.
  const json at = {{"s", std::string(kSmallBodyLimit - 8, 'a')}};
  Result<PutResult> ok = small->Put("trips", {row, "BASE", 1, at});
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(BadInputTest, PutBatchOverMaxBatchCells) {
  CellStore* small = env->small_store.get();
  ASSERT_NE(nullptr, small);
  std::vector<CellWrite> cells;
  for (int i = 0; i <= kSmallBatchLimit; ++i)
    cells.push_back({Uuid::Random(), "BASE", 0, {{"i", i}}});
  std::vector<Result<PutResult>> r = small->PutBatch("trips", cells);
  ASSERT_EQ(cells.size(), r.size());
  for (const auto& x : r)
    ExpectInvalid(x, "batch has 6 cells, over the limit of 5 (limits.max_batch_cells)");

  // The default limit (1000) too.
  std::vector<CellWrite> many;
  const Uuid row = Uuid::Random();
  for (int i = 0; i < 1001; ++i) many.push_back({row, "BASE", i, {{"i", i}}});
  r = store_->PutBatch("trips", many);
  ASSERT_EQ(many.size(), r.size());
  for (const auto& x : r)
    ExpectInvalid(x, "batch has 1001 cells, over the limit of 1000 (limits.max_batch_cells)");
}

TEST_F(BadInputTest, InvalidCellInBatchRejectsItsRowOnly) {
  const Uuid bad_row = Uuid::Random();
  const Uuid good_row = Uuid::Random();
  std::vector<CellWrite> batch = {
      {bad_row, "BASE", 0, {{"ok", 1}}},
      {good_row, "BASE", 0, {{"ok", 2}}},
      {bad_row, "STATUS", -3, {{"ok", 3}}},   // invalid
      {bad_row, "STATUS", 1, json::array()},  // invalid too
  };
  std::vector<Result<PutResult>> r = store_->PutBatch("trips", batch);
  ASSERT_EQ(4u, r.size());
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(StatusCode::kAborted, r[0].status().code()) << r[0].status().ToString();
  EXPECT_THAT(r[0].status().message(), HasSubstr(bad_row.ToString()));
  ASSERT_TRUE(r[1].ok()) << r[1].status().ToString();
  EXPECT_TRUE(r[1]->created);
  ExpectInvalid(r[2], "ref_key must be >= 0, got -3");
  ExpectInvalid(r[3], "body must be a JSON object, got array");
  EXPECT_EQ(StatusCode::kNotFound, store_->Get("trips", bad_row, "BASE", 0).status().code());
  EXPECT_TRUE(store_->Get("trips", good_row, "BASE", 0).ok());
  expect_nothing_written_ = false;
  // Exactly the good row's cell was written.
  uint64_t grown = 0;
  const std::vector<uint64_t> now = AllHeads();
  for (size_t i = 0; i < now.size(); ++i) grown += now[i] != heads_[i];
  EXPECT_EQ(1u, grown);
}

TEST_F(BadInputTest, BadReadArguments) {
  const Uuid row = Uuid::Random();
  VersionQuery q;
  q.limit = 0;
  ExpectInvalid(store_->Versions("trips", row, "BASE", q), "limit must be between 1 and 10000");
  q.limit = 10001;
  ExpectInvalid(store_->Versions("trips", row, "BASE", q), "got 10001");
  q = VersionQuery{};
  q.min_ref = 3;
  q.max_ref = 2;
  ExpectInvalid(store_->Versions("trips", row, "BASE", q), "min_ref 3 is above max_ref 2");
  ExpectInvalid(store_->ShardLog("trips", kShards, 0, 10), "shard 4 out of range");
  ExpectInvalid(store_->ShardLog("trips", 0, 0, 0), "limit must be between 1 and 10000, got 0");
  ExpectInvalid(store_->ShardLog("trips", 0, 0, 10001), "got 10001");
  ExpectInvalid(store_->ShardHead("trips", 99), "shard 99 out of range");
  ExpectInvalid(store_->HostLog("trips", 7, 0, 10), "host 7 out of range: the cluster has");
  ExpectInvalid(store_->HostLog("trips", 0, 0, 0), "limit must be between 1 and 10000, got 0");
  ExpectInvalid(store_->HostLog("trips", 0, 0, 10001), "got 10001");
  ExpectInvalid(store_->HostHead("trips", 7), "host 7 out of range");
}

// Bodies are bytes end to end: NUL characters inside strings and keys, SQL
// and quotes as data, every character class, and a ~900 KB body all survive
// the trip through MySQL unchanged.
TEST_F(BadInputTest, BodiesAreBinarySafe) {
  expect_nothing_written_ = false;
  const Uuid row = Uuid::Random();
  const json nul = {
      {"s", std::string("before\0after", 12)},
      {std::string("k\0ey", 4), std::string("\0", 1)},
      {"only_nuls", std::string(100, '\0')},
      {"sql", "'; DROP TABLE cells_trips; -- \" ` \\ \\0 \\x00"},
      {"unicode", "日本語 😀 \xc3\xa9 \u200b"},
      {"nested", {{"a", {std::string("x\0y", 3), 1, -2.5}}}},
  };
  ASSERT_TRUE(store_->Put("trips", {row, "BASE", 0, nul}).ok());
  Result<Cell> got = store_->Get("trips", row, "BASE", 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(nul, got->body);
  EXPECT_EQ(12u, got->body["s"].get<std::string>().size());
  EXPECT_EQ(std::string(100, '\0'), got->body["only_nuls"].get<std::string>());
  // A retry with the same NUL-laden body is recognised as identical.
  Result<PutResult> again = store_->Put("trips", {row, "BASE", 0, nul});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->created);
  // ...and a body differing only after a NUL is a different body.
  json differs = nul;
  differs["s"] = std::string("before\0AFTER", 12);
  EXPECT_EQ(StatusCode::kConflict, store_->Put("trips", {row, "BASE", 0, differs}).status().code());

  // ~900 KB (as compact JSON) of random, poorly compressible text: under the 1 MiB limit.
  std::mt19937 rng(5);
  std::string big;
  size_t json_size = 0;  // of `big` as a JSON string, escapes included
  while (json_size < 900 * 1024) {
    switch (rng() % 4) {
      case 0: {  // any ASCII, NUL and control characters included
        const char c = static_cast<char>(rng() % 128);
        big += c;
        json_size +=
            c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t'
                ? 2
                : (c < 0x20 ? 6 : 1);
        break;
      }
      case 1:
        big += "\xc3\xa9";
        json_size += 2;
        break;
      case 2:
        big += "\xf0\x9f\x98\x80";
        json_size += 4;
        break;
      default:
        big += static_cast<char>('a' + rng() % 26);
        json_size += 1;
    }
  }
  json large = {{"big", big}, {"n", 900}};
  const size_t size = large.dump().size();
  ASSERT_EQ(json_size + 18, size);  // {"big":"...","n":900}
  ASSERT_LE(size, 1u << 20);
  Result<PutResult> put = store_->Put("trips", {row, "STATUS", 0, large});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  Result<Cell> back = store_->Latest("trips", row, "STATUS");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(big.size(), back->body["big"].get<std::string>().size());
  EXPECT_TRUE(back->body["big"].get<std::string>() == big) << "900 KB body changed";
  // The shard log returns the same bytes.
  Result<ShardLogPage> page =
      store_->ShardLog("trips", ShardForRow(row, kShards), put->added_id - 1, 1);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(1u, page->cells.size());
  EXPECT_TRUE(page->cells[0].body == large);
}

}  // namespace
}  // namespace cellar
