// A trigger's lag and oldest unprocessed age (DynamoDB's IteratorAge): from
// Kafka alone before any worker ran (ReadTriggerLag), then as the running
// worker's gauges cellar_trigger_lag_events and
// cellar_trigger_oldest_unprocessed_age_seconds while its handler holds every
// event, and both back at 0 once it lets them go. Part of the trigger_test
// binary.
#include <atomic>
#include <thread>

#include "changelog/kafka/consumer_group_lag.h"
#include "gtest/gtest.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;

TEST(TriggerLagAgeTest, LagAndOldestUnprocessedAgeWhileHeldThenZeroWhenCaughtUp) {
  auto c = MakeCluster("tg_age", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "age-relay");
  ASSERT_TRUE(relay);
  constexpr int kCells = 12;
  auto body = [](size_t i) { return nlohmann::json{{"i", i}}; };
  PutVersion(*c->store, NewRows(kCells), "BASE", 0, body);
  const MicrosSinceEpoch written = NowMicros();  // every created_at <= this
  const std::string cells = ChangeLogTopic(c->config.kafka, "trips");

  // Once the relay published every cell it stops: the topic holds the 12
  // cells and the commit marker each of its transactions ended with in each
  // partition it wrote (offsets no consumer gets). Lag counts offsets.
  ASSERT_TRUE(WaitFor([&] { return relay->stats().acknowledged >= kCells; }, 30s));
  relay->Stop();

  // No worker yet: the group has committed nothing, so every offset is lag
  // and the age is that of the first record (its cell's created_at). (The
  // broker writes a transaction's markers just after its commit returns.)
  Result<TriggerLagReport> report = Unavailable("not read");
  int64_t kOffsets = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto offsets = TopicRecordCount(c->config, cells);
        report = ReadTriggerLag(c->config, "trips", "held");
        kOffsets = offsets.ok() ? *offsets : -1;
        return report.ok() && report->total_lag == kOffsets && kOffsets > kCells;
      },
      30s, 50ms))
      << (report.ok() ? std::to_string(report->total_lag) : report.status().ToString()) << " of "
      << kOffsets << " offsets (12 cells and their transactions' markers)";
  const MicrosSinceEpoch before = NowMicros();
  report = ReadTriggerLag(c->config, "trips", "held");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_GE(report->oldest_unprocessed_age_seconds, static_cast<double>(before - written) / 1e6);
  EXPECT_LT(report->oldest_unprocessed_age_seconds, 60);

  // A worker whose handler holds every event until released.
  std::atomic<bool> release{false};
  std::atomic<int> handled{0};
  auto w = std::make_unique<TriggerWorker>(c->config, Opts("age"));
  ASSERT_EQ("OK", w->on("trips", "BASE", "held", [&](const CellEvent&, TriggerContext&) {
                     // The handler's work: waiting for the test to release it.
                     while (!release) std::this_thread::sleep_for(2ms);
                     ++handled;
                     return Status::Ok();
                   }).ToString());
  ASSERT_TRUE(w->Start().ok());
  const std::map<std::string, std::string> labels{{"trigger", "held"}, {"topic", cells}};
  auto gauge = [&](const char* name) { return MetricValue(w->metrics().Render(), name, labels); };
  EXPECT_TRUE(WaitFor([&] { return gauge("cellar_trigger_lag_events") == kOffsets; }, 30s))
      << w->metrics().Render();
  // The age follows the clock: it reaches the time since the writes as read
  // now, and again a while later.
  for (int round = 0; round < 2; ++round) {
    const double since = static_cast<double>(NowMicros() - written) / 1e6;
    EXPECT_TRUE(WaitFor(
        [&] { return gauge("cellar_trigger_oldest_unprocessed_age_seconds") >= since; }, 10s))
        << "age below " << since << " s:\n"
        << w->metrics().Render();
    ASSERT_TRUE(WaitFor([&] { return NowMicros() - written > (round + 1) * 700000; }, 5s));
  }
  EXPECT_EQ(gauge("cellar_trigger_lag_events"), kOffsets) << "lag moved while every event is held";
  EXPECT_EQ(handled, 0);

  // Caught up: lag 0, though the group's commits stop before each
  // partition's last commit marker.
  release = true;
  EXPECT_TRUE(WaitFor(
      [&] {
        return handled == kCells && gauge("cellar_trigger_lag_events") == 0 &&
               gauge("cellar_trigger_oldest_unprocessed_age_seconds") == 0;
      },
      30s))
      << w->metrics().Render();
  EXPECT_TRUE(WaitFor(
      [&] {
        report = ReadTriggerLag(c->config, "trips", "held");
        return report.ok() && report->total_lag == 0;
      },
      30s, 50ms));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->oldest_unprocessed_age_seconds, 0);
  w->Stop();
}

}  // namespace
}  // namespace cellar::trigtest
