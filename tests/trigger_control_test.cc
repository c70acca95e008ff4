// Issue #17 for in-process triggers (same binary as trigger_test.cc): erases
// reach handlers as tombstone events (include_tombstones), Stop() is bounded
// while an event waits to be retried, and pause/resume through
// trigger_control (triggers/trigger_control.h) reaches every worker of a
// trigger without a restart, also after a dead-letter auto-pause.
#include "triggers/trigger_control.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

double PausedGauge(TriggerWorker& w, const std::string& trigger) {
  return MetricValue(w.metrics().Render(), "cellar_trigger_paused", {{"trigger", trigger}});
}

int64_t GroupLag(const ClusterConfig& config, const std::string& trigger) {
  auto l = ReadTriggerLag(config, "trips", trigger);
  return l.ok() ? l->total_lag : -1;
}

// A handler's events of one row, in the order the handler saw them.
std::map<std::string, std::vector<Cell>> ByRow(const HandledLog& log) {
  std::map<std::string, std::vector<Cell>> out;
  for (const Cell& c : log.Events()) out[c.row_key.ToString()].push_back(c);
  return out;
}

// ---------------------------------------------------------------------------

TEST(TriggerTombstoneTest, ErasesReachHandlersByDefaultInRowOrderAndNotWhenTurnedOff) {
  auto c = MakeCluster("tg_erase", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "erase-relay");
  ASSERT_TRUE(relay);

  HandledLog with, without;
  TriggerWorker w(c->config, Opts("erase"));
  ASSERT_EQ("OK", w.on("trips", "BASE", "with_erases", [&](const CellEvent& e, TriggerContext&) {
                     with.Add(e);
                     return Status::Ok();
                   }).ToString());
  TriggerOptions off;
  off.include_tombstones = false;
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "without_erases",
                       [&](const CellEvent& e, TriggerContext&) {
                         without.Add(e);
                         return Status::Ok();
                       },
                       off)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());

  const std::vector<Uuid> rows = NewRows(12);
  std::set<CellAddr> versions = PutVersion(*c->store, rows, "BASE", 0, [](size_t i) {
    return nlohmann::json{{"fare", {{"total", 10 + i}}}};
  });
  for (const auto& a : PutVersion(*c->store, rows, "BASE", 1, [](size_t) {
         return nlohmann::json{{"state", "changed"}};
       }))
    versions.insert(a);
  std::set<CellAddr> tombstones;
  for (const Uuid& r : rows) {
    auto e = c->store->Erase("trips", r, "BASE");
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(e->ref_key, 2);
    tombstones.emplace(r.ToString(), "BASE", e->ref_key);
  }

  std::set<CellAddr> all = versions;
  all.insert(tombstones.begin(), tombstones.end());
  ASSERT_TRUE(WaitFor([&] { return with.Missing(all).empty(); }, 30s))
      << "not delivered: " << DescribeSome(with.Missing(all));
  // Every row: version 0, version 1, then the tombstone (null body), in that order.
  for (const auto& [row, cells] : ByRow(with)) {
    ASSERT_EQ(cells.size(), 3u) << row;
    EXPECT_EQ(cells[0].ref_key, 0) << row;
    EXPECT_EQ(cells[1].ref_key, 1) << row;
    EXPECT_EQ(cells[2].ref_key, 2) << row;
    EXPECT_FALSE(cells[0].tombstone || cells[1].tombstone) << row;
    EXPECT_TRUE(cells[2].tombstone) << row;
    EXPECT_TRUE(cells[2].body.is_null()) << row << ": " << cells[2].body.dump();
  }

  // include_tombstones false: once its group has read everything (lag 0), it
  // saw every version and no tombstone.
  ASSERT_TRUE(WaitFor([&] { return without.Missing(versions).empty(); }, 30s));
  ASSERT_TRUE(WaitFor([&] { return GroupLag(c->config, "without_erases") == 0; }, 30s, 200ms))
      << "lag " << GroupLag(c->config, "without_erases");
  for (const Cell& cell : without.Events())
    EXPECT_FALSE(cell.tombstone) << Describe(AddrOf(cell)) << " reached a trigger without erases";
  EXPECT_EQ(without.distinct(), versions.size());
  w.Stop();
  relay->Stop();
}

// ---------------------------------------------------------------------------

// Stop() while an event waits for its next attempt: the backoff is cut short,
// no new attempt starts, Stop() returns within the documented bound (the
// handler call in flight, here instant, + about 1 s), and the event's offset
// stays uncommitted, so the next worker of the trigger gets it again.
TEST(TriggerStopTest, StopCutsARetryBackoffShortAndTheEventIsDeliveredAgainAfterRestart) {
  auto c = MakeCluster("tg_stopbound", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "stopbound-relay");
  ASSERT_TRUE(relay);

  std::atomic<int> attempts{0};
  TriggerOptions slow_retry;
  // Without the bound, the stop would wait for up to 100 attempts with
  // backoffs of up to 60 s (the drain timeout is 10 s: Opts()).
  slow_retry.retry = {100, 4000, 60000};
  auto first = std::make_unique<TriggerWorker>(c->config, Opts("stopbound-1"));
  ASSERT_EQ("OK", first
                      ->on(
                          "trips", "BASE", "stubborn",
                          [&](const CellEvent&, TriggerContext&) {
                            ++attempts;
                            return Unavailable("the service is down");
                          },
                          slow_retry)
                      .ToString());
  ASSERT_TRUE(first->Start().ok());
  const Uuid row = Uuid::Random();
  ASSERT_TRUE(PutCell(*c->store, row, "BASE", 0, {{"fare", 12}}));
  // Retried once: the event now sleeps in a backoff (0..4 s, then 0..8 s, ...).
  ASSERT_TRUE(WaitFor([&] { return Totals(*first, "stubborn").retried >= 1; }, 30s));
  const int attempts_at_stop = attempts.load();
  const auto t0 = std::chrono::steady_clock::now();
  first->Stop();
  const auto stop_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(stop_ms, 3000) << "Stop() waited for the retry policy";
  EXPECT_LE(attempts.load(), attempts_at_stop + 1) << "attempts went on after Stop()";
  EXPECT_EQ(Totals(*first, "stubborn").set_aside, 0u);
  std::cout << "[ trigger ] Stop() during a retry backoff returned in " << stop_ms << " ms\n";
  first.reset();
  EXPECT_GE(GroupLag(c->config, "stubborn"), 1) << "the failing event's offset was committed";

  // Restart with a working handler: the event comes again.
  HandledLog handled;
  TriggerWorker second(c->config, Opts("stopbound-2"));
  ASSERT_EQ("OK", second
                      .on(
                          "trips", "BASE", "stubborn",
                          [&](const CellEvent& e, TriggerContext&) {
                            handled.Add(e);
                            return Status::Ok();
                          },
                          slow_retry)
                      .ToString());
  ASSERT_TRUE(second.Start().ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        return handled.Has({row.ToString(), "BASE", 0});
      },
      30s))
      << "the event abandoned by Stop() was not delivered again";
  second.Stop();
  relay->Stop();
}

// The events before a handled one of their partition run at a stop only
// within the drain timeout: Stop() stays bounded (drain_timeout_ms + the
// call in flight + about 1 s) when a slow row has many of them queued, and
// those not started are delivered again to the next worker.
TEST(TriggerStopTest, StopStartsNoEventOnceTheDrainTimedOutAndTheNextWorkerGetsThem) {
  auto c = MakeCluster("tg_drainbound", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "drainbound-relay");
  ASSERT_TRUE(relay);
  const auto [slow_row, fast_row] = TwoRowsOfOneShard(c->config.shards);
  constexpr int kSlowEvents = 20;
  constexpr auto kSlowCall = 300ms;
  HandledLog first_log;
  std::mutex starts_mu;
  std::vector<std::chrono::steady_clock::time_point> slow_starts;
  TriggerOptions opts;
  opts.concurrency = 4;
  TriggerWorkerOptions wo = Opts("drainbound-1");
  wo.drain_timeout_ms = 500;
  auto first = std::make_unique<TriggerWorker>(c->config, wo);
  ASSERT_EQ("OK", first
                      ->on(
                          "trips", "BASE", "drainbound",
                          [&](const CellEvent& e, TriggerContext&) {
                            if (e.cell.row_key == slow_row) {
                              {
                                std::lock_guard<std::mutex> lock(starts_mu);
                                slow_starts.push_back(std::chrono::steady_clock::now());
                              }
                              std::this_thread::sleep_for(kSlowCall);  // the handler's work
                            }
                            first_log.Add(e);
                            return Status::Ok();
                          },
                          opts)
                      .ToString());
  ASSERT_TRUE(first->Start().ok());
  std::set<CellAddr> all;
  for (int i = 0; i < kSlowEvents; ++i) {
    ASSERT_TRUE(PutCell(*c->store, slow_row, "BASE", i, {{"i", i}}));
    all.insert({slow_row.ToString(), "BASE", i});
  }
  ASSERT_TRUE(PutCell(*c->store, fast_row, "BASE", 0, {{"i", 0}}));
  const CellAddr fast{fast_row.ToString(), "BASE", 0};
  all.insert(fast);
  // The fast row's event (the partition's last) is handled while the slow
  // row's wait in their lane: all of those are before a started event.
  ASSERT_TRUE(WaitFor([&] { return first_log.Has(fast); }, 30s));
  const size_t slow_handled_at_stop = first_log.total() - 1;
  ASSERT_LT(slow_handled_at_stop + 5, static_cast<size_t>(kSlowEvents));
  const auto t0 = std::chrono::steady_clock::now();
  first->Stop();
  const auto stop_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  // Running them all would take (kSlowEvents - slow_handled_at_stop) x 300 ms, >= 4.5 s.
  EXPECT_LT(stop_ms, 3000) << "Stop() ran the queued events past the drain timeout";
  // None started once the drain timed out (their commit could be missed,
  // and they would be handled twice); the call in flight then finished.
  {
    std::lock_guard<std::mutex> lock(starts_mu);
    ASSERT_FALSE(slow_starts.empty());
    const auto last_start_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(slow_starts.back() - t0).count();
    EXPECT_LT(last_start_ms, wo.drain_timeout_ms + 200)
        << "a handler call started " << last_start_ms << " ms after Stop() (drain timeout "
        << wo.drain_timeout_ms << " ms)";
  }
  std::cout << "[ trigger ] Stop() with " << kSlowEvents - slow_handled_at_stop
            << " slow events queued returned in " << stop_ms << " ms\n";
  first.reset();

  HandledLog second_log;
  TriggerWorker second(c->config, Opts("drainbound-2"));
  ASSERT_EQ("OK", second
                      .on(
                          "trips", "BASE", "drainbound",
                          [&](const CellEvent& e, TriggerContext&) {
                            second_log.Add(e);
                            return Status::Ok();
                          },
                          opts)
                      .ToString());
  ASSERT_TRUE(second.Start().ok());
  // Handled by neither worker.
  auto missing = [&] { return second_log.Missing(first_log.Missing(all)); };
  EXPECT_TRUE(WaitFor([&] { return missing().empty(); }, 30s))
      << "not delivered again: " << DescribeSome(missing());
  second.Stop();
  relay->Stop();
}

// ---------------------------------------------------------------------------

// Two workers of one trigger (two processes in production): a pause stored in
// trigger_control stops both within a bounded wait (gauge 1, no handler call,
// the group's lag grows while writes go on); resume continues from where it
// stopped: every event written during the pause is handled, in row order.
TEST(TriggerControlTest, PauseReachesEveryWorkerAndResumeHandlesThePausedWritesInRowOrder) {
  auto c = MakeCluster("tg_ctl", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "ctl-relay");
  ASSERT_TRUE(relay);

  HandledLog handled;
  auto handler = [&](const CellEvent& e, TriggerContext&) {
    handled.Add(e);
    return Status::Ok();
  };
  TriggerWorker a(c->config, Opts("ctl-a")), b(c->config, Opts("ctl-b"));
  ASSERT_EQ("OK", a.on("trips", "BASE", "ctl", handler).ToString());
  ASSERT_EQ("OK", b.on("trips", "BASE", "ctl", handler).ToString());
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());

  const std::vector<Uuid> rows = NewRows(16);
  const std::set<CellAddr> before = PutVersion(*c->store, rows, "BASE", 0, [](size_t) {
    return nlohmann::json{{"v", 0}};
  });
  ASSERT_TRUE(WaitFor([&] { return handled.Missing(before).empty(); }, 30s));

  ASSERT_EQ("OK", PauseTrigger(c->config, "ctl", "maintenance window").ToString());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      WaitFor([&] { return PausedGauge(a, "ctl") == 1 && PausedGauge(b, "ctl") == 1; }, 10s))
      << "gauges " << PausedGauge(a, "ctl") << " " << PausedGauge(b, "ctl");
  std::cout << "[ trigger ] both workers paused "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - t0)
                   .count()
            << " ms after PauseTrigger\n";
  EXPECT_TRUE(Totals(a, "ctl").paused);
  auto state = ReadTriggerControlOf(c->config, "ctl");
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_TRUE(state->has_value());
  EXPECT_TRUE((*state)->paused);
  EXPECT_EQ((*state)->reason, "maintenance window");
  for (const auto& st : a.status()) {
    if (st.name == "ctl") {
      EXPECT_EQ(st.pause_reason, "maintenance window");
    }
  }

  // Writes during the pause: published, not handled; the group's lag grows.
  const size_t handled_at_pause = handled.total();
  std::set<CellAddr> during = PutVersion(*c->store, rows, "BASE", 1, [](size_t) {
    return nlohmann::json{{"v", 1}};
  });
  for (const auto& x : PutVersion(*c->store, rows, "BASE", 2, [](size_t) {
         return nlohmann::json{{"v", 2}};
       }))
    during.insert(x);
  ASSERT_TRUE(
      WaitFor([&] { return GroupLag(c->config, "ctl") >= static_cast<int64_t>(during.size()); },
              30s, 200ms))
      << "lag " << GroupLag(c->config, "ctl");
  EXPECT_EQ(handled.total(), handled_at_pause) << "a paused trigger handled events";
  EXPECT_EQ(PausedGauge(a, "ctl"), 1);
  EXPECT_EQ(PausedGauge(b, "ctl"), 1);

  ASSERT_EQ("OK", ResumeTrigger(c->config, "ctl").ToString());
  ASSERT_TRUE(WaitFor([&] { return handled.Missing(during).empty(); }, 30s))
      << "not handled after resume: " << DescribeSome(handled.Missing(during));
  EXPECT_TRUE(WaitFor([&] { return GroupLag(c->config, "ctl") == 0; }, 30s, 200ms));
  EXPECT_EQ(PausedGauge(a, "ctl"), 0);
  EXPECT_EQ(PausedGauge(b, "ctl"), 0);
  // At least once, in row order: both workers rejoin the group at the
  // resume, and an event in a handler while its partition moves to the other
  // worker comes again there (a rebalance, as at any start). The first
  // deliveries of each row are in ref_key order.
  const auto [dup_events, dup_calls] = handled.Duplicates();
  std::cout << "[ trigger ] resume of 2 workers: " << during.size() << " paused writes, "
            << dup_events << " events delivered more than once (" << dup_calls << " extra calls)\n";
  for (const auto& [row, cells] : ByRow(handled)) {
    std::vector<int64_t> first_deliveries;
    for (const Cell& cell : cells)
      if (std::find(first_deliveries.begin(), first_deliveries.end(), cell.ref_key) ==
          first_deliveries.end())
        first_deliveries.push_back(cell.ref_key);
    EXPECT_EQ(first_deliveries, (std::vector<int64_t>{0, 1, 2})) << row;
  }
  state = ReadTriggerControlOf(c->config, "ctl");
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_FALSE((*state)->paused);
  a.Stop();
  b.Stop();
  relay->Stop();
}

// An event of a partition waiting behind a handler call of its row when a
// pause (or Stop) comes is handled before the drain ends if a later event of
// its partition, in another row, was handled: otherwise the commit would stop
// short of it and the later event would come again after the resume
// (trigger_worker.h: "an event handled before a clean stop is never delivered
// again"). A1 is in its handler when the pause comes, A2 (A1's row) waits
// behind it, and B1 (a later offset of the same partition) was handled.
TEST(TriggerControlTest, APauseHandlesTheEventsBeforeAHandledOneOfTheirPartitionSoNoneComesTwice) {
  auto c = MakeCluster("tg_gap", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "gap-relay");
  ASSERT_TRUE(relay);
  const auto [a_row, b_row] = TwoRowsOfOneShard(c->config.shards);
  const CellAddr a1{a_row.ToString(), "BASE", 0}, a2{a_row.ToString(), "BASE", 1},
      b1{b_row.ToString(), "BASE", 0};

  std::atomic<bool> a1_in_handler{false}, release{false};
  HandledLog handled;
  TriggerOptions opts;
  opts.concurrency = 4;
  TriggerWorkerOptions wo = Opts("gap");
  wo.control_poll_ms = 100;
  TriggerWorker w(c->config, wo);
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "gap",
                       [&](const CellEvent& e, TriggerContext&) {
                         if (AddrOf(e.cell) == a1) {
                           a1_in_handler = true;
                           if (!WaitFor([&] { return release.load(); }, 30s))
                             return Unavailable("the test did not release A1");
                         }
                         handled.Add(e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());
  ASSERT_TRUE(PutCell(*c->store, a_row, "BASE", 0, {{"v", 0}}));
  ASSERT_TRUE(WaitFor([&] { return a1_in_handler.load(); }, 30s));
  ASSERT_TRUE(PutCell(*c->store, a_row, "BASE", 1, {{"v", 1}}));
  ASSERT_TRUE(PutCell(*c->store, b_row, "BASE", 0, {{"v", 0}}));
  ASSERT_TRUE(WaitFor([&] { return handled.Has(b1); }, 30s)) << "B1 was not handled";
  EXPECT_FALSE(handled.Has(a2));  // it waits behind A1

  ASSERT_EQ("OK", PauseTrigger(c->config, "gap", "between A1 and A2").ToString());
  ASSERT_TRUE(WaitFor([&] { return PausedGauge(w, "gap") == 1; }, 10s));
  release = true;
  ASSERT_EQ("OK", ResumeTrigger(c->config, "gap").ToString());
  const std::set<CellAddr> all{a1, a2, b1};
  ASSERT_TRUE(WaitFor([&] { return handled.Missing(all).empty(); }, 30s))
      << DescribeSome(handled.Missing(all));
  ASSERT_TRUE(WaitFor([&] { return GroupLag(c->config, "gap") == 0; }, 30s, 200ms))
      << "lag " << GroupLag(c->config, "gap");
  EXPECT_EQ(handled.Count(b1), 1u) << "B1 came again after the resume";
  EXPECT_EQ(handled.Count(a1), 1u);
  EXPECT_EQ(handled.Count(a2), 1u);
  w.Stop();
  relay->Stop();
}

// A dead-letter auto-pause is stored in trigger_control with its reason (so
// every process pauses), and ResumeTrigger continues the trigger with nothing
// written meanwhile lost.
TEST(TriggerControlTest, DeadLetterAutoPauseIsStoredAndResumeContinues) {
  auto c = MakeCluster("tg_autopause", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "autopause-relay");
  ASSERT_TRUE(relay);

  HandledLog handled;
  TriggerOptions opts;
  opts.dead_letter.pause_after = 2;  // the 3rd set-aside event pauses
  TriggerWorker w(c->config, Opts("autopause"));
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "picky",
                       [&](const CellEvent& e, TriggerContext&) -> Status {
                         if (!e.cell.tombstone && e.cell.body.value("poison", false))
                           return FailedPrecondition("cannot bill a poisoned trip");
                         handled.Add(e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());
  PutVersion(*c->store, NewRows(3), "BASE", 0, [](size_t) {
    return nlohmann::json{{"poison", true}};
  });
  ASSERT_TRUE(WaitFor([&] { return PausedGauge(w, "picky") == 1; }, 30s));
  std::optional<TriggerControlState> stored;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = ReadTriggerControlOf(c->config, "picky");
        if (s.ok()) stored = *s;
        return stored && stored->paused;
      },
      10s, 100ms))
      << "the auto-pause was not written to trigger_control";
  EXPECT_THAT(stored->reason, HasSubstr("pause_after"));
  EXPECT_THAT(stored->reason, HasSubstr("cannot bill a poisoned trip"));

  const std::set<CellAddr> later =
      PutVersion(*c->store, NewRows(6), "BASE", 0, [](size_t) { return nlohmann::json::object(); });
  ASSERT_TRUE(WaitFor([&] { return GroupLag(c->config, "picky") >= 6; }, 30s, 200ms))
      << "lag " << GroupLag(c->config, "picky");
  EXPECT_EQ(handled.total(), 0u) << "a paused trigger handled events";

  ASSERT_EQ("OK", ResumeTrigger(c->config, "picky").ToString());
  ASSERT_TRUE(WaitFor([&] { return handled.Missing(later).empty(); }, 30s))
      << "not handled after resume: " << DescribeSome(handled.Missing(later));
  EXPECT_EQ(PausedGauge(w, "picky"), 0);
  EXPECT_EQ(Totals(w, "picky").set_aside, 3u);
  // One worker, nothing in flight at the pause: each paused write once.
  for (const auto& x : later) EXPECT_EQ(handled.Count(x), 1u) << Describe(x);
  w.Stop();
  relay->Stop();
}

// A trigger paused before its worker starts starts paused.
TEST(TriggerControlTest, ATriggerPausedBeforeStartStartsPaused) {
  auto c = MakeCluster("tg_startpaused", Broker());
  ASSERT_TRUE(c);
  ASSERT_EQ("OK", EnsureTriggerControlTable(c->config).ToString());
  ASSERT_EQ("OK", PauseTrigger(c->config, "sleepy", "not yet").ToString());
  auto all = ReadTriggerControl(c->config);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  bool listed = false;
  for (const auto& s : *all) listed |= s.trigger == "sleepy" && s.paused && s.reason == "not yet";
  EXPECT_TRUE(listed);
  EXPECT_FALSE(PauseTrigger(c->config, "Bad-Name", "x").ok());

  auto relay = StartRelay(c->store.get(), "startpaused-relay");
  ASSERT_TRUE(relay);
  HandledLog handled;
  TriggerWorker w(c->config, Opts("startpaused"));
  ASSERT_EQ("OK", w.on("trips", "BASE", "sleepy", [&](const CellEvent& e, TriggerContext&) {
                     handled.Add(e);
                     return Status::Ok();
                   }).ToString());
  ASSERT_TRUE(w.Start().ok());
  EXPECT_EQ(PausedGauge(w, "sleepy"), 1);
  const std::set<CellAddr> written =
      PutVersion(*c->store, NewRows(4), "BASE", 0, [](size_t) { return nlohmann::json::object(); });
  ASSERT_TRUE(WaitFor([&] { return relay->stats().acknowledged >= written.size(); }, 30s));
  EXPECT_EQ(handled.total(), 0u) << "a trigger that started paused handled events";
  ASSERT_EQ("OK", ResumeTrigger(c->config, "sleepy").ToString());
  EXPECT_TRUE(WaitFor([&] { return handled.Missing(written).empty(); }, 30s));
  EXPECT_EQ(PausedGauge(w, "sleepy"), 0);
  w.Stop();
  relay->Stop();
}

}  // namespace
}  // namespace cellar::trigtest
