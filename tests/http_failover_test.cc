// Two `cellard` processes on one cluster, one cellar::Client with both
// addresses. Writers put cells through both; one server is SIGKILLed in the
// middle of the load; the client's retries carry on through the other.
// Afterwards every write is present exactly once (none lost, none doubled):
// the shard logs hold each address once and with the body that was written.
#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "client/cellar_client.h"
#include "gtest/gtest.h"
#include "testing/store_environment.h"
#include "tests/http_test_util.h"

namespace cellar {
namespace {

using json = nlohmann::json;

constexpr uint32_t kShards = 8;
constexpr int kWriters = 8;
constexpr int kCellsPerWriter = 150;

testing::StoreEnvironment* const env = static_cast<testing::StoreEnvironment*>(
    ::testing::AddGlobalTestEnvironment(new testing::StoreEnvironment({"failover"}, kShards)));

TEST(HttpFailoverTest, KillOneServerMidLoadNoWriteLostOrDoubled) {
  ASSERT_NE(nullptr, env->store) << "the MariaDB server did not start";
  CellStore* store = env->store.get();
  const std::string config_path =
      testing::WriteTempFile(testing::MakeClusterYaml({env->dbs[0].get()}, kShards), ".yaml");
  auto a = testing::CellardProcess::Start(config_path);
  auto b = testing::CellardProcess::Start(config_path);
  ASSERT_NE(nullptr, a);
  ASSERT_NE(nullptr, b);

  ClientOptions o;
  o.endpoints = {a->url(), b->url()};
  o.max_attempts = 8;
  o.backoff_initial_ms = 10;
  o.backoff_max_ms = 200;
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok());

  // Each writer puts its own rows; half the writes go in batches of 5.
  std::atomic<int> done{0}, failures{0};
  std::vector<std::vector<CellWrite>> written(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kCellsPerWriter;) {
        const Uuid row = Uuid::Random();
        if (w % 2 == 0) {
          CellWrite c{row, "BASE", i, {{"writer", w}, {"i", i}}};
          auto r = (*client)->Put("trips", c);
          if (!r.ok()) {
            ++failures;
            ADD_FAILURE() << r.status().ToString();
          }
          written[w].push_back(c);
          ++i;
          ++done;
        } else {
          std::vector<CellWrite> batch;
          for (int k = 0; k < 5 && i < kCellsPerWriter; ++k, ++i)
            batch.push_back({row, k % 2 ? "STATUS" : "BASE", i, {{"writer", w}, {"i", i}}});
          auto results = (*client)->PutBatch("trips", batch);
          for (auto& r : results)
            if (!r.ok()) {
              ++failures;
              ADD_FAILURE() << r.status().ToString();
            }
          for (auto& c : batch) written[w].push_back(c);
          done += static_cast<int>(batch.size());
        }
      }
    });
  }
  const int total = kWriters * kCellsPerWriter;
  while (done.load() < total / 3) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  a->Kill();  // mid-load: requests in flight on A fail and are retried on B
  const int at_kill = done.load();
  for (auto& t : threads) t.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_LT(at_kill, total) << "the kill came after the load";
  const ClientStats stats = (*client)->stats();
  EXPECT_GT(stats.connection_errors, 0u) << "the client never noticed the kill";
  std::printf(
      "writes: %d (%d before the kill); requests %llu, retries %llu, connection errors %llu\n",
      total, at_kill, static_cast<unsigned long long>(stats.requests),
      static_cast<unsigned long long>(stats.retries),
      static_cast<unsigned long long>(stats.connection_errors));

  // Every address exactly once in the shard logs, with its body.
  std::map<std::tuple<Uuid, std::string, int64_t>, int> seen;
  std::map<std::tuple<Uuid, std::string, int64_t>, json> bodies;
  for (uint32_t s = 0; s < kShards; ++s) {
    uint64_t after = 0;
    while (true) {
      auto page = store->ShardLog("trips", s, after, 1000);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      if (page->cells.empty()) break;
      for (const Cell& c : page->cells) {
        ++seen[{c.row_key, c.column, c.ref_key}];
        bodies[{c.row_key, c.column, c.ref_key}] = c.body;
      }
      after = page->next_after;
    }
  }
  size_t expected = 0;
  for (const auto& list : written)
    for (const CellWrite& c : list) {
      ++expected;
      const auto key = std::make_tuple(c.row_key, c.column, c.ref_key);
      EXPECT_EQ(1, seen[key]) << "cell " << CellAddress("trips", c.row_key, c.column, c.ref_key);
      EXPECT_EQ(c.body, bodies[key]);
    }
  EXPECT_EQ(expected, seen.size()) << "cells that nobody wrote appeared";
  EXPECT_EQ(static_cast<size_t>(total), expected);

  // The survivor still serves reads of what went through the dead one.
  ClientOptions only_b;
  only_b.endpoints = {b->url()};
  auto reader = Client::Create(only_b);
  ASSERT_TRUE(reader.ok());
  const CellWrite& first = written[0].front();
  auto got = (*reader)->Get("trips", first.row_key, first.column, first.ref_key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(first.body, got->body);
  b->Stop();
}

}  // namespace
}  // namespace cellar
