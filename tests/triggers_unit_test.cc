// Unit tests of the trigger building blocks that need no MariaDB or Kafka:
// body filters (MatchesFilter), the keyed pool (KeyedExecutor) and commit
// points (PartitionOffsets). Same binary: trigger YAML, ParseReplayFrom and
// dead-letter encoding (trigger_config_unit_test.cc).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "changelog/kafka/consumer_group_lag.h"
#include "changelog/keyed_consumer.h"
#include "changelog/keyed_executor.h"
#include "changelog/partition_offsets.h"
#include "changelog/relay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/wait_for.h"
#include "triggers/internal/batch_failures.h"
#include "triggers/trigger_config.h"
#include "triggers/trigger_worker.h"

namespace cellar {
namespace {

using namespace std::chrono_literals;
using Op = FieldCondition::Op;
using nlohmann::json;

using ::cellar::testing::WaitFor;

bool Match(Op op, const std::string& field, const json& value, const json& body) {
  return MatchesFilter({FieldCondition{field, op, value}}, body);
}

// ---------------------------------------------------------------------------
// MatchesFilter

const json kTrip = {
    {"status", "requested"}, {"fare", {{"total", 25.5}, {"currency", "EUR"}, {"lines", {1, 2}}}},
    {"passengers", 2},       {"pooled", false},
    {"promo", nullptr},      {"driver", {{"id", "d-7"}, {"rating", {{"stars", 4}}}}}};

TEST(MatchesFilterTest, EmptyFilterMatchesEverything) {
  EXPECT_TRUE(MatchesFilter({}, kTrip));
  EXPECT_TRUE(MatchesFilter({}, json::object()));
  EXPECT_TRUE(MatchesFilter({}, nullptr));
}

TEST(MatchesFilterTest, EqualityAndInequalityOnEveryScalarKind) {
  EXPECT_TRUE(Match(Op::kEq, "status", "requested", kTrip));
  EXPECT_FALSE(Match(Op::kEq, "status", "completed", kTrip));
  EXPECT_TRUE(Match(Op::kNe, "status", "completed", kTrip));
  EXPECT_FALSE(Match(Op::kNe, "status", "requested", kTrip));
  EXPECT_TRUE(Match(Op::kEq, "passengers", 2, kTrip));
  EXPECT_TRUE(Match(Op::kEq, "passengers", 2.0, kTrip)) << "integers and doubles compare by value";
  EXPECT_FALSE(Match(Op::kEq, "passengers", 3, kTrip));
  EXPECT_TRUE(Match(Op::kEq, "pooled", false, kTrip));
  EXPECT_FALSE(Match(Op::kEq, "pooled", true, kTrip));
  EXPECT_TRUE(Match(Op::kNe, "pooled", true, kTrip));
  EXPECT_TRUE(Match(Op::kEq, "promo", nullptr, kTrip));
  EXPECT_FALSE(Match(Op::kNe, "promo", nullptr, kTrip));
}

TEST(MatchesFilterTest, OrderingOnNumbersAndStrings) {
  EXPECT_TRUE(Match(Op::kLt, "fare.total", 30, kTrip));
  EXPECT_FALSE(Match(Op::kLt, "fare.total", 25.5, kTrip));
  EXPECT_TRUE(Match(Op::kLe, "fare.total", 25.5, kTrip));
  EXPECT_FALSE(Match(Op::kLe, "fare.total", 25, kTrip));
  EXPECT_TRUE(Match(Op::kGt, "fare.total", 25, kTrip));
  EXPECT_FALSE(Match(Op::kGt, "fare.total", 25.5, kTrip));
  EXPECT_TRUE(Match(Op::kGe, "fare.total", 25.5, kTrip));
  EXPECT_FALSE(Match(Op::kGe, "fare.total", 26, kTrip));
  EXPECT_TRUE(Match(Op::kGe, "passengers", -1, kTrip));
  // Strings compare lexicographically.
  EXPECT_TRUE(Match(Op::kLt, "status", "s", kTrip));
  EXPECT_TRUE(Match(Op::kGt, "status", "requeste", kTrip));
  EXPECT_TRUE(Match(Op::kGe, "status", "requested", kTrip));
  EXPECT_FALSE(Match(Op::kGt, "status", "requested", kTrip));
  EXPECT_TRUE(Match(Op::kLe, "driver.id", "d-7", kTrip));
}

// Large integers compare exactly, as a body's JSON holds them: through double
// 2^53 + 1 equals 2^53 and UINT64_MAX equals 2^64, so a filter on an id
// matched its neighbour.
TEST(MatchesFilterTest, LargeIntegersCompareExactly) {
  const json body = json::parse(
      R"({"id": 9007199254740993, "big": 18446744073709551615, "neg": -9223372036854775808})");
  EXPECT_FALSE(Match(Op::kEq, "id", int64_t{9007199254740992}, body));
  EXPECT_TRUE(Match(Op::kEq, "id", int64_t{9007199254740993}, body));
  EXPECT_TRUE(Match(Op::kGt, "id", int64_t{9007199254740992}, body));
  EXPECT_TRUE(Match(Op::kLt, "id", uint64_t{9007199254740994}, body));
  EXPECT_FALSE(Match(Op::kEq, "big", uint64_t{18446744073709551614u}, body));
  EXPECT_TRUE(Match(Op::kEq, "big", uint64_t{18446744073709551615u}, body));
  EXPECT_TRUE(Match(Op::kGt, "big", int64_t{9223372036854775807}, body));
  EXPECT_TRUE(Match(Op::kLt, "neg", uint64_t{0}, body))
      << "a negative integer is below any unsigned";
  EXPECT_TRUE(Match(Op::kLt, "neg", int64_t{-9223372036854775807}, body));
  EXPECT_FALSE(Match(Op::kEq, "big", int64_t{-1}, body)) << "not equal through a cast";
  // Integers against doubles still compare by value.
  EXPECT_TRUE(Match(Op::kLt, "id", 1e16, body));
  EXPECT_TRUE(Match(Op::kGt, "big", 1.8e19, body));
}

TEST(MatchesFilterTest, InAndExists) {
  EXPECT_TRUE(Match(Op::kIn, "status", json::array({"accepted", "requested"}), kTrip));
  EXPECT_FALSE(Match(Op::kIn, "status", json::array({"accepted", "completed"}), kTrip));
  EXPECT_FALSE(Match(Op::kIn, "status", json::array(), kTrip));
  EXPECT_TRUE(Match(Op::kIn, "passengers", json::array({1, 2.0, "2"}), kTrip));
  EXPECT_FALSE(Match(Op::kIn, "passengers", json::array({"2", true}), kTrip))
      << "'in' compares with the same type rules as '='";
  EXPECT_TRUE(Match(Op::kExists, "fare", nullptr, kTrip));
  EXPECT_TRUE(Match(Op::kExists, "fare.currency", nullptr, kTrip));
  EXPECT_TRUE(Match(Op::kExists, "promo", nullptr, kTrip)) << "a null field exists";
  EXPECT_FALSE(Match(Op::kExists, "tip", nullptr, kTrip));
  EXPECT_FALSE(Match(Op::kExists, "fare.tip", nullptr, kTrip));
}

TEST(MatchesFilterTest, NestedFields) {
  EXPECT_TRUE(Match(Op::kEq, "driver.rating.stars", 4, kTrip));
  EXPECT_TRUE(Match(Op::kGt, "driver.rating.stars", 3, kTrip));
  EXPECT_FALSE(Match(Op::kEq, "driver.rating.stars", 5, kTrip));
  // A path through a non-object is a missing field.
  EXPECT_FALSE(Match(Op::kEq, "passengers.count", 2, kTrip));
  EXPECT_FALSE(Match(Op::kExists, "fare.lines.0", nullptr, kTrip)) << "no array indexing";
  EXPECT_FALSE(Match(Op::kExists, "status.length", nullptr, kTrip));
  // A whole object compares as not comparable.
  EXPECT_FALSE(Match(Op::kEq, "driver", json{{"id", "d-7"}}, kTrip));
  // Empty path segments never match.
  EXPECT_FALSE(Match(Op::kExists, "fare.", nullptr, kTrip));
  EXPECT_FALSE(Match(Op::kExists, ".fare", nullptr, kTrip));
}

TEST(MatchesFilterTest, MissingFieldsFailEveryConditionButNotEqual) {
  for (Op op : {Op::kEq, Op::kLt, Op::kLe, Op::kGt, Op::kGe, Op::kIn, Op::kExists}) {
    const json value = op == Op::kIn ? json::array({1}) : json(1);
    EXPECT_FALSE(Match(op, "tip", value, kTrip)) << static_cast<int>(op);
    EXPECT_FALSE(Match(op, "fare.tip.amount", value, kTrip)) << static_cast<int>(op);
    EXPECT_FALSE(Match(op, "tip", value, json::object())) << static_cast<int>(op);
    EXPECT_FALSE(Match(op, "tip", value, nullptr)) << "a null body";
    EXPECT_FALSE(Match(op, "tip", value, json::array({1}))) << "an array body";
  }
  EXPECT_TRUE(Match(Op::kNe, "tip", 1, kTrip));
  EXPECT_TRUE(Match(Op::kNe, "fare.tip.amount", 1, kTrip));
  EXPECT_TRUE(Match(Op::kNe, "tip", 1, nullptr));
}

TEST(MatchesFilterTest, TypeMismatchesNeverMatchAndNeverThrow) {
  // "25.5" the string is not 25.5 the number.
  EXPECT_FALSE(Match(Op::kEq, "fare.total", "25.5", kTrip));
  EXPECT_TRUE(Match(Op::kNe, "fare.total", "25.5", kTrip));
  for (Op op : {Op::kLt, Op::kLe, Op::kGt, Op::kGe}) {
    EXPECT_FALSE(Match(op, "fare.total", "100", kTrip)) << static_cast<int>(op);
    EXPECT_FALSE(Match(op, "status", 1, kTrip)) << static_cast<int>(op);
    EXPECT_FALSE(Match(op, "pooled", true, kTrip)) << "booleans have no order";
    EXPECT_FALSE(Match(op, "pooled", 0, kTrip)) << "false is not 0";
    EXPECT_FALSE(Match(op, "promo", 0, kTrip)) << "null is not 0";
    EXPECT_FALSE(Match(op, "fare", 1, kTrip)) << "objects are not comparable";
    EXPECT_FALSE(Match(op, "fare.lines", 1, kTrip)) << "arrays are not comparable";
  }
  EXPECT_FALSE(Match(Op::kEq, "pooled", 0, kTrip));
  EXPECT_FALSE(Match(Op::kEq, "promo", 0, kTrip));
  EXPECT_FALSE(Match(Op::kEq, "passengers", true, kTrip));
  // null orders like an equal value against null only.
  EXPECT_TRUE(Match(Op::kLe, "promo", nullptr, kTrip));
  EXPECT_FALSE(Match(Op::kLt, "promo", nullptr, kTrip));
  EXPECT_NO_THROW(Match(Op::kIn, "status", "requested", kTrip));  // 'in' with a scalar
}

TEST(MatchesFilterTest, AllConditionsMustHold) {
  std::vector<FieldCondition> f = {{"status", Op::kEq, "requested"},
                                   {"fare.total", Op::kGe, 20},
                                   {"fare.currency", Op::kIn, json::array({"EUR", "USD"})}};
  EXPECT_TRUE(MatchesFilter(f, kTrip));
  json cheap = kTrip;
  cheap["fare"]["total"] = 19.99;
  EXPECT_FALSE(MatchesFilter(f, cheap));
  json other = kTrip;
  other["fare"]["currency"] = "GBP";
  EXPECT_FALSE(MatchesFilter(f, other));
  json cancelled = kTrip;
  cancelled["status"] = "cancelled";
  EXPECT_FALSE(MatchesFilter(f, cancelled));
}

// ---------------------------------------------------------------------------
// KeyedExecutor

// Submits through Submit, or through SubmitMany in bursts of `burst` tasks.
void CheckOneKeyInSubmissionOrderOneAtATime(size_t burst) {
  KeyedExecutor ex(8);
  std::vector<std::pair<std::string, std::function<void()>>> pending_burst;
  constexpr int kKeys = 12, kTasks = 150;
  std::mutex mu;
  std::map<std::string, std::vector<int>> order;
  std::map<std::string, int> running;
  std::atomic<int> overlaps{0}, concurrent{0}, max_concurrent{0};
  for (int t = 0; t < kTasks; ++t)
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = "row" + std::to_string(k);
      std::function<void()> task = [&, key, t] {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (running[key]++ > 0) ++overlaps;
        }
        int now = ++concurrent, m = max_concurrent;
        while (now > m && !max_concurrent.compare_exchange_weak(m, now)) {
        }
        thread_local std::mt19937 rng(std::random_device{}());
        if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
        --concurrent;
        std::lock_guard<std::mutex> lock(mu);
        --running[key];
        order[key].push_back(t);
      };
      if (burst == 0) {
        ex.Submit(key, std::move(task));
        continue;
      }
      pending_burst.emplace_back(key, std::move(task));
      if (pending_burst.size() == burst) ex.SubmitMany(std::exchange(pending_burst, {}));
    }
  if (!pending_burst.empty()) ex.SubmitMany(std::move(pending_burst));
  ASSERT_TRUE(ex.WaitIdle(30000));
  EXPECT_EQ(ex.pending(), 0u);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(max_concurrent.load(), 1);
  EXPECT_LE(max_concurrent.load(), 8);
  ASSERT_EQ(order.size(), static_cast<size_t>(kKeys));
  std::vector<int> expected(kTasks);
  for (int t = 0; t < kTasks; ++t) expected[t] = t;
  for (const auto& [key, seq] : order) EXPECT_EQ(seq, expected) << key;
}

TEST(KeyedExecutorTest, TasksOfOneKeyRunInSubmissionOrderOneAtATime) {
  CheckOneKeyInSubmissionOrderOneAtATime(0);
}

TEST(KeyedExecutorTest, SubmitManyKeepsEachKeysOrderOneAtATime) {
  for (size_t burst : {1, 7, 256}) {
    SCOPED_TRACE("burst " + std::to_string(burst));
    CheckOneKeyInSubmissionOrderOneAtATime(burst);
  }
}

// Blocks tasks until released (bounded, so a bug cannot hang the test).
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 20s, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(KeyedExecutorTest, DifferentKeysRunConcurrentlyAndASlowKeyStallsOnlyItself) {
  KeyedExecutor ex(4);
  Gate gate;
  std::atomic<int> started{0};
  // Three keys blocked at once: they must all be running together.
  for (const char* key : {"a", "b", "c"})
    ex.Submit(key, [&] {
      ++started;
      gate.Wait();
    });
  ASSERT_TRUE(WaitFor([&] { return started == 3; }, 5s)) << "only " << started << " ran at once";
  // A second task of a blocked key waits for it...
  std::atomic<bool> a2_ran{false};
  ex.Submit("a", [&] { a2_ran = true; });
  // ...while another key's tasks flow on the free thread.
  std::atomic<int> d_done{0};
  for (int i = 0; i < 100; ++i) ex.Submit("d", [&] { ++d_done; });
  ASSERT_TRUE(WaitFor([&] { return d_done == 100; }, 5s)) << d_done;
  EXPECT_FALSE(a2_ran.load()) << "a task overtook the running task of its key";
  EXPECT_EQ(ex.pending(), 4u);  // a, b, c running; a's second task queued
  EXPECT_FALSE(ex.WaitIdle(50));
  gate.Open();
  EXPECT_TRUE(ex.WaitIdle(5000));
  EXPECT_TRUE(a2_ran.load());
  EXPECT_EQ(ex.pending(), 0u);
}

// One burst wakes a thread for every newly ready key (up to the pool size):
// three blocked keys of one SubmitMany must run at once.
TEST(KeyedExecutorTest, SubmitManyWakesAThreadPerReadyKey) {
  KeyedExecutor ex(4);
  Gate gate;
  std::atomic<int> started{0};
  std::vector<std::pair<std::string, std::function<void()>>> tasks;
  for (const char* key : {"a", "b", "c"})
    tasks.emplace_back(key, [&] {
      ++started;
      gate.Wait();
    });
  std::atomic<bool> a2_ran{false};
  tasks.emplace_back("a", [&] { a2_ran = true; });
  ex.SubmitMany(std::move(tasks));
  ASSERT_TRUE(WaitFor([&] { return started == 3; }, 5s)) << "only " << started << " ran at once";
  EXPECT_FALSE(a2_ran.load()) << "a task overtook the running task of its key";
  gate.Open();
  EXPECT_TRUE(ex.WaitIdle(5000));
  EXPECT_TRUE(a2_ran.load());
}

// Shutdown() while the last task still runs: the idle threads it wakes find
// that task counted and sleep again, and must be woken once it ends. (Found
// by cellar-billing --replay, which hung on exit: half of a pool's threads
// never left and Shutdown() joined them forever.)
TEST(KeyedExecutorTest, ShutdownWhileTheLastTaskRunsLetsEveryThreadLeave) {
  KeyedExecutor ex(4);
  Gate gate;
  std::atomic<bool> started{false};
  ex.Submit("k", [&] {
    started = true;
    gate.Wait();
  });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }, 5s));
  std::atomic<bool> shut_down{false};
  std::thread stopper([&] {
    ex.Shutdown();
    shut_down = true;
  });
  // Lets Shutdown() wake the three idle threads while the task is counted
  // (an interleaving to create, not a result to wait for).
  std::this_thread::sleep_for(50ms);
  gate.Open();
  EXPECT_TRUE(WaitFor([&] { return shut_down.load(); }, 5s))
      << "Shutdown() did not return: idle threads were not woken when the last task ended";
  // On failure, wake the stranded threads (each Submit wakes one) so the test ends.
  for (int i = 0; !shut_down && i < 100; ++i) {
    ex.Submit("rescue" + std::to_string(i), [] {});
    WaitFor([&] { return shut_down.load(); }, 100ms);
  }
  stopper.join();
}

// A task that cannot return (a hung handler) gives its key to a
// continuation: the continuation runs before the key's later tasks while the
// task still runs, a new thread takes the task's place (a pool of one keeps
// running other keys), and the task's eventual return changes nothing.
TEST(KeyedExecutorTest, ADetachedTasksKeyGoesOnWithoutItOnANewThread) {
  KeyedExecutor ex(1);
  Gate hung;
  std::atomic<bool> hung_returned{false};
  std::promise<KeyedExecutor::RunningTask> running;
  ex.Submit("row", [&] {
    running.set_value(ex.Current());
    hung.Wait();
    hung_returned = true;
  });
  std::mutex mu;
  std::vector<std::string> order;
  auto record = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(std::move(what));
  };
  ex.Submit("row", [&] { record("row later"); });
  const KeyedExecutor::RunningTask task = running.get_future().get();
  EXPECT_EQ(task.key, "row");
  EXPECT_NE(task.ticket, 0u);
  EXPECT_EQ(KeyedExecutor::RunningTask{}.ticket, ex.Current().ticket) << "not a task of the pool";
  EXPECT_EQ(ex.pending(), 2u);
  ASSERT_TRUE(ex.Detach(task, [&] { record("continuation"); }));
  EXPECT_FALSE(ex.Detach(task, [] {})) << "a task is detached once";
  std::atomic<bool> other_ran{false};
  ex.Submit("other", [&] { other_ran = true; });
  ASSERT_TRUE(ex.WaitIdle(5000)) << "the key waited for the detached task";
  EXPECT_TRUE(other_ran.load());
  EXPECT_FALSE(hung_returned.load());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(order, (std::vector<std::string>{"continuation", "row later"}));
  }
  hung.Open();
  ASSERT_TRUE(WaitFor([&] { return hung_returned.load(); }, 5s));
  // The returned task's thread left; the key and the pool go on.
  std::atomic<int> after{0};
  for (int i = 0; i < 10; ++i) ex.Submit(i % 2 ? "row" : "other", [&] { ++after; });
  ASSERT_TRUE(ex.WaitIdle(5000));
  EXPECT_EQ(after.load(), 10);
  EXPECT_EQ(ex.pending(), 0u);
  ex.Shutdown();  // joins the detached thread and its replacement
}

TEST(KeyedExecutorTest, ATaskThatReturnedCannotBeDetached) {
  KeyedExecutor ex(2);
  std::promise<KeyedExecutor::RunningTask> running;
  ex.Submit("row", [&] { running.set_value(ex.Current()); });
  const KeyedExecutor::RunningTask task = running.get_future().get();
  ASSERT_TRUE(ex.WaitIdle(5000));
  std::atomic<bool> ran{false};
  EXPECT_FALSE(ex.Detach(task, [&] { ran = true; }));
  // Nor the key's next task, which runs under another ticket.
  Gate gate;
  std::promise<KeyedExecutor::RunningTask> next;
  ex.Submit("row", [&] {
    next.set_value(ex.Current());
    gate.Wait();
  });
  EXPECT_NE(next.get_future().get().ticket, task.ticket);
  EXPECT_FALSE(ex.Detach(task, [&] { ran = true; }));
  gate.Open();
  ASSERT_TRUE(ex.WaitIdle(5000));
  EXPECT_FALSE(ran.load());
}

TEST(KeyedExecutorTest, WaitIdleAndShutdown) {
  {
    KeyedExecutor ex(2);
    EXPECT_TRUE(ex.WaitIdle(0)) << "a new pool is idle";
    Gate gate;
    ex.Submit("k", [&] { gate.Wait(); });
    ex.Submit("k", [] {});
    EXPECT_EQ(ex.pending(), 2u);
    EXPECT_FALSE(ex.WaitIdle(30));
    gate.Open();
    EXPECT_TRUE(ex.WaitIdle(5000));
    EXPECT_EQ(ex.pending(), 0u);
  }
  // Shutdown runs what is queued, then joins; it is idempotent.
  std::atomic<int> ran{0};
  KeyedExecutor ex(1);
  Gate gate;
  ex.Submit("x", [&] {
    gate.Wait();
    ++ran;
  });
  for (int i = 0; i < 20; ++i) ex.Submit(i % 2 ? "x" : "y", [&] { ++ran; });
  std::thread opener([&] {
    std::this_thread::sleep_for(20ms);  // lets Shutdown() start while work is queued
    gate.Open();
  });
  ex.Shutdown();
  opener.join();
  EXPECT_EQ(ran.load(), 21);
  EXPECT_EQ(ex.pending(), 0u);
  ex.Shutdown();
}

// ---------------------------------------------------------------------------
// PartitionOffsets

TEST(PartitionOffsetsTest, OldestOpenTimestampIsTheFirstRecordNotDone) {
  PartitionOffsets p;
  EXPECT_EQ(p.oldest_open_timestamp_ms(), 0);
  p.Track(5, 1000);
  p.Track(6, 2000);
  p.Track(7, 3000);
  EXPECT_EQ(p.oldest_open_timestamp_ms(), 1000);
  p.Done(6);  // out of order: 5 is still the oldest not done
  EXPECT_EQ(p.oldest_open_timestamp_ms(), 1000);
  p.Done(5);
  EXPECT_EQ(p.oldest_open_timestamp_ms(), 3000);
  p.Done(7);
  EXPECT_EQ(p.oldest_open_timestamp_ms(), 0);
}

TEST(OldestUnprocessedAgeTest, AgeFromTheOldestTimestampAndZeroWhenCaughtUp) {
  PartitionProgress p;
  p.lag = 3;
  p.oldest_timestamp_ms = 10'000;
  EXPECT_DOUBLE_EQ(OldestUnprocessedAgeSeconds(p, 12'500), 2.5);
  EXPECT_DOUBLE_EQ(OldestUnprocessedAgeSeconds(p, 9'000), 0);  // a clock behind: never negative
  p.oldest_timestamp_ms = 0;                                   // not known
  EXPECT_DOUBLE_EQ(OldestUnprocessedAgeSeconds(p, 12'500), 0);
  p.lag = 0;
  p.oldest_timestamp_ms = 10'000;
  EXPECT_DOUBLE_EQ(OldestUnprocessedAgeSeconds(p, 12'500), 0);  // caught up

  GroupLag g;
  EXPECT_DOUBLE_EQ(g.OldestAgeSeconds(5'000), 0);
  g.partitions.push_back({"t", 0, 4, 9, 5, 3'000});
  g.partitions.push_back({"t", 1, 4, 9, 5, 1'000});
  g.partitions.push_back({"t", 2, 9, 9, 0, 0});
  EXPECT_DOUBLE_EQ(g.OldestAgeSeconds(5'000), 4);  // the oldest partition's

  RelayStreamStatus st;
  st.lag = 2;
  st.oldest_unpublished_created_at = 1'000'000;
  EXPECT_DOUBLE_EQ(OldestUnpublishedAgeSeconds(st, 3'500'000), 2.5);
  st.lag = 0;
  EXPECT_DOUBLE_EQ(OldestUnpublishedAgeSeconds(st, 3'500'000), 0);
}

TEST(PartitionOffsetsTest, OutOfOrderCompletionCommitsOnlyTheContiguousPrefix) {
  PartitionOffsets p;
  EXPECT_EQ(p.committable(), -1);
  for (int64_t o = 10; o < 20; ++o) p.Track(o);
  EXPECT_EQ(p.open(), 10u);
  p.Done(12);
  p.Done(11);
  EXPECT_EQ(p.committable(), -1) << "10 is not done";
  p.Done(10);
  EXPECT_EQ(p.committable(), 12);
  EXPECT_EQ(p.open(), 7u);
  p.Done(15);
  p.Done(19);
  EXPECT_EQ(p.committable(), 12);
  p.Done(13);
  EXPECT_EQ(p.committable(), 13);
  p.Done(14);
  EXPECT_EQ(p.committable(), 15);
  p.Done(16);
  p.Done(17);
  EXPECT_EQ(p.committable(), 17);
  p.Done(18);
  EXPECT_EQ(p.committable(), 19);
  EXPECT_EQ(p.open(), 0u);
  // Done twice, or for an offset never tracked, changes nothing.
  p.Done(18);
  p.Done(100);
  EXPECT_EQ(p.committable(), 19);
  // Later records continue from there.
  p.Track(20);
  p.Track(21);
  p.Done(21);
  EXPECT_EQ(p.committable(), 19);
  p.Done(20);
  EXPECT_EQ(p.committable(), 21);
}

TEST(PartitionOffsetsTest, GapsInOffsetsAndRandomCompletionOrder) {
  PartitionOffsets gaps;  // offsets need not be contiguous (e.g. transaction markers)
  for (int64_t o : {5, 8, 9, 30}) gaps.Track(o);
  gaps.Done(8);
  EXPECT_EQ(gaps.committable(), -1);
  gaps.Done(5);
  EXPECT_EQ(gaps.committable(), 8);
  gaps.Done(30);
  EXPECT_EQ(gaps.committable(), 8);
  gaps.Done(9);
  EXPECT_EQ(gaps.committable(), 30);

  std::mt19937 rng(42);
  for (int round = 0; round < 50; ++round) {
    PartitionOffsets p;
    std::vector<int64_t> offs(200);
    for (int i = 0; i < 200; ++i) {
      offs[i] = i;
      p.Track(i);
    }
    std::shuffle(offs.begin(), offs.end(), rng);
    std::set<int64_t> done;
    int64_t last = -1;
    for (int64_t o : offs) {
      p.Done(o);
      done.insert(o);
      int64_t prefix = -1;
      while (done.count(prefix + 1)) ++prefix;
      ASSERT_EQ(p.committable(), prefix) << "round " << round;
      ASSERT_GE(p.committable(), last) << "the commit point moved back";
      last = p.committable();
    }
    EXPECT_EQ(p.committable(), 199);
  }
}

// Registration errors are values naming what was wrong, and nothing is
// registered (no Kafka is needed: on() only records the handler).
TEST(TriggerWorkerTest, BadRegistrationsAreInvalidArgument) {
  auto config = ParseClusterConfig(
      "mysql:\n  hosts:\n    - { name: db1, address: 127.0.0.1, port: 3306, shards: \"0-7\" }\n"
      "shards: 8\nkafka:\n  brokers: \"127.0.0.1:9\"\n"
      "datastores:\n  - name: trips\n    columns:\n      BASE: {}\n",
      "<test>");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  TriggerWorker w(*config);
  auto noop = [](const CellEvent&, TriggerContext&) { return Status::Ok(); };
  struct Case {
    std::string datastore, column, name, message;
    int max_attempts = 5;
  };
  const std::vector<Case> cases = {
      {"nope", "BASE", "t1", "unknown datastore 'nope'"},
      {"trips", "NOPE", "t1", "has no column 'NOPE'"},
      {"trips", "BASE", "Bad-Name", "must match"},
      {"trips", "BASE", "t1", "retry.max_attempts must be >= 1", 0},
  };
  for (const Case& c : cases) {
    TriggerOptions o;
    o.retry.max_attempts = c.max_attempts;
    Status s = w.on(c.datastore, c.column, c.name, noop, o);
    EXPECT_EQ(StatusCode::kInvalidArgument, s.code()) << c.message;
    EXPECT_THAT(s.message(), ::testing::HasSubstr(c.message));
  }
  ASSERT_EQ("OK", w.on("trips", "BASE", "t1", noop).ToString()) << "nothing was registered before";
  Status dup = w.on("trips", "BASE", "t1", noop);
  EXPECT_EQ(StatusCode::kInvalidArgument, dup.code());
  EXPECT_THAT(dup.message(), ::testing::HasSubstr("duplicate trigger name 't1'"));

  // Batch handlers: the same checks, and the batch bounds.
  auto batch_noop = [](const std::vector<const CellEvent*>&, TriggerContext&) {
    return Status::Ok();
  };
  struct BatchCase {
    int max_batch, linger_ms;
    std::string message;
  };
  for (const BatchCase& c : std::vector<BatchCase>{{0, 0, "max_batch must be within 1..10000"},
                                                   {10001, 0, "max_batch must be within"},
                                                   {10, -1, "batch_linger_ms must be within"},
                                                   {10, 60001, "batch_linger_ms must be within"}}) {
    TriggerOptions o;
    o.max_batch = c.max_batch;
    o.batch_linger_ms = c.linger_ms;
    Status s = w.on_batch("trips", "BASE", "b1", batch_noop, o);
    EXPECT_EQ(StatusCode::kInvalidArgument, s.code()) << c.message;
    EXPECT_THAT(s.message(), ::testing::HasSubstr(c.message));
  }
  Status dup_batch = w.on_batch("trips", "BASE", "t1", batch_noop);
  EXPECT_THAT(dup_batch.message(), ::testing::HasSubstr("duplicate trigger name 't1'"));
  EXPECT_THAT(w.on_batch("nope", "BASE", "b1", batch_noop).message(),
              ::testing::HasSubstr("unknown datastore 'nope'"));
  EXPECT_EQ("OK", w.on_batch("trips", "BASE", "b1", batch_noop).ToString());
}

// A reported failure sends its event and its row's later events of the call
// again, in order; the row's earlier events and every other row are done.
TEST(BatchFailuresTest, AFailedEventGoesAgainWithItsRowsLaterEventsOnly) {
  //                               0    1    2    3    4    5    6
  const std::vector<std::string> rows = {"a", "b", "a", "c", "a", "b", "c"};
  internal::BatchRetry r =
      internal::SplitReportedFailures(rows, {{2, Unavailable("a2 down")}, {5, Status::Ok()}});
  EXPECT_EQ(r.done, (std::vector<size_t>{0, 1, 3, 6}));
  EXPECT_EQ(r.again, (std::vector<size_t>{2, 4, 5}));
  ASSERT_EQ(r.why.size(), 3u);
  EXPECT_EQ(r.why[0].ToString(), "Unavailable: a2 down");
  EXPECT_EQ(r.why[1].code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.why[1].message(), ::testing::HasSubstr("an earlier event of row a in its batch "
                                                       "failed: Unavailable: a2 down"));
  EXPECT_EQ(r.why[2].code(), StatusCode::kUnavailable) << "an OK reason is still a failure";
  EXPECT_TRUE(r.retryable);

  // Two failures in one row: the first one decides where the row goes again.
  r = internal::SplitReportedFailures(rows, {{4, Unavailable("x")}, {2, Unavailable("y")}});
  EXPECT_EQ(r.again, (std::vector<size_t>{2, 4}));
  EXPECT_EQ(r.why[1].ToString(), "Unavailable: x") << "a failed event keeps its own reason";

  // Only FailedPrecondition failures: set aside at once.
  r = internal::SplitReportedFailures(rows, {{3, FailedPrecondition("bad c")}});
  EXPECT_EQ(r.again, (std::vector<size_t>{3, 6}));
  EXPECT_FALSE(r.retryable);

  r = internal::SplitReportedFailures(rows, {});
  EXPECT_EQ(r.done.size(), rows.size());
  EXPECT_TRUE(r.again.empty());
}

}  // namespace
}  // namespace cellar
