// Consumer-group behaviour of in-process triggers: status() (commits, lag,
// latency) and a clean Stop() that leaves nothing to re-deliver, and two
// workers of one trigger sharing its partitions, one taking over when the
// other stops. Part of the trigger_test binary.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <iterator>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

// ---------------------------------------------------------------------------

TEST(TriggerTest, StatusReportsCommitsAndLagAndACleanStopLeavesNothingToRedeliver) {
  auto c = MakeCluster("tg_resume", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "resume-relay");
  ASSERT_TRUE(relay);
  auto handler = [](HandledLog* log) {
    return [log](const CellEvent& e, TriggerContext&) {
      std::this_thread::sleep_for(5ms);  // the handler's work
      log->Add(e);
      return Status::Ok();
    };
  };
  TriggerOptions opts;
  opts.concurrency = 4;
  auto body = [](size_t i) { return nlohmann::json{{"i", i}}; };

  HandledLog first, second;
  std::set<CellAddr> all = PutVersion(*c->store, NewRows(40), "BASE", 0, body);
  auto a = std::make_unique<TriggerWorker>(c->config, Opts("resume-a"));
  ASSERT_EQ("OK", a->on("trips", "BASE", "resume", handler(&first), opts).ToString());
  ASSERT_TRUE(a->Start().ok());
  ASSERT_TRUE(WaitFor([&] { return first.Missing(all).empty(); }, 30s));

  // Status: per partition of the change log, offsets committed up to the end, no lag.
  const std::string cells = ChangeLogTopic(c->config.kafka, "trips");
  std::string why;
  const bool caught_up = WaitFor(
      [&] {
        auto st = a->status();
        if (st.size() != 1 || st[0].name != "resume") {
          why = "status() lists " + std::to_string(st.size()) + " triggers";
          return false;
        }
        int cell_partitions = 0;
        for (const auto& p : st[0].partitions) {
          if (p.topic != cells) continue;
          ++cell_partitions;
          if (p.committed < 0 || p.lag != 0) {
            why = "partition " + std::to_string(p.partition) + " committed " +
                  std::to_string(p.committed) + " lag " + std::to_string(p.lag);
            return false;
          }
        }
        why = std::to_string(cell_partitions) + " change-log partitions in status()";
        return cell_partitions == kPartitions;
      },
      30s, 50ms);
  EXPECT_TRUE(caught_up) << why;
  uint64_t handled = 0;
  const auto status = a->status();  // the loop below must not outlive it
  for (const auto& p : status[0].partitions) {
    handled += p.handled;
    if (p.handled > 0) {
      EXPECT_GT(p.latency_p50_ms, 0) << p.partition;
      EXPECT_GE(p.latency_p99_ms, p.latency_p50_ms) << p.partition;
    }
  }
  EXPECT_EQ(handled, all.size());
  auto lag = ReadTriggerLag(c->config, "trips", "resume");
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->total_lag, 0);
  EXPECT_EQ(lag->dead_letters, 0);
  const std::string text = a->metrics().Render();
  EXPECT_EQ(MetricValue(text, "cellar_trigger_handled_total", {{"trigger", "resume"}}),
            static_cast<double>(all.size()))
      << text;
  EXPECT_EQ(MetricValue(text, "cellar_trigger_lag_events", {{"trigger", "resume"}}), 0) << text;

  // More writes, and Stop() while they are being handled: it finishes the
  // handler calls in flight (starting no new one), commits, and a new worker
  // of the same trigger takes the rest with no event handled twice.
  std::set<CellAddr> more = PutVersion(*c->store, NewRows(80), "BASE", 0, body);
  all.insert(more.begin(), more.end());
  ASSERT_TRUE(WaitFor([&] { return first.total() > 45; }, 30s));
  a->Stop();
  const size_t handled_by_a = first.total();
  a.reset();
  // Written while no worker runs: only the next one can handle these.
  std::set<CellAddr> later = PutVersion(*c->store, NewRows(40), "BASE", 0, body);
  all.insert(later.begin(), later.end());
  TriggerWorker b(c->config, Opts("resume-b"));
  ASSERT_EQ("OK", b.on("trips", "BASE", "resume", handler(&second), opts).ToString());
  ASSERT_TRUE(b.Start().ok());
  // Handled by neither worker.
  auto missing = [&] { return second.Missing(first.Missing(all)); };
  ASSERT_TRUE(WaitFor([&] { return missing().empty(); }, 30s)) << DescribeSome(missing());
  std::vector<CellAddr> twice;
  for (const Cell& e : second.Events())
    if (first.Has(AddrOf(e))) twice.push_back(AddrOf(e));
  EXPECT_THAT(twice, IsEmpty()) << "handled again after a clean stop";
  EXPECT_THAT(second.Missing(later), IsEmpty());
  EXPECT_EQ(first.Duplicates().second + second.Duplicates().second, 0u);
  std::cout << "[ trigger ] clean stop: " << handled_by_a << " events before Stop(), "
            << second.total() << " after the restart, " << twice.size() << " twice\n";
  b.Stop();
  relay->Stop();
}

// ---------------------------------------------------------------------------

// The change-log partitions a worker is handling now, according to status().
std::set<int32_t> CellPartitions(const TriggerWorker& w, const std::string& topic) {
  std::set<int32_t> out;
  for (const auto& st : w.status())
    for (const auto& p : st.partitions)
      if (p.topic == topic) out.insert(p.partition);
  return out;
}

// True when `w` has committed offsets (since it was last assigned them) on each of `parts`.
bool CommittedOnEvery(const TriggerWorker& w, const std::string& topic,
                      const std::set<int32_t>& parts) {
  std::set<int32_t> committed;
  for (const auto& st : w.status())
    for (const auto& p : st.partitions)
      if (p.topic == topic && p.committed > 0) committed.insert(p.partition);
  return std::includes(committed.begin(), committed.end(), parts.begin(), parts.end());
}

TEST(TriggerTest, TwoWorkersOfOneTriggerShareItsPartitionsAndOneTakesOverAfterTheOtherStops) {
  auto c = MakeCluster("tg_share", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "share-relay");
  ASSERT_TRUE(relay);
  HandledLog log_a, log_b;
  auto handler = [](HandledLog* log) {
    return [log](const CellEvent& e, TriggerContext&) {
      std::this_thread::sleep_for(1ms);  // the handler's work
      log->Add(e);
      return Status::Ok();
    };
  };
  // Steady writes of new rows (two versions each) until the test ends.
  std::mutex mu;
  std::set<CellAddr> written;
  std::atomic<bool> stop_writing{false};
  std::thread writer([&] {
    while (!stop_writing) {
      const std::vector<Uuid> rows = NewRows(8);
      for (int v = 0; v < 2; ++v) {
        auto a = PutVersion(*c->store, rows, "BASE", v, [](size_t i) {
          return nlohmann::json{{"i", i}};
        });
        std::lock_guard<std::mutex> lock(mu);
        written.insert(a.begin(), a.end());
      }
      std::this_thread::sleep_for(20ms);  // pacing
    }
  });
  struct JoinWriter {
    std::atomic<bool>& stop;
    std::thread& t;
    ~JoinWriter() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join_writer{stop_writing, writer};

  const std::string cells = ChangeLogTopic(c->config.kafka, "trips");
  TriggerWorker a(c->config, Opts("share-a"));
  ASSERT_EQ("OK", a.on("trips", "BASE", "shared", handler(&log_a)).ToString());
  ASSERT_TRUE(a.Start().ok());
  // A owns every partition and has committed on each before B joins.
  ASSERT_TRUE(WaitFor([&] { return CommittedOnEvery(a, cells, {0, 1, 2, 3}); }, 30s));
  auto b = std::make_unique<TriggerWorker>(c->config, Opts("share-b"));
  ASSERT_EQ("OK", b->on("trips", "BASE", "shared", handler(&log_b)).ToString());
  ASSERT_TRUE(b->Start().ok());

  // The group splits the partitions between them.
  std::set<int32_t> pa, pb;
  const bool split = WaitFor(
      [&] {
        pa = CellPartitions(a, cells);
        pb = CellPartitions(*b, cells);
        std::set<int32_t> both;
        std::set_intersection(pa.begin(), pa.end(), pb.begin(), pb.end(),
                              std::inserter(both, both.end()));
        return !pa.empty() && !pb.empty() && both.empty() && pa.size() + pb.size() == kPartitions;
      },
      40s, 50ms);
  ASSERT_TRUE(split) << "A has " << ::testing::PrintToString(pa) << ", B has "
                     << ::testing::PrintToString(pb);
  // Both work and commit after the split (commits are rejected while the group
  // rebalances, so what was handled meanwhile is handled again).
  const size_t b_before = log_b.total();
  ASSERT_TRUE(WaitFor([&] { return log_b.total() > b_before + 20; }, 20s));
  ASSERT_TRUE(WaitFor(
      [&] { return CommittedOnEvery(a, cells, pa) && CommittedOnEvery(*b, cells, pb); }, 20s));

  // B stops (cleanly): A takes every partition again.
  b->Stop();
  b.reset();
  ASSERT_TRUE(WaitFor([&] { return CellPartitions(a, cells).size() == kPartitions; }, 40s))
      << "A has " << ::testing::PrintToString(CellPartitions(a, cells));
  const size_t a_before = log_a.total();
  ASSERT_TRUE(WaitFor([&] { return log_a.total() > a_before + 20; }, 20s));
  stop_writing = true;
  writer.join();

  std::set<CellAddr> want;
  {
    std::lock_guard<std::mutex> lock(mu);
    want = written;
  }
  std::set<CellAddr> missing;
  ASSERT_TRUE(WaitFor(
      [&] {
        missing.clear();
        for (const auto& x : want)
          if (!log_a.Has(x) && !log_b.Has(x)) missing.insert(x);
        return missing.empty();
      },
      60s))
      << "never handled: " << DescribeSome(missing);
  size_t by_both = 0;
  for (const auto& x : want) by_both += log_a.Has(x) && log_b.Has(x);
  const size_t extra = log_a.Duplicates().second + log_b.Duplicates().second + by_both;
  std::cout << "[ trigger ] shared: " << want.size() << " events; A handled " << log_a.total()
            << ", B " << log_b.total() << " (split A" << ::testing::PrintToString(pa) << " B"
            << ::testing::PrintToString(pb) << "); " << extra
            << " duplicates across 2 rebalances (work done while the group rebalances cannot be "
               "committed)\n";
  a.Stop();
  relay->Stop();
}

}  // namespace
}  // namespace cellar::trigtest
