// cellar::Client sending concurrent puts together (client/cellar_client.h,
// client/internal/put_coalescer.h) against a real `cellard` over a private
// MariaDB: many threads put at once, among them puts the server refuses:
// malformed ones (an unknown or non-UTF-8 column, a negative ref_key, a body
// that is not an object: the whole multi-put request is refused) and puts
// that conflict with a stored cell (refused per cell). Every put must get exactly
// the answer it gets when sent alone, and every accepted cell must be stored
// with the position its answer names.
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "client/cellar_client.h"
#include "gtest/gtest.h"
#include "testing/store_environment.h"
#include "tests/http_test_util.h"

namespace cellar {
namespace {

using json = nlohmann::json;

constexpr uint32_t kShards = 8;
constexpr int kGoodWriters = 12;
constexpr int kPutsPerWriter = 60;

testing::StoreEnvironment* const env = static_cast<testing::StoreEnvironment*>(
    ::testing::AddGlobalTestEnvironment(new testing::StoreEnvironment({"coalesce"}, kShards)));

std::unique_ptr<Client> MakeClient(const std::string& url, int max_puts_per_request) {
  ClientOptions o;
  o.endpoints = {url};
  o.max_puts_per_request = max_puts_per_request;
  auto c = Client::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

TEST(HttpPutCoalescingTest, ConcurrentPutsShareRequestsAndEachGetsItsAnswerAlone) {
  ASSERT_NE(nullptr, env->store) << "the MariaDB server did not start";
  CellStore* store = env->store.get();
  const std::string config_path =
      testing::WriteTempFile(testing::MakeClusterYaml({env->dbs[0].get()}, kShards), ".yaml");
  auto server = testing::CellardProcess::Start(config_path);
  ASSERT_NE(nullptr, server);
  auto together = MakeClient(server->url(), 32);
  auto alone = MakeClient(server->url(), 1);
  ASSERT_NE(nullptr, together);
  ASSERT_NE(nullptr, alone);

  // Puts the server refuses, and what each answers when sent alone: a
  // conflict with a stored cell (refused per cell in a multi-put request),
  // and malformed puts a careless caller sends (each refuses a multi-put
  // request whole).
  const Uuid taken = Uuid::Random();
  ASSERT_TRUE(alone->Put("trips", {taken, "BASE", 1, {{"v", "first"}}}).ok());
  const std::vector<CellWrite> refused = {
      {taken, "BASE", 1, {{"v", "second"}}},    // conflict
      {Uuid::Random(), "NOPE", 1, {{"v", 1}}},  // unknown column
      {Uuid::Random(),
       "BA\xff"
       "SE",
       1,
       {{"v", 1}}},                                       // column not UTF-8
      {Uuid::Random(), "BASE", -1, {{"v", 1}}},           // negative ref_key
      {Uuid::Random(), "BASE", 1, json::array({1, 2})}};  // body not an object
  std::vector<Status> refused_alone;
  for (const CellWrite& c : refused) {
    refused_alone.push_back(alone->Put("trips", c).status());
    ASSERT_FALSE(refused_alone.back().ok()) << c.column << "/" << c.ref_key;
  }
  ASSERT_EQ(StatusCode::kConflict, refused_alone[0].code()) << refused_alone[0].ToString();
  std::vector<std::vector<CellWrite>> cells(kGoodWriters);
  std::vector<std::vector<Result<PutResult>>> results(kGoodWriters);
  std::atomic<int> wrong_refusals{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kGoodWriters; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < kPutsPerWriter; ++i) {
        cells[w].push_back({Uuid::Random(), i % 2 ? "BASE" : "STATUS", i, {{"w", w}, {"i", i}}});
        results[w].push_back(together->Put("trips", cells[w].back()));
      }
    });
  for (size_t r = 0; r < refused.size(); ++r)
    threads.emplace_back([&, r] {
      const Status& expected = refused_alone[r];
      for (int i = 0; i < kPutsPerWriter; ++i) {
        Status s = together->Put("trips", refused[r]).status();
        if (s.code() != expected.code() || s.message() != expected.message()) {
          ADD_FAILURE() << "sent together: " << s.ToString() << "; alone: " << expected.ToString();
          ++wrong_refusals;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(0, wrong_refusals.load());

  for (int w = 0; w < kGoodWriters; ++w)
    for (size_t i = 0; i < cells[w].size(); ++i) {
      const CellWrite& c = cells[w][i];
      const Result<PutResult>& r = results[w][i];
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(r->created);
      EXPECT_FALSE(r->position.empty());
      auto stored = store->Get("trips", c.row_key, c.column, c.ref_key);
      ASSERT_TRUE(stored.ok()) << stored.status().ToString();
      EXPECT_EQ(c.body, stored->body);
      EXPECT_EQ(r->added_id, stored->added_id);
      EXPECT_EQ(r->shard, stored->shard);
    }
  for (size_t r = 1; r < refused.size(); ++r) {
    if (refused[r].ref_key < 0) continue;  // no address to read
    EXPECT_FALSE(store->Get("trips", refused[r].row_key, "BASE", refused[r].ref_key).ok())
        << "refused put " << r << " wrote a cell";
  }
  auto first = store->Get("trips", taken, "BASE", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(json({{"v", "first"}}), first->body);

  // The puts did share requests, and the unknown column's requests were
  // refused whole and resent one put at a time.
  const ClientStats s = together->stats();
  EXPECT_GT(s.multi_put_requests, 0u);
  EXPECT_GT(s.coalesced_puts, s.multi_put_requests);
  EXPECT_GT(s.multi_puts_resent_alone, 0u);
  EXPECT_EQ(0u, alone->stats().multi_put_requests);
}

}  // namespace
}  // namespace cellar
