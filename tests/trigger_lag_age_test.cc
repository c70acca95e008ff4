// A trigger's lag and oldest unprocessed age (DynamoDB's IteratorAge): from
// Kafka alone before any worker ran (ReadTriggerLag), then as the running
// worker's gauges cellar_trigger_lag_events and
// cellar_trigger_oldest_unprocessed_age_seconds while its handler holds every
// event, and both back at 0 once it lets them go. Part of the trigger_test
// binary.
#include <atomic>
#include <thread>

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

  // No worker yet: the group has committed nothing, so every cell is lag and
  // the age is that of the first record (its cell's created_at).
  Result<TriggerLagReport> report = Unavailable("not read");
  ASSERT_TRUE(WaitFor(
      [&] {
        report = ReadTriggerLag(c->config, "trips", "held");
        return report.ok() && report->total_lag == kCells;
      },
      30s, 50ms))
      << (report.ok() ? std::to_string(report->total_lag) : report.status().ToString());
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
  EXPECT_TRUE(WaitFor([&] { return gauge("cellar_trigger_lag_events") == kCells; }, 30s))
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
  EXPECT_EQ(gauge("cellar_trigger_lag_events"), kCells) << "lag moved while every event is held";
  EXPECT_EQ(handled, 0);

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
  relay->Stop();
}

}  // namespace
}  // namespace cellar::trigtest
