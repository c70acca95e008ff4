// The store contract (cells/cell_service.h), one typed suite run against its
// three implementations: the MySQL store (CellStore over a private MariaDB),
// the HTTP client (Client talking to a cellard process over the same
// servers) and the in-memory model (MemoryCellStore). The same input must give
// the same Status code from each; the suite says which implementation
// answered otherwise.
#include <httplib.h>

#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "api/api_wire.h"
#include "cells/body_codec.h"
#include "cells/cell_store.h"
#include "cells/testing/memory_cell_store.h"
#include "client/cellar_client.h"
#include "gtest/gtest.h"
#include "testing/private_mariadb.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"
#include "tests/http_test_util.h"

namespace cellar {
namespace {

using json = nlohmann::json;

constexpr uint32_t kShards = 8;

// One MariaDB, a CellStore, a cellard and a Client over it, the in-memory
// model: started on first use (on the main thread), stopped and the MariaDB's
// directory removed once every test has run (Teardown below).
struct Implementations {
  std::unique_ptr<testing::PrivateMariaDb> db;
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
  std::unique_ptr<testing::CellardProcess> cellard;
  std::unique_ptr<Client> client;
  std::unique_ptr<MemoryCellStore> memory;
  std::string error;  // why something did not start

  static Implementations& Get() {
    if (instance == nullptr) instance = Start();
    return *instance;
  }
  // Members go in reverse order: the client, cellard, the store, then the
  // MariaDB, which removes its directory.
  static void Stop() {
    delete instance;
    instance = nullptr;
  }

 private:
  static inline Implementations* instance = nullptr;

  static Implementations* Start() {
    auto* all = new Implementations;
    try {
      all->db = testing::PrivateMariaDb::Start("contract");
    } catch (const std::exception& e) {
      all->error = std::string("MariaDB: ") + e.what();
      return all;
    }
    const std::string yaml = testing::MakeClusterYaml({all->db.get()}, kShards);
    all->config = testing::MakeClusterConfig({all->db.get()}, kShards);
    all->store = CellStore::Open(all->config);
    if (Status s = all->store->Init(); !s.ok()) {
      all->error = "init: " + s.ToString();
      return all;
    }
    all->cellard = testing::CellardProcess::Start(testing::WriteTempFile(yaml, ".yaml"));
    if (all->cellard == nullptr) {
      all->error = "cellard did not start";
      return all;
    }
    ClientOptions o;
    o.endpoints = {all->cellard->url()};
    auto c = Client::Create(o);
    if (!c.ok()) {
      all->error = "client: " + c.status().ToString();
      return all;
    }
    all->client = std::move(c).value();
    all->memory = std::make_unique<MemoryCellStore>(all->config);
    return all;
  }
};

// Without it the servers died only with the process (PR_SET_PDEATHSIG) and
// every run left its MariaDB directory (~94 MB) in TMPDIR.
class Teardown : public ::testing::Environment {
 public:
  void TearDown() override { Implementations::Stop(); }
};
[[maybe_unused]] ::testing::Environment* const kTeardown =
    ::testing::AddGlobalTestEnvironment(new Teardown);

struct MysqlStore {
  static constexpr const char* kName = "CellStore";
  static CellService* Get() { return Implementations::Get().store.get(); }
};
struct HttpClient {
  static constexpr const char* kName = "Client";
  static CellService* Get() { return Implementations::Get().client.get(); }
};
struct MemoryModel {
  static constexpr const char* kName = "MemoryCellStore";
  static CellService* Get() { return Implementations::Get().memory.get(); }
};

template <typename Impl>
class StoreContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ("", Implementations::Get().error);
    cells_ = Impl::Get();
    ASSERT_NE(nullptr, cells_);
    row_ = Uuid::Random();
  }

  // A body `depth` levels deep ({"a":{"a":...{}}}: depth 1 is {}).
  static json Nested(int depth) {
    json body = json::object();
    for (int i = 1; i < depth; ++i) body = json{{"a", body}};
    return body;
  }

  // Expects that nothing was written to (row_, column).
  void ExpectNothingAt(const std::string& column) {
    auto v = cells_->Versions("trips", row_, column, VersionQuery{});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_TRUE(v->empty()) << Impl::kName << " wrote " << v->size() << " versions";
  }

  CellService* cells_ = nullptr;
  Uuid row_;
};

using Implementations3 = ::testing::Types<MysqlStore, HttpClient, MemoryModel>;
class ImplName {
 public:
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};
TYPED_TEST_SUITE(StoreContractTest, Implementations3, ImplName);

TYPED_TEST(StoreContractTest, UnknownDatastoreIsInvalidArgument) {
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Put("nope", {this->row_, "BASE", 1, {{"a", 1}}}).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Get("nope", this->row_, "BASE", 1).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Latest("nope", this->row_, "BASE").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, this->cells_->Row("nope", this->row_).status().code());
}

// A row key that is not a UUID. The contract takes a Uuid, so no
// implementation can be handed one: text becomes a row key only through
// Uuid::Parse, the one parse every caller uses (the CLI, the HTTP API's
// ParseRowKey, the wire format), and it is InvalidArgument naming the text.
// Over HTTP the worker node parses the path and the batch body itself: 400
// with code InvalidArgument, which Client maps back (StatusCodeForHttp), and
// nothing is written.
TYPED_TEST(StoreContractTest, BadUuidIsInvalidArgument) {
  const std::vector<std::string> bad = {
      "not-a-uuid",
      "123e4567-e89b-12d3-a456-42661417400",    // one digit short
      "123e4567-e89b-12d3-a456-4266141740000",  // one digit too many
      "123e4567e89b-12d3-a456-4266141740000",   // a dash misplaced
      "123e4567-e89b-12d3-a456-42661417400g",   // not hex
  };
  for (const std::string& text : bad) {
    auto row = Uuid::Parse(text);
    ASSERT_FALSE(row.ok()) << text;
    EXPECT_EQ(StatusCode::kInvalidArgument, row.status().code()) << text;
    EXPECT_NE(std::string::npos, row.status().message().find(text)) << row.status().ToString();
  }
  EXPECT_EQ(StatusCode::kInvalidArgument, Uuid::Parse("").status().code());
  if constexpr (std::is_same_v<TypeParam, HttpClient>) {
    httplib::Client raw(Implementations::Get().cellard->url());
    for (const std::string& text : bad) {
      const std::string path = "/v1/trips/cells/" + text + "/BASE/1";
      auto put = raw.Put(path, R"({"a":1})", "application/json");
      ASSERT_TRUE(put) << path;
      EXPECT_EQ(400, put->status) << put->body;
      const json error = json::parse(put->body).at("error");
      EXPECT_EQ(StatusCode::kInvalidArgument,
                StatusCodeForHttp(put->status, error.at("code").get<std::string>()))
          << put->body;
      auto get = raw.Get(path);
      ASSERT_TRUE(get) << path;
      EXPECT_EQ(400, get->status) << get->body;
      const json cell = {
          {"row_key", text}, {"column", "BASE"}, {"ref_key", 1}, {"body", json::object()}};
      auto batch = raw.Post("/v1/trips/cells:batch", json{{"cells", json::array({cell})}}.dump(),
                            "application/json");
      ASSERT_TRUE(batch);
      EXPECT_EQ(400, batch->status) << batch->body;
    }
  }
}

TYPED_TEST(StoreContractTest, UnknownColumnIsInvalidArgument) {
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Put("trips", {this->row_, "NOPE", 1, {{"a", 1}}}).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Get("trips", this->row_, "NOPE", 1).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Latest("trips", this->row_, "NOPE").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Versions("trips", this->row_, "NOPE", VersionQuery{}).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Erase("trips", this->row_, "NOPE").status().code());
}

TYPED_TEST(StoreContractTest, BadWritesAreInvalidArgumentAndWriteNothing) {
  const int64_t max = Implementations::Get().config.limits.max_body_bytes;
  struct Case {
    const char* what;
    CellWrite cell;
  };
  const std::vector<Case> cases = {
      {"negative ref_key", {this->row_, "BASE", -1, {{"a", 1}}}},
      {"non-object body", {this->row_, "BASE", 1, json::array({1, 2})}},
      {"null body", {this->row_, "BASE", 1, nullptr}},
      {"oversized body", {this->row_, "BASE", 1, {{"a", std::string(max + 1, 'x')}}}},
      {"too deep body", {this->row_, "BASE", 1, this->Nested(kMaxBodyDepth + 1)}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StatusCode::kInvalidArgument, this->cells_->Put("trips", c.cell).status().code())
        << c.what;
    auto batch = this->cells_->PutBatch("trips", {c.cell});
    ASSERT_EQ(1u, batch.size());
    EXPECT_EQ(StatusCode::kInvalidArgument, batch[0].status().code()) << c.what << " in a batch";
  }
  this->ExpectNothingAt("BASE");
  // The deepest body allowed is stored and read back.
  const json deepest = this->Nested(kMaxBodyDepth);
  ASSERT_TRUE(this->cells_->Put("trips", {this->row_, "BASE", 1, deepest}).ok());
  auto back = this->cells_->Get("trips", this->row_, "BASE", 1);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(deepest, back->body);
}

TYPED_TEST(StoreContractTest, IdenticalRetryIsSuccessADifferentBodyIsConflict) {
  auto first = this->cells_->Put("trips", {this->row_, "BASE", 3, {{"a", 1}}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->created);
  auto retry = this->cells_->Put("trips", {this->row_, "BASE", 3, {{"a", 1}}});
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_FALSE(retry->created);
  EXPECT_EQ(first->added_id, retry->added_id);
  EXPECT_EQ(StatusCode::kConflict,
            this->cells_->Put("trips", {this->row_, "BASE", 3, {{"a", 2}}}).status().code());
  auto stored = this->cells_->Get("trips", this->row_, "BASE", 3);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ((json{{"a", 1}}), stored->body);
}

TYPED_TEST(StoreContractTest, ABatchCommitsPerRow) {
  const Uuid other = Uuid::Random();
  ASSERT_TRUE(this->cells_->Put("trips", {this->row_, "BASE", 1, {{"a", 1}}}).ok());
  // Row 1: a new cell and a conflicting one (neither is written); row 2: fine.
  auto results = this->cells_->PutBatch("trips", {{this->row_, "STATUS", 1, {{"s", 1}}},
                                                  {this->row_, "BASE", 1, {{"a", 2}}},
                                                  {other, "BASE", 1, {{"b", 1}}}});
  ASSERT_EQ(3u, results.size());
  EXPECT_EQ(StatusCode::kAborted, results[0].status().code()) << results[0].status().ToString();
  EXPECT_EQ(StatusCode::kConflict, results[1].status().code()) << results[1].status().ToString();
  ASSERT_TRUE(results[2].ok()) << results[2].status().ToString();
  EXPECT_TRUE(results[2]->created);
  this->ExpectNothingAt("STATUS");
  EXPECT_TRUE(this->cells_->Latest("trips", other, "BASE").ok());
}

TYPED_TEST(StoreContractTest, VersionsAreNewestFirstWithinBounds) {
  for (int64_t ref : {1, 2, 5, 9})
    ASSERT_TRUE(this->cells_->Put("trips", {this->row_, "BASE", ref, {{"v", ref}}}).ok());
  VersionQuery q;
  q.min_ref = 2;
  q.max_ref = 8;
  auto v = this->cells_->Versions("trips", this->row_, "BASE", q);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  std::vector<int64_t> refs;
  for (const Cell& c : *v) refs.push_back(c.ref_key);
  EXPECT_EQ((std::vector<int64_t>{5, 2}), refs);
  q = VersionQuery{};
  q.limit = 2;
  v = this->cells_->Versions("trips", this->row_, "BASE", q);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(2u, v->size());
  EXPECT_EQ(9, (*v)[0].ref_key);
  for (int bad : {0, -1, 10001}) {
    q.limit = bad;
    EXPECT_EQ(StatusCode::kInvalidArgument,
              this->cells_->Versions("trips", this->row_, "BASE", q).status().code())
        << "limit " << bad;
  }
  EXPECT_EQ(StatusCode::kNotFound,
            this->cells_->Get("trips", this->row_, "BASE", 3).status().code());
}

TYPED_TEST(StoreContractTest, EraseWritesOneTombstoneThatHidesTheColumn) {
  EXPECT_EQ(StatusCode::kNotFound,
            this->cells_->Latest("trips", this->row_, "BASE").status().code());
  ASSERT_TRUE(this->cells_->Put("trips", {this->row_, "BASE", 4, {{"a", 1}}}).ok());
  EXPECT_EQ(StatusCode::kConflict,
            this->cells_->Erase("trips", this->row_, "BASE", 3).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument,
            this->cells_->Erase("trips", this->row_, "BASE", -2).status().code());
  auto erased = this->cells_->Erase("trips", this->row_, "BASE", 4);
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_TRUE(erased->created);
  EXPECT_EQ(5, erased->ref_key);
  auto again = this->cells_->Erase("trips", this->row_, "BASE");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(5, again->ref_key);
  EXPECT_EQ(StatusCode::kNotFound,
            this->cells_->Latest("trips", this->row_, "BASE").status().code());
  auto row = this->cells_->Row("trips", this->row_);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_TRUE(row->empty());
  auto v = this->cells_->Versions("trips", this->row_, "BASE", VersionQuery{});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(2u, v->size());
  EXPECT_TRUE((*v)[0].tombstone);
  EXPECT_EQ(StatusCode::kConflict,
            this->cells_->Put("trips", {this->row_, "BASE", 5, {{"a", 1}}}).status().code())
      << "a put over the tombstone's address";
}

// GetText, LatestText, RowText and VersionsText (what the HTTP API answers
// with) are Get, Latest, Row and Versions with each body as compact JSON
// text: the same cells, the same errors. Over HTTP the answers' bytes are
// the stored cells' CellToJson printed.
TYPED_TEST(StoreContractTest, TextReadsAreTheReadsWithTheBodyPrinted) {
  auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  auto same_cell = [&](const Cell& cell, const CellText& text) {
    EXPECT_EQ(cell.body.is_null() ? "" : dump(cell.body), text.body_json);
    EXPECT_TRUE(text.cell.body.is_null());
    Cell without_body = cell;
    without_body.body = nullptr;
    EXPECT_EQ(dump(CellToJson(without_body)), dump(CellToJson(text.cell)));
  };
  auto expect_same = [&](const auto& cell, const auto& text) {
    ASSERT_EQ(cell.ok(), text.ok())
        << cell.status().ToString() << " / " << text.status().ToString();
    if (!cell.ok()) {
      EXPECT_EQ(cell.status().code(), text.status().code()) << text.status().ToString();
      return;
    }
    if constexpr (std::is_same_v<std::decay_t<decltype(*cell)>, Cell>) {
      same_cell(*cell, *text);
    } else {
      ASSERT_EQ(cell->size(), text->size());
      for (size_t i = 0; i < cell->size(); ++i) same_cell((*cell)[i], (*text)[i]);
    }
  };
  const json body = {{"city", "caf\u00e9 \"SF\"\n"},
                     {"fare", {{"total", 9.5}, {"items", {1, -2, 3}}}},
                     {"none", nullptr},
                     {"big", std::numeric_limits<uint64_t>::max()}};
  ASSERT_TRUE(this->cells_->Put("trips", {this->row_, "BASE", 1, body}).ok());
  ASSERT_TRUE(this->cells_->Put("trips", {this->row_, "BASE", 2, {{"a", 0.1}}}).ok());
  CellService& cells = *this->cells_;
  expect_same(cells.Get("trips", this->row_, "BASE", 1),
              cells.GetText("trips", this->row_, "BASE", 1));
  expect_same(cells.Latest("trips", this->row_, "BASE"),
              cells.LatestText("trips", this->row_, "BASE"));
  expect_same(cells.Row("trips", this->row_), cells.RowText("trips", this->row_));
  expect_same(cells.Versions("trips", this->row_, "BASE", VersionQuery{}),
              cells.VersionsText("trips", this->row_, "BASE", VersionQuery{}));
  auto text = cells.GetText("trips", this->row_, "BASE", 1);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(dump(body), text->body_json);
  if constexpr (std::is_same_v<TypeParam, HttpClient>) {
    httplib::Client raw(Implementations::Get().cellard->url());
    const std::string path = "/v1/trips/cells/" + this->row_.ToString() + "/BASE";
    auto stored = Implementations::Get().store->Get("trips", this->row_, "BASE", 1);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    auto got = raw.Get(path + "/1");
    ASSERT_TRUE(got);
    EXPECT_EQ(200, got->status) << got->body;
    EXPECT_EQ(dump(CellToJson(*stored)), got->body);
    auto latest = Implementations::Get().store->Latest("trips", this->row_, "BASE");
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    got = raw.Get(path);
    ASSERT_TRUE(got);
    EXPECT_EQ(200, got->status) << got->body;
    EXPECT_EQ(dump(CellToJson(*latest)), got->body);
    auto versions = Implementations::Get().store->Versions("trips", this->row_, "BASE", {});
    ASSERT_TRUE(versions.ok()) << versions.status().ToString();
    json versions_json = json::array();
    for (const Cell& c : *versions) versions_json.push_back(CellToJson(c));
    got = raw.Get(path + "/versions");
    ASSERT_TRUE(got);
    EXPECT_EQ(200, got->status) << got->body;
    EXPECT_EQ(dump(json{{"cells", versions_json}}), got->body);
    auto live = Implementations::Get().store->Row("trips", this->row_);
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    json row_json = json::array();
    for (const Cell& c : *live) row_json.push_back(CellToJson(c));
    got = raw.Get("/v1/trips/cells/" + this->row_.ToString());
    ASSERT_TRUE(got);
    EXPECT_EQ(200, got->status) << got->body;
    EXPECT_EQ(dump(json{{"row_key", this->row_.ToString()}, {"cells", row_json}}), got->body);
  }
  // Errors: unknown datastore and column, a missing version, an erased column.
  expect_same(cells.Get("nope", this->row_, "BASE", 1),
              cells.GetText("nope", this->row_, "BASE", 1));
  expect_same(cells.Latest("trips", this->row_, "NOPE"),
              cells.LatestText("trips", this->row_, "NOPE"));
  expect_same(cells.Get("trips", this->row_, "BASE", 9),
              cells.GetText("trips", this->row_, "BASE", 9));
  expect_same(cells.Row("nope", this->row_), cells.RowText("nope", this->row_));
  expect_same(cells.Versions("trips", this->row_, "NOPE", VersionQuery{}),
              cells.VersionsText("trips", this->row_, "NOPE", VersionQuery{}));
  ASSERT_TRUE(cells.Erase("trips", this->row_, "BASE").ok());
  expect_same(cells.Row("trips", this->row_), cells.RowText("trips", this->row_));
  expect_same(cells.Versions("trips", this->row_, "BASE", VersionQuery{}),
              cells.VersionsText("trips", this->row_, "BASE", VersionQuery{}));
  expect_same(cells.Latest("trips", this->row_, "BASE"),
              cells.LatestText("trips", this->row_, "BASE"));
  EXPECT_EQ(StatusCode::kNotFound, cells.LatestText("trips", this->row_, "BASE").status().code());
  // The tombstone itself, read by its ref_key: no body.
  auto tombstone = cells.GetText("trips", this->row_, "BASE", 3);
  ASSERT_TRUE(tombstone.ok()) << tombstone.status().ToString();
  EXPECT_TRUE(tombstone->cell.tombstone);
  EXPECT_EQ("", tombstone->body_json);
  expect_same(cells.Get("trips", this->row_, "BASE", 3), tombstone);
}

TYPED_TEST(StoreContractTest, ReadyWhenEveryHostAnswers) {
  EXPECT_TRUE(this->cells_->CheckReady().ok());
}

}  // namespace
}  // namespace cellar
