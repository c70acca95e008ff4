// Idempotent erase over HTTP (cells/cell_store.h "Erase", DELETE in
// api/cell_api.h): a cellard process over a private MariaDB, reached
// by cellar::Client through a FaultProxy that loses the answer to a DELETE
// after cellard processed it. The client's retry must not write a second
// tombstone. Also: expected_ref_key over HTTP, its 400s (nothing written) and
// its 409.
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "client/cellar_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/fault_proxy.h"
#include "testing/status_printing.h"
#include "tests/http_test_util.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using Versions = std::vector<std::pair<int64_t, bool>>;  // (ref_key, tombstone), newest first

constexpr uint32_t kShards = 8;

class HttpEraseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      db_ = testing::PrivateMariaDb::Start("http-erase").release();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cannot start MariaDB: %s\n", e.what());
      return;
    }
    const std::string path =
        testing::WriteTempFile(testing::MakeClusterYaml({db_}, kShards), ".yaml");
    auto cfg = LoadClusterConfig(path);
    if (!cfg.ok()) return;
    store_ = CellStore::Open(*cfg).release();
    if (!store_->Init().ok()) return;
    server_ = testing::CellardProcess::Start(path).release();
    if (server_ != nullptr) proxy_ = new testing::FaultProxy(server_->port());
  }
  static void TearDownTestSuite() {
    delete proxy_;
    delete server_;
    delete store_;
    delete db_;
  }

  void SetUp() override {
    ASSERT_NE(nullptr, proxy_) << "MariaDB or cellard did not start";
    ClientOptions o;
    o.endpoints = {"http://127.0.0.1:" + std::to_string(proxy_->port())};
    o.max_attempts = 4;
    o.backoff_initial_ms = 10;
    o.backoff_max_ms = 50;
    auto c = Client::Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    raw_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    row_ = Uuid::Random();
  }

  void MustPut(int64_t ref) {
    auto r = client_->Put("trips", CellWrite{row_, "BASE", ref, {{"v", ref}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  Versions Read() {
    auto v = store_->Versions("trips", row_, "BASE", VersionQuery{});
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    Versions out;
    if (v.ok())
      for (const Cell& c : *v) out.emplace_back(c.ref_key, c.tombstone);
    return out;
  }

  std::string ColumnPath() const { return "/v1/trips/cells/" + row_.ToString() + "/BASE"; }

  static testing::PrivateMariaDb* db_;
  static CellStore* store_;
  static testing::CellardProcess* server_;
  static testing::FaultProxy* proxy_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<httplib::Client> raw_;
  Uuid row_;
};

testing::PrivateMariaDb* HttpEraseTest::db_ = nullptr;
CellStore* HttpEraseTest::store_ = nullptr;
testing::CellardProcess* HttpEraseTest::server_ = nullptr;
testing::FaultProxy* HttpEraseTest::proxy_ = nullptr;

TEST_F(HttpEraseTest, ClientRetryAfterALostAnswerWritesOneTombstone) {
  MustPut(0);
  const int dropped = proxy_->answers_dropped();
  const uint64_t retries = client_->stats().retries;
  proxy_->DropNextAnswer(testing::FaultProxy::IsHttpRequest("DELETE"));
  auto erased = client_->Erase("trips", row_, "BASE");
  ASSERT_EQ(dropped + 1, proxy_->answers_dropped()) << "the DELETE's answer was not dropped";
  EXPECT_LT(retries, client_->stats().retries) << "the client did not retry";
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(1, erased->ref_key);
  EXPECT_FALSE(erased->created) << "the answer is the retry's: the tombstone was there";
  EXPECT_EQ((Versions{{1, true}, {0, false}}), Read());
}

TEST_F(HttpEraseTest, ClientRetryOfAnExpectedEraseWritesOneTombstone) {
  MustPut(0);
  MustPut(1);
  const int dropped = proxy_->answers_dropped();
  proxy_->DropNextAnswer(testing::FaultProxy::IsHttpRequest("DELETE"));
  auto erased = client_->Erase("trips", row_, "BASE", 1);
  ASSERT_EQ(dropped + 1, proxy_->answers_dropped()) << "the DELETE's answer was not dropped";
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(2, erased->ref_key);
  EXPECT_EQ((Versions{{2, true}, {1, false}, {0, false}}), Read());
  // Expecting a version that is no longer the latest: Conflict naming the latest.
  auto stale = client_->Erase("trips", row_, "BASE", 0);
  ASSERT_EQ(StatusCode::kConflict, stale.status().code()) << stale.status().ToString();
  EXPECT_THAT(stale.status().message(), HasSubstr("the latest is ref_key 2 (a tombstone)"));
}

TEST_F(HttpEraseTest, ExpectedRefKeyOverRawHttp) {
  MustPut(3);
  auto conflict = raw_->Delete(ColumnPath() + "?expected_ref_key=2");
  ASSERT_TRUE(conflict);
  EXPECT_EQ(409, conflict->status) << conflict->body;
  EXPECT_THAT(conflict->body, HasSubstr("the latest is ref_key 3 (live)"));
  EXPECT_EQ((Versions{{3, false}}), Read());

  auto first = raw_->Delete(ColumnPath() + "?expected_ref_key=3");
  ASSERT_TRUE(first);
  ASSERT_EQ(200, first->status) << first->body;
  json a = json::parse(first->body);
  EXPECT_EQ(4, a["ref_key"]);
  EXPECT_EQ(true, a["created"]);
  auto again = raw_->Delete(ColumnPath() + "?expected_ref_key=3");
  ASSERT_TRUE(again);
  ASSERT_EQ(200, again->status) << again->body;
  json b = json::parse(again->body);
  EXPECT_EQ(4, b["ref_key"]);
  EXPECT_EQ(false, b["created"]);
  EXPECT_EQ(a["added_id"], b["added_id"]);
  EXPECT_EQ((Versions{{4, true}, {3, false}}), Read());
}

TEST_F(HttpEraseTest, BadExpectedRefKeyIs400AndWritesNothing) {
  MustPut(0);
  const Versions before = Read();
  for (const std::string query :
       {"expected_ref_key=", "expected_ref_key=abc", "expected_ref_key=-1", "expected_ref_key=1.5",
        "expected_ref_key=+1", "expected_ref_key=%201", "expected_ref_key=99999999999999999999",
        "expected_ref_key=0&expected_ref_key=1"}) {
    auto r = raw_->Delete(ColumnPath() + "?" + query);
    ASSERT_TRUE(r) << query;
    EXPECT_EQ(400, r->status) << query << ": " << r->body;
    EXPECT_THAT(r->body, HasSubstr("expected_ref_key")) << query;
  }
  auto unknown = raw_->Delete(ColumnPath() + "?expected=0");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(400, unknown->status) << unknown->body;
  EXPECT_THAT(unknown->body, HasSubstr("expected_ref_key")) << "the allowed parameter is named";
  EXPECT_EQ(before, Read()) << "a 400 wrote a tombstone";
}

}  // namespace
}  // namespace cellar
