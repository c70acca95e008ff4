// CellStore::PutAsync against two real MariaDB hosts: every put is answered
// exactly once with what Put() would say, many puts in flight from few callers
// are committed and logged once, bad input is refused on the calling thread
// with nothing written, and Close() answers every accepted put.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "cells/body_codec.h"
#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"
#include "testing/wait_for.h"
#include "tests/cells_store_fixture.h"

namespace cellar {

testing::StoreEnvironment* const store_env =
    static_cast<testing::StoreEnvironment*>(::testing::AddGlobalTestEnvironment(
        new testing::StoreEnvironment({"async-a", "async-b"}, kStoreTestShards)));

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// Collects the answers of PutAsync calls, by the index the test gave each put.
class Answers {
 public:
  CellStore::PutCallback For(size_t i) {
    return [this, i](Result<PutResult> r) {
      MutexLock lock(&mu_);
      calls_[i] += 1;
      results_.insert_or_assign(i, std::move(r));
    };
  }
  // Waits (bounded) until `n` answers arrived; false on timeout.
  bool WaitForAnswers(size_t n) {
    return testing::WaitFor(
        [&] {
          MutexLock lock(&mu_);
          return results_.size() >= n;
        },
        std::chrono::milliseconds(60000));
  }
  std::map<size_t, Result<PutResult>> results() {
    MutexLock lock(&mu_);
    return results_;
  }
  // Indexes answered more than once.
  std::vector<size_t> Repeated() {
    MutexLock lock(&mu_);
    std::vector<size_t> out;
    for (const auto& [i, n] : calls_)
      if (n > 1) out.push_back(i);
    return out;
  }

 private:
  Mutex mu_;
  std::map<size_t, int> calls_ GUARDED_BY(mu_);
  std::map<size_t, Result<PutResult>> results_ GUARDED_BY(mu_);
};

TEST_F(StoreTest, AsyncPutsInFlightFromFewCallersAreAllCommittedReadableAndLoggedOnce) {
  constexpr int kCallers = 4, kPerCaller = 500;
  const std::vector<uint64_t> heads = Heads("trips");
  std::vector<CellWrite> writes;
  for (int i = 0; i < kCallers * kPerCaller; ++i)
    writes.push_back(W(Uuid::Random(), "BASE", i % 3, {{"i", i}, {"pad", std::string(200, 'p')}}));
  Answers answers;
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      // No waiting between puts: up to kPerCaller of each caller in flight.
      for (int k = 0; k < kPerCaller; ++k) {
        const size_t i = static_cast<size_t>(c * kPerCaller + k);
        store_->PutAsync("trips", writes[i], answers.For(i));
      }
    });
  for (auto& t : callers) t.join();
  ASSERT_TRUE(answers.WaitForAnswers(writes.size()));
  EXPECT_THAT(answers.Repeated(), ::testing::IsEmpty());

  std::set<std::pair<uint32_t, uint64_t>> positions;  // (host, added_id) is unique
  size_t multi_cell_transactions = 0;
  std::map<std::pair<uint32_t, MicrosSinceEpoch>, int> transactions;
  for (const auto& [i, r] : answers.results()) {
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    EXPECT_TRUE(r->created);
    EXPECT_EQ(ShardForRow(writes[i].row_key, kStoreTestShards), r->shard);
    const uint32_t host = static_cast<uint32_t>(store_->config().HostIndexForShard(r->shard));
    EXPECT_TRUE(positions.insert({host, r->added_id}).second) << "added_id reused: " << i;
    ++transactions[{host, r->created_at}];
    Result<Cell> back = store_->Get("trips", writes[i].row_key, "BASE", writes[i].ref_key);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(writes[i].body, back->body);
    EXPECT_EQ(r->added_id, back->added_id);
  }
  for (const auto& [key, n] : transactions) multi_cell_transactions += n > 1;
  // Puts in flight together share transactions (the point of PutAsync).
  EXPECT_GT(multi_cell_transactions, 0u);

  // Every put is in its shard's log exactly once.
  size_t logged = 0;
  for (uint32_t s = 0; s < kStoreTestShards; ++s)
    logged += WalkLog("trips", s, heads[s], 100).size();
  EXPECT_EQ(writes.size(), logged);
}

TEST_F(StoreTest, AsyncPutAnswersRetriesAndConflictsAsPutDoes) {
  const Uuid row = Uuid::Random();
  Answers answers;
  store_->PutAsync("trips", W(row, "BASE", 7, {{"v", 1}}), answers.For(0));
  ASSERT_TRUE(answers.WaitForAnswers(1));
  store_->PutAsync("trips", W(row, "BASE", 7, {{"v", 1}}), answers.For(1));  // a retry
  store_->PutAsync("trips", W(row, "BASE", 7, {{"v", 2}}), answers.For(2));  // a conflict
  ASSERT_TRUE(answers.WaitForAnswers(3));
  auto r = answers.results();
  ASSERT_TRUE(r.at(0).ok()) << r.at(0).status().ToString();
  EXPECT_TRUE(r.at(0)->created);
  ASSERT_TRUE(r.at(1).ok()) << r.at(1).status().ToString();
  EXPECT_FALSE(r.at(1)->created);
  EXPECT_EQ(r.at(0)->added_id, r.at(1)->added_id);
  ASSERT_FALSE(r.at(2).ok());
  EXPECT_EQ(StatusCode::kConflict, r.at(2).status().code()) << r.at(2).status().ToString();
  Result<Cell> back = store_->Get("trips", row, "BASE", 7);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(json({{"v", 1}}), back->body);
}

TEST_F(StoreTest, AsyncPutRefusesBadInputOnTheCallingThreadAndWritesNothing) {
  const Uuid row = Uuid::Random();
  struct Case {
    std::string datastore;
    CellWrite write;
    std::string message;
  };
  json deep = json::object();
  for (int i = 0; i < kMaxBodyDepth + 5; ++i) deep = json{{"d", deep}};
  const std::vector<Case> cases = {
      {"nope", W(row, "BASE", 0, {{"v", 1}}), "unknown datastore 'nope'"},
      {"trips", W(row, "NOPE", 0, {{"v", 1}}), "unknown column 'NOPE'"},
      {"trips", W(row, "BASE", -1, {{"v", 1}}), "ref_key must be >= 0"},
      {"trips", W(row, "BASE", 0, json::array({1})), "body must be a JSON object"},
      {"trips", W(row, "BASE", 0, deep), "nests deeper than"},
      {"trips",
       W(row, "BASE", 0,
         {{"big", std::string(static_cast<size_t>(store_->config().limits.max_body_bytes), 'x')}}),
       "over the limit"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const std::thread::id caller = std::this_thread::get_id();
    bool answered = false;
    store_->PutAsync(c.datastore, c.write, [&](Result<PutResult> r) {
      answered = true;
      EXPECT_EQ(caller, std::this_thread::get_id());
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
      EXPECT_THAT(r.status().message(), HasSubstr(c.message));
    });
    EXPECT_TRUE(answered) << "not answered before PutAsync returned";
  }
  Result<std::vector<Cell>> versions = store_->Versions("trips", row, "BASE", {});
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_TRUE(versions->empty());
}

TEST_F(StoreTest, AsyncPutCallbackMayPutAgain) {
  // A chain: each answer issues the next put from the committer thread.
  constexpr int kChain = 20;
  const Uuid row = Uuid::Random();
  Answers answers;
  std::function<void(int)> put = [&](int k) {
    store_->PutAsync("trips", W(row, "BASE", k, {{"k", k}}), [&, k](Result<PutResult> r) {
      answers.For(static_cast<size_t>(k))(r);
      if (r.ok() && k + 1 < kChain) put(k + 1);
    });
  };
  put(0);
  ASSERT_TRUE(answers.WaitForAnswers(kChain));
  for (const auto& [k, r] : answers.results())
    EXPECT_TRUE(r.ok()) << k << ": " << r.status().ToString();
  Result<std::vector<Cell>> versions = store_->Versions("trips", row, "BASE", {});
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(static_cast<size_t>(kChain), versions->size());
}

TEST_F(StoreTest, CloseAnswersEveryAcceptedAsyncPutAndLaterOnesAreUnavailable) {
  std::unique_ptr<CellStore> own = CellStore::Open(store_env->config);
  constexpr int kPuts = 2000;
  Answers answers;
  std::vector<CellWrite> writes;
  for (int i = 0; i < kPuts; ++i) writes.push_back(W(Uuid::Random(), "BASE", 0, {{"i", i}}));
  for (int i = 0; i < kPuts; ++i) own->PutAsync("trips", writes[i], answers.For(i));
  own->Close();  // with puts still queued
  auto results = answers.results();
  ASSERT_EQ(static_cast<size_t>(kPuts), results.size()) << "Close() returned before every answer";
  EXPECT_THAT(answers.Repeated(), ::testing::IsEmpty());
  int ok = 0, refused = 0;
  for (const auto& [i, r] : results) {
    if (r.ok()) {
      ++ok;
      EXPECT_TRUE(store_->Get("trips", writes[i].row_key, "BASE", 0).ok()) << i;
    } else {
      ++refused;
      EXPECT_EQ(StatusCode::kUnavailable, r.status().code()) << r.status().ToString();
      EXPECT_EQ(StatusCode::kNotFound,
                store_->Get("trips", writes[i].row_key, "BASE", 0).status().code())
          << i;
    }
  }
  EXPECT_EQ(kPuts, ok + refused);

  bool answered = false;
  own->PutAsync("trips", W(Uuid::Random(), "BASE", 0, {{"late", true}}), [&](Result<PutResult> r) {
    answered = true;
    EXPECT_EQ(StatusCode::kUnavailable, r.status().code()) << r.status().ToString();
  });
  EXPECT_TRUE(answered);
}

}  // namespace
}  // namespace cellar
