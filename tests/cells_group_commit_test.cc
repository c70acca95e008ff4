// The group commit against a real MariaDB (cells/internal/group_committer.h):
// when a second transaction starts beside one in flight, how long a writer
// lingers for the callers it just answered, and when the commit interval
// holds puts and when it must not. A table lock holds a transaction on the
// server, so what each writer took shows in the transactions puts end up in.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cells/cell_store.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/wait_for.h"
#include "tests/host_log_test_support.h"

namespace cellar {
namespace {

using namespace host_log_test;  // NOLINT: the shared fixture and helpers

// The binary's private MariaDB (host_log_test_support.h).
testing::StoreEnvironment* const env = Environment();

// The group commit's pipelining contract (cells/internal/group_committer.h):
// while one transaction is in flight, a second starts only once
// min_pipelined_cells wait, and then takes all of them. A table lock holds
// the first transaction (and the second) in the server, so what each writer
// took is visible in the transactions the puts end up in.
TEST_F(HostLogTest, ASecondGroupTransactionStartsOnlyOnceMinPipelinedCellsWait) {
  const GroupCommitConfig& gc = env->config.group_commit;
  ASSERT_GE(gc.writer_threads_per_host, 2);
  ASSERT_GE(gc.min_pipelined_cells, 2);
  const int later = gc.min_pipelined_cells;
  auto locker = Connect();
  auto observer = Connect();
  ASSERT_TRUE(locker && observer);
  auto inserts_waiting = [&] { return InsertsWaitingForTheLock(*observer); };
  ASSERT_TRUE(
      locker->Execute("LOCK TABLES " + QualifiedTable(Database(), "cells_" + kDs) + " WRITE").ok());
  std::mutex mu;
  std::condition_variable answered;
  std::vector<std::optional<Result<PutResult>>> results(static_cast<size_t>(later) + 1);
  auto put = [&](size_t i) {
    store().PutAsync(kDs, {RowOnShard(static_cast<uint32_t>(i % kShards)), "BASE", 1, {{"i", i}}},
                     [&, i](Result<PutResult> r) {
                       std::lock_guard<std::mutex> lock(mu);
                       results[i] = std::move(r);
                       answered.notify_all();
                     });
  };
  put(0);
  EXPECT_TRUE(testing::WaitFor([&] { return inserts_waiting() == 1; }, std::chrono::seconds(10)))
      << "the first put's transaction did not reach the server";
  for (size_t i = 1; i < results.size(); ++i) put(i);
  EXPECT_TRUE(testing::WaitFor([&] { return inserts_waiting() == 2; }, std::chrono::seconds(10)))
      << "no second transaction started with " << later << " cells waiting";
  ASSERT_TRUE(locker->Execute("UNLOCK TABLES").ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(answered.wait_for(lock, std::chrono::seconds(30), [&] {
      return std::all_of(results.begin(), results.end(), [](const auto& r) { return r; });
    })) << "puts unanswered after the lock was released";
  }
  for (const auto& r : results) ASSERT_TRUE(r->ok()) << r->status().ToString();
  // Every cell of one transaction carries its created_at.
  std::set<MicrosSinceEpoch> second;
  for (size_t i = 1; i < results.size(); ++i) second.insert((*results[i])->created_at);
  EXPECT_EQ(1u, second.size()) << "the " << later
                               << " cells that waited behind the first transaction were not "
                                  "committed together";
  EXPECT_EQ(0u, second.count((*results[0])->created_at)) << "the first put did not commit alone";
}

// PutAsync calls numbered 0..n-1 whose answers a test waits for.
class AsyncPuts {
 public:
  AsyncPuts(CellStore* store, size_t n) : store_(store), results_(n) {}
  // Puts cell i (row on shard i % kShards).
  void Put(size_t i) {
    store_->PutAsync(kDs, {RowOnShard(static_cast<uint32_t>(i % kShards)), "BASE", 1, {{"i", i}}},
                     [this, i](Result<PutResult> r) {
                       std::lock_guard<std::mutex> lock(mu_);
                       results_[i] = std::move(r);
                       answered_.notify_all();
                     });
  }
  // Puts first..end-1, `gap` apart: callers that come back one by one.
  void PutApart(size_t first, size_t end, std::chrono::milliseconds gap) {
    for (size_t i = first; i < end; ++i) {
      if (i > first) std::this_thread::sleep_for(gap);
      Put(i);
    }
  }
  // True once puts first..end-1 are answered (30 s at most).
  bool WaitAnswered(size_t first, size_t end) {
    std::unique_lock<std::mutex> lock(mu_);
    return answered_.wait_for(lock, std::chrono::seconds(30), [&] {
      for (size_t i = first; i < end; ++i)
        if (!results_[i].has_value()) return false;
      return true;
    });
  }
  // REQUIRES: put i answered.
  const Result<PutResult>& result(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return *results_[i];
  }

 private:
  CellStore* const store_;
  std::mutex mu_;
  std::condition_variable answered_;
  std::vector<std::optional<Result<PutResult>>> results_;
};

// Puts 0..end-1 so that 1..end-1 arrive while put 0's transaction runs: a
// table lock holds it on the server until they are queued. Returns once all
// are answered.
void PutWhileTheFirstTransactionIsHeld(AsyncPuts& puts, size_t end) {
  auto locker = Connect();
  auto observer = Connect();
  ASSERT_TRUE(locker && observer);
  ASSERT_TRUE(
      locker->Execute("LOCK TABLES " + QualifiedTable(Database(), "cells_" + kDs) + " WRITE").ok());
  puts.Put(0);
  EXPECT_TRUE(testing::WaitFor([&] { return InsertsWaitingForTheLock(*observer) == 1; },
                               std::chrono::seconds(10)))
      << "the first put's transaction did not reach the server";
  // PutAsync queues before it returns; fewer than min_pipelined_cells, these
  // wait for the held transaction to end.
  for (size_t i = 1; i < end; ++i) puts.Put(i);
  ASSERT_TRUE(locker->Execute("UNLOCK TABLES").ok());
  ASSERT_TRUE(puts.WaitAnswered(0, end)) << "puts unanswered after the lock was released";
  for (size_t i = 0; i < end; ++i)
    ASSERT_TRUE(puts.result(i).ok()) << puts.result(i).status().ToString();
}

// group_commit.linger_us: a writer that just answered N puts waits (bounded)
// for N to queue before its next transaction, so callers answered together
// commit together again even when they come back a few milliseconds apart.
TEST_F(HostLogTest, AWriterLingersForAsManyPutsAsItJustAnswered) {
  ClusterConfig cfg = env->config;
  cfg.group_commit.writer_threads_per_host = 1;
  cfg.group_commit.linger_us = 100000;
  std::unique_ptr<CellStore> lingering = CellStore::Open(cfg);
  AsyncPuts puts(lingering.get(), 4);
  auto put = [&](size_t i) { puts.Put(i); };
  auto wait_answered = [&](size_t n) { return puts.WaitAnswered(0, n); };
  // Three puts in one transaction: the writer has just answered three.
  std::vector<CellWrite> three;
  for (int i = 0; i < 3; ++i)
    three.push_back({RowOnShard(static_cast<uint32_t>(i)), "BASE", 1, {{"i", i}}});
  for (const auto& r : lingering->PutBatch(kDs, three))
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Three callers come back apart from each other (well within the linger).
  puts.PutApart(0, 3, std::chrono::milliseconds(5));
  ASSERT_TRUE(wait_answered(3)) << "puts unanswered";
  std::set<MicrosSinceEpoch> commits;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(puts.result(i).ok()) << puts.result(i).status().ToString();
    commits.insert(puts.result(i)->created_at);
  }
  EXPECT_EQ(1u, commits.size()) << "the writer did not wait for the three puts it had answered";
  // A lone put still goes once the linger is over.
  put(3);
  ASSERT_TRUE(wait_answered(4)) << "a lone put waited past the linger";
  ASSERT_TRUE(puts.result(3).ok()) << puts.result(3).status().ToString();
  EXPECT_EQ(0u, commits.count(puts.result(3)->created_at));
}

// group_commit.commit_interval_us: while puts arrive as transactions run,
// puts that arrive apart, faster than one per interval, wait for the interval
// and share one transaction; a put after an idle interval goes at once.
TEST_F(HostLogTest, PutsWithinTheCommitIntervalShareATransaction) {
  ClusterConfig cfg = env->config;
  cfg.group_commit.commit_interval_us = 100000;
  std::unique_ptr<CellStore> paced = CellStore::Open(cfg);
  using Clock = std::chrono::steady_clock;
  AsyncPuts puts(paced.get(), 7);
  // A put arrives while the first transaction runs: puts arrive
  // independently of their answers, so pacing them pays.
  ASSERT_NO_FATAL_FAILURE(PutWhileTheFirstTransactionIsHeld(puts, 2));
  // Three puts 5 ms apart, each of which a free writer would take alone.
  puts.PutApart(2, 5, std::chrono::milliseconds(5));
  ASSERT_TRUE(puts.WaitAnswered(2, 5)) << "puts unanswered";
  std::set<MicrosSinceEpoch> commits;
  for (size_t i = 1; i < 5; ++i) {
    ASSERT_TRUE(puts.result(i).ok()) << puts.result(i).status().ToString();
    if (i >= 2) commits.insert(puts.result(i)->created_at);
  }
  EXPECT_EQ(1u, commits.size()) << "puts within the commit interval were not committed together";
  EXPECT_EQ(0u, commits.count(puts.result(1)->created_at));
  // Put i, answered without waiting for the commit interval.
  auto put_not_held = [&](size_t i, const std::string& after) {
    const Clock::time_point start = Clock::now();
    puts.Put(i);
    ASSERT_TRUE(puts.WaitAnswered(i, i + 1)) << "a put after " << after << " unanswered";
    ASSERT_TRUE(puts.result(i).ok()) << puts.result(i).status().ToString();
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(80))
        << "a put after " << after << " waited for the commit interval";
  };
  // Once an interval has passed without a transaction, a put does not wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_NO_FATAL_FAILURE(put_not_held(5, "an idle interval"));
}

// At a higher rate too: puts arriving several per transaction are held until
// min_pipelined_cells wait (well within the interval), and go in one
// transaction rather than one per few puts, each paying its statement set-up
// and fsync (session 58: at 4,000 PutAsync calls/s ~7 cells per transaction).
TEST_F(HostLogTest, PutsArrivingSeveralPerTransactionAreHeldUntilMinPipelinedCellsWait) {
  ClusterConfig cfg = env->config;
  cfg.group_commit.commit_interval_us = 2000000;
  const size_t k = static_cast<size_t>(cfg.group_commit.min_pipelined_cells);
  ASSERT_GE(k, 4u);
  std::unique_ptr<CellStore> paced = CellStore::Open(cfg);
  AsyncPuts puts(paced.get(), 5 + k);
  // Four cells arrive while the first transaction runs.
  ASSERT_NO_FATAL_FAILURE(PutWhileTheFirstTransactionIsHeld(puts, 5));
  // Then k puts, four at a time 2 ms apart: a free writer would take each
  // group (or less) alone.
  for (size_t i = 5; i < 5 + k; i += 4) {
    if (i > 5) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (size_t j = i; j < std::min(i + 4, 5 + k); ++j) puts.Put(j);
  }
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(puts.WaitAnswered(5, 5 + k)) << "puts unanswered";
  std::set<MicrosSinceEpoch> commits;
  for (size_t i = 5; i < 5 + k; ++i) {
    ASSERT_TRUE(puts.result(i).ok()) << puts.result(i).status().ToString();
    commits.insert(puts.result(i)->created_at);
  }
  EXPECT_EQ(1u, commits.size()) << k << " puts arriving four at a time went in " << commits.size()
                                << " transactions";
  // Held until k waited, not for the 2 s interval.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

// A put whose caller waits for its answer is not held right after
// transactions that gathered several cells either (HTTP clients).
TEST_F(HostLogTest, PutsArrivingSeveralCellsPerTransactionAreNotHeldByTheCommitInterval) {
  ClusterConfig cfg = env->config;
  cfg.group_commit.commit_interval_us = 100000;
  std::unique_ptr<CellStore> paced = CellStore::Open(cfg);
  AsyncPuts puts(paced.get(), 5);
  // Four cells arrive while the first transaction runs.
  ASSERT_NO_FATAL_FAILURE(PutWhileTheFirstTransactionIsHeld(puts, 5));
  // Their transaction (4 cells, fewer than min_pipelined_cells) just ended:
  // paced, a put now would wait until 100 ms after it started.
  const auto start = std::chrono::steady_clock::now();
  auto next = paced->Put(kDs, {RowOnShard(5), "BASE", 1, {{"next", true}}});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(60))
      << "a put after transactions that gathered several cells waited for the commit interval";
}

// A caller that waits for each answer before its next put is not paced:
// holding it would only slow it.
TEST_F(HostLogTest, ACallerWaitingForEachAnswerIsNotHeldByTheCommitInterval) {
  ClusterConfig cfg = env->config;
  cfg.group_commit.commit_interval_us = 100000;
  std::unique_ptr<CellStore> paced = CellStore::Open(cfg);
  const auto start = std::chrono::steady_clock::now();
  constexpr int kPuts = 10;
  for (int i = 0; i < kPuts; ++i) {
    auto r = paced->Put(
        kDs, {RowOnShard(static_cast<uint32_t>(i % kShards)), "BASE", 1, {{"sequential", i}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Paced, the puts after the first would wait 100 ms each (0.9 s in all).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500))
      << kPuts << " sequential puts waited for the commit interval";
}

// Nor are a few callers that each wait for their answer and together look
// like a trickle: one or two of them arrive while the others' transaction
// runs. Held, each would wait for the interval on every put (session 46:
// indexes_model_test's put threads took 55-100 s against 28 s).
TEST_F(HostLogTest, AFewCallersWaitingForTheirAnswersAreNotHeldByTheCommitInterval) {
  ClusterConfig cfg = env->config;
  cfg.group_commit.commit_interval_us = 200000;
  std::unique_ptr<CellStore> paced = CellStore::Open(cfg);
  constexpr int kCallers = 4;
  constexpr int kPutsEach = 10;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> callers;
  std::atomic<int> failed{0};
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int i = 0; i < kPutsEach; ++i) {
        auto r = paced->Put(kDs, {RowOnShard(static_cast<uint32_t>((c + i) % kShards)),
                                  "BASE",
                                  1,
                                  {{"caller", c}, {"i", i}}});
        if (!r.ok()) ++failed;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(0, failed.load());
  // Held, at most 3 cells arrive per transaction: 40 puts would take more
  // than ten 200 ms intervals.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000))
      << kCallers << " callers' sequential puts waited for the commit interval";
}

}  // namespace
}  // namespace cellar
