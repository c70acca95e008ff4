// Dead letters and pausing of in-process triggers (triggers/trigger_worker.h,
// triggers/trigger_admin.h) against a private MariaDB, the local broker and an
// in-process relay: an always-failing row is set aside after its attempts while
// the others flow, `dlq retry` re-runs it (and ends even while the handler
// still fails), LaterEventsPolicy::kSetAside, and the pause after too many
// set-aside events. Part of the trigger_test binary.
#include <pthread.h>

#include <atomic>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// ---------------------------------------------------------------------------

TEST(TriggerTest, AlwaysFailingRowIsDeadLetteredOthersFlowAndDlqRetryRerunsItOnceFixed) {
  auto c = MakeCluster("tg_dlq", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "dlq-relay");
  ASSERT_TRUE(relay);

  const Uuid bad = Uuid::Random();
  std::atomic<bool> fixed{false};
  std::atomic<int> bad_calls{0}, bad_max_attempt{0};
  HandledLog ok;  // successful calls only
  TriggerOptions opts;
  opts.retry = {/*max_attempts=*/3, /*initial_backoff_ms=*/10, /*max_backoff_ms=*/40};
  opts.concurrency = 4;
  TriggerWorker w(c->config, Opts("dlq"));
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "charge",
                       [&](const CellEvent& e, TriggerContext& ctx) -> Status {
                         if (e.cell.row_key == bad && e.cell.ref_key == 0 && !fixed) {
                           ++bad_calls;
                           int a = ctx.attempt(), m = bad_max_attempt;
                           while (a > m && !bad_max_attempt.compare_exchange_weak(m, a)) {
                           }
                           return Unavailable("payment backend rejects trip " +
                                              e.cell.row_key.ToString());
                         }
                         ok.Add(e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());

  auto body = [](size_t) { return nlohmann::json{{"fare", {{"total", 12}}}}; };
  std::set<CellAddr> good = PutVersion(*c->store, NewRows(30), "BASE", 0, body);
  ASSERT_TRUE(PutCell(*c->store, bad, "BASE", 0, {{"fare", {{"total", 13}}}}));
  std::set<CellAddr> more = PutVersion(*c->store, NewRows(30), "BASE", 0, body);
  good.insert(more.begin(), more.end());
  // A later version of the failing row: the default policy (continue) handles it.
  ASSERT_TRUE(PutCell(*c->store, bad, "BASE", 1, {{"fare", {{"total", 14}}}}));
  good.emplace(bad.ToString(), "BASE", 1);
  const CellAddr bad_addr{bad.ToString(), "BASE", 0};

  std::set<CellAddr> missing;
  ASSERT_TRUE(WaitFor(
      [&] {
        missing = ok.Missing(good);
        return missing.empty();
      },
      60s))
      << "other rows stalled: " << DescribeSome(missing);
  ASSERT_TRUE(WaitFor([&] { return Totals(w, "charge").set_aside >= 1; }, 30s))
      << "the failing event was never set aside; calls so far: " << bad_calls;
  EXPECT_EQ(bad_calls.load(), 3) << "called once per configured attempt, then set aside";
  EXPECT_EQ(bad_max_attempt.load(), 3);
  EXPECT_FALSE(ok.Has(bad_addr));
  TriggerTotals t = Totals(w, "charge");
  EXPECT_EQ(t.set_aside, 1u);
  EXPECT_EQ(t.retried, 2u);  // attempts 1 and 2 were retried
  EXPECT_FALSE(t.paused);

  // The dead letter: the event, its error and the attempt count.
  auto dead = ListDeadLetters(c->config, "trips", "charge");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(dead->size(), 1u);
  const DeadLetter& d = dead->front();
  EXPECT_EQ(d.trigger, "charge");
  EXPECT_EQ(d.datastore, "trips");
  EXPECT_EQ(d.attempts, 3);
  EXPECT_THAT(d.error, HasSubstr("payment backend rejects trip"));
  EXPECT_EQ(d.source_topic, ChangeLogTopic(c->config.kafka, "trips"));
  EXPECT_GE(d.source_offset, 0);
  EXPECT_GT(d.failed_at, 0);
  auto ev = DecodeCellEvent(d.event_json);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString() << "\n" << d.event_json;
  EXPECT_EQ(AddrOf(ev->cell), bad_addr);
  EXPECT_EQ(ev->cell.body["fare"]["total"], 13);

  // `dlq retry` while the handler still fails: the record is copied to the
  // retry topic, which the running worker consumes; it fails all its attempts
  // again and is set aside again. The retry copies only what the DLQ held when
  // it started, so it returns instead of feeding on its own new dead letters.
  auto copied = RetryDeadLetters(c->config, "trips", "charge");
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(*copied, 1);
  ASSERT_TRUE(WaitFor([&] { return Totals(w, "charge").set_aside >= 2; }, 30s));
  EXPECT_EQ(bad_calls.load(), 6);
  auto dead2 = ListDeadLetters(c->config, "trips", "charge");
  ASSERT_TRUE(dead2.ok()) << dead2.status().ToString();
  ASSERT_EQ(dead2->size(), 2u);
  EXPECT_EQ(dead2->back().source_topic, RetryTopic(c->config.kafka, "trips", "charge"));
  EXPECT_EQ(dead2->back().attempts, 3);

  // Fixed: the next retry copies only the new dead letter, and the worker
  // handles it successfully.
  fixed = true;
  copied = RetryDeadLetters(c->config, "trips", "charge");
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(*copied, 1) << "the first dead letter was already retried";
  ASSERT_TRUE(WaitFor([&] { return ok.Has(bad_addr); }, 30s))
      << "the retried dead letter never reached the handler";
  EXPECT_EQ(bad_calls.load(), 6);
  EXPECT_EQ(ok.Count(bad_addr), 1u);
  EXPECT_TRUE(WaitFor([&] { return Totals(w, "charge").handled >= good.size() + 1; }, 10s));
  // Nothing is left to retry.
  auto again = RetryDeadLetters(c->config, "trips", "charge");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, 0);
  EXPECT_EQ(Totals(w, "charge").set_aside, 2u);
  std::cout << "[ trigger ] dlq: " << good.size() << " other events handled, 1 set aside after "
            << "3 attempts, retried once while still failing (set aside again), then once fixed\n";
  w.Stop();
  relay->Stop();
}

// A C++ handler that never returns for one event: past handler_timeout_ms
// each call is a failed attempt, the event is set aside, the row's later
// event and the other rows are handled and every partition's offsets are
// committed to its end. Before handlers had a deadline the row and its
// partition's commits waited forever.
TEST(TriggerTest, AHungHandlerIsAFailedAttemptAtItsDeadlineAndIsSetAside) {
  auto c = MakeCluster("tg_hung", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "hung-relay");
  ASSERT_TRUE(relay);

  const Uuid hung = Uuid::Random();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> hung_calls{0};
  HandledLog ok;
  // A deadline costs no hand-off per call: handlers run on the pool's threads.
  std::mutex threads_mu;
  std::set<std::string> handler_threads;
  TriggerOptions opts;
  opts.retry = {/*max_attempts=*/2, /*initial_backoff_ms=*/10, /*max_backoff_ms=*/40};
  opts.concurrency = 2;
  opts.handler_timeout_ms = 300;
  TriggerWorker w(c->config, Opts("hung"));
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "slow",
                       [&, released](const CellEvent& e, TriggerContext&) -> Status {
                         if (e.cell.row_key == hung && e.cell.ref_key == 0) {
                           ++hung_calls;
                           released.wait();  // hangs until the test ends
                           return Status::Ok();
                         }
                         {
                           char name[16] = {};
                           pthread_getname_np(pthread_self(), name, sizeof(name));
                           std::lock_guard<std::mutex> lock(threads_mu);
                           handler_threads.insert(name);
                         }
                         ok.Add(e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());
  auto body = [](size_t) { return nlohmann::json{{"fare", {{"total", 12}}}}; };
  std::set<CellAddr> good = PutVersion(*c->store, NewRows(20), "BASE", 0, body);
  ASSERT_TRUE(PutCell(*c->store, hung, "BASE", 0, {{"fare", {{"total", 13}}}}));
  ASSERT_TRUE(PutCell(*c->store, hung, "BASE", 1, {{"fare", {{"total", 14}}}}));
  good.emplace(hung.ToString(), "BASE", 1);
  std::set<CellAddr> more = PutVersion(*c->store, NewRows(20), "BASE", 0, body);
  good.insert(more.begin(), more.end());

  std::set<CellAddr> missing;
  EXPECT_TRUE(WaitFor(
      [&] {
        missing = ok.Missing(good);
        return missing.empty();
      },
      60s))
      << "events stalled behind the hung call: " << DescribeSome(missing);
  EXPECT_TRUE(WaitFor([&] { return Totals(w, "slow").set_aside >= 1; }, 30s))
      << "the hung event was never set aside; calls: " << hung_calls;
  EXPECT_EQ(hung_calls.load(), 2) << "one call per attempt";
  const std::string metrics = w.metrics().Render();
  EXPECT_EQ(2,
            MetricValue(metrics, "cellar_trigger_handler_timeouts_total", {{"trigger", "slow"}}));
  EXPECT_EQ(2,
            MetricValue(metrics, "cellar_trigger_handlers_past_deadline", {{"trigger", "slow"}}));
  auto dead = ListDeadLetters(c->config, "trips", "slow");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_THAT(dead->front().error, HasSubstr("did not return within 300 ms"));
  EXPECT_EQ(dead->front().attempts, 2);
  // Every partition's offsets reach its end: nothing waits for the hung calls.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const TriggerStatus& st : w.status())
          for (const TriggerPartitionStatus& p : st.partitions)
            if (p.lag != 0) return false;
        return true;
      },
      30s))
      << "a partition's commits stopped at the hung event";
  {
    std::lock_guard<std::mutex> lock(threads_mu);
    EXPECT_EQ(handler_threads, std::set<std::string>{"trigger-pool"});
  }
  // Stop() does not wait for calls past their deadline (the worker's
  // destruction does).
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    w.Stop();
    stopped = true;
  });
  EXPECT_TRUE(WaitFor([&] { return stopped.load(); }, 20s))
      << "Stop() waited for the hung handler calls";
  release.set_value();  // the hung calls return
  stopper.join();
  relay->Stop();
}

TEST(TriggerTest, SetAsidePolicyKeepsLaterEventsOfTheRowOutAndDlqRetryRunsThemInOrder) {
  auto c = MakeCluster("tg_block", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "block-relay");
  ASSERT_TRUE(relay);

  const Uuid bad = Uuid::Random();
  std::atomic<bool> fixed{false};
  std::atomic<int> bad_calls{0};
  std::mutex mu;
  std::vector<int64_t> bad_handled;  // ref_keys of the bad row handled successfully
  HandledLog ok;
  TriggerOptions opts;
  opts.retry = {2, 5, 10};
  opts.dead_letter.later_events_of_row = LaterEventsPolicy::kSetAside;
  TriggerWorker w(c->config, Opts("block"));
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "strict",
                       [&](const CellEvent& e, TriggerContext&) -> Status {
                         if (e.cell.row_key == bad) {
                           if (!fixed) {
                             ++bad_calls;
                             return Unavailable("not yet");
                           }
                           std::lock_guard<std::mutex> lock(mu);
                           bad_handled.push_back(e.cell.ref_key);
                         }
                         ok.Add(e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());

  auto body = [](size_t) { return nlohmann::json{{"fare", {{"total", 12}}}}; };
  std::set<CellAddr> good = PutVersion(*c->store, NewRows(20), "BASE", 0, body);
  for (int64_t v = 0; v < 3; ++v) ASSERT_TRUE(PutCell(*c->store, bad, "BASE", v, {{"v", v}}));
  std::set<CellAddr> more = PutVersion(*c->store, NewRows(20), "BASE", 0, body);
  good.insert(more.begin(), more.end());

  std::set<CellAddr> missing;
  ASSERT_TRUE(WaitFor(
      [&] {
        missing = ok.Missing(good);
        return missing.empty();
      },
      60s))
      << DescribeSome(missing);
  ASSERT_TRUE(WaitFor([&] { return Totals(w, "strict").set_aside >= 3; }, 30s))
      << "set aside: " << Totals(w, "strict").set_aside;
  // Only the first event reached the handler (twice: max_attempts 2); the
  // later ones were set aside without a call, so the row is never out of order.
  EXPECT_EQ(bad_calls.load(), 2);
  auto dead = ListDeadLetters(c->config, "trips", "strict");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(dead->size(), 3u);
  for (size_t i = 0; i < dead->size(); ++i) {
    auto ev = DecodeCellEvent((*dead)[i].event_json);
    ASSERT_TRUE(ev.ok());
    EXPECT_EQ(ev->cell.row_key, bad);
    EXPECT_EQ(ev->cell.ref_key, static_cast<int64_t>(i)) << "dead letters of a row in order";
    EXPECT_EQ((*dead)[i].attempts, i == 0 ? 2 : 0);
    if (i > 0) {
      EXPECT_THAT((*dead)[i].error, HasSubstr("an earlier event of row"));
    }
  }

  // Fixed: `dlq retry` re-runs the row's three events, in order.
  fixed = true;
  auto copied = RetryDeadLetters(c->config, "trips", "strict");
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(*copied, 3);
  const bool rerun = WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return bad_handled.size() >= 3;
      },
      30s);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(rerun) << "retried dead letters handled: " << ::testing::PrintToString(bad_handled)
                     << "; set aside now " << Totals(w, "strict").set_aside;
  EXPECT_EQ(bad_handled, (std::vector<int64_t>{0, 1, 2}));
  w.Stop();
  relay->Stop();
}

// ---------------------------------------------------------------------------

TEST(TriggerTest, ManySetAsideEventsPauseTheTrigger) {
  auto c = MakeCluster("tg_pause", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "pause-relay");
  ASSERT_TRUE(relay);

  HandledLog handled;
  std::atomic<int> poison_calls{0};
  TriggerOptions opts;
  opts.retry = {3, 10, 20};
  opts.dead_letter.pause_after = 3;
  opts.dead_letter.window_ms = 60000;
  TriggerWorker w(c->config, Opts("pause"));
  ASSERT_EQ("OK",
            w.on(
                 "trips", "BASE", "fragile",
                 [&](const CellEvent& e, TriggerContext&) -> Status {
                   if (e.cell.body.value("poison", false)) {
                     ++poison_calls;
                     return FailedPrecondition("cannot bill a poisoned trip");  // set aside at once
                   }
                   handled.Add(e);
                   return Status::Ok();
                 },
                 opts)
                .ToString());
  ASSERT_TRUE(w.Start().ok());
  const std::string gauge_before = w.metrics().Render();
  EXPECT_EQ(MetricValue(gauge_before, "cellar_trigger_paused", {{"trigger", "fragile"}}), 0)
      << gauge_before;

  // A healthy event first: the trigger works.
  const Uuid healthy = Uuid::Random();
  ASSERT_TRUE(PutCell(*c->store, healthy, "BASE", 0, {{"poison", false}}));
  ASSERT_TRUE(WaitFor([&] { return handled.Has({healthy.ToString(), "BASE", 0}); }, 30s));

  // A burst of 8 failing events: more than pause_after (3) set aside pauses it.
  std::vector<Uuid> poisoned = NewRows(8);
  PutVersion(*c->store, poisoned, "BASE", 0, [](size_t) {
    return nlohmann::json{{"poison", true}};
  });
  ASSERT_TRUE(WaitFor([&] { return Totals(w, "fragile").paused; }, 30s))
      << "set aside so far: " << Totals(w, "fragile").set_aside;
  const TriggerTotals t = Totals(w, "fragile");
  EXPECT_TRUE(t.paused);
  EXPECT_GE(t.set_aside, 4u);  // the 4th set-aside event in the window pauses
  EXPECT_EQ(t.retried, 0u) << "FailedPrecondition must not be retried";
  const std::string text = w.metrics().Render();
  EXPECT_EQ(MetricValue(text, "cellar_trigger_paused", {{"trigger", "fragile"}}), 1) << text;

  // Paused: healthy events written now are not handled. The relay publishes
  // them (acknowledged count grows); the handler must stay silent meanwhile.
  const uint64_t acked = relay->stats().acknowledged;
  std::vector<Uuid> later = NewRows(5);
  PutVersion(*c->store, later, "BASE", 0, [](size_t) { return nlohmann::json{{"poison", false}}; });
  ASSERT_TRUE(WaitFor([&] { return relay->stats().acknowledged >= acked + later.size(); }, 30s));
  const size_t before = handled.total();
  EXPECT_FALSE(WaitFor([&] { return handled.total() > before; }, 1500ms))
      << "a paused trigger handled new events";
  EXPECT_TRUE(Totals(w, "fragile").paused);
  std::cout << "[ trigger ] pause: paused after " << t.set_aside << " set-aside events ("
            << poison_calls << " failing calls)\n";
  w.Stop();
  relay->Stop();
}

// A MariaDB host of the store down for longer than the retry policy's
// attempts last sets nothing aside: the handler's writes fail while the host is
// down, those calls are not counted, and the event is handled once the host is
// back. (The history check found a billing event dead-lettered by a host
// crash: five attempts with full jitter took 0.5 s, the restart longer.)
TEST(TriggerTest, StoreOutageLongerThanTheAttemptsSetsNothingAside) {
  std::unique_ptr<testing::PrivateMariaDb> db;
  try {
    db = testing::PrivateMariaDb::Start("outage");
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  auto c = MakeCluster("tg_outage", Broker(), db.get());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "outage-relay");
  ASSERT_TRUE(relay);

  std::atomic<bool> called{false}, down{false};
  std::atomic<int> failed_calls{0};
  TriggerOptions opts;
  opts.retry = {/*max_attempts=*/2, /*initial_backoff_ms=*/10, /*max_backoff_ms=*/50};
  TriggerWorker w(c->config, Opts("outage"));
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "billing",
                       [&](const CellEvent& e, TriggerContext& ctx) -> Status {
                         called = true;
                         // The first call's write meets the outage.
                         if (!WaitFor([&] { return down.load(); }, 60s))
                           return Internal("the test never took the host down");
                         Status s = ctx.store()
                                        .Put(e.datastore, CellWrite{e.cell.row_key,
                                                                    "STATUS",
                                                                    e.cell.ref_key,
                                                                    {{"billed", 1}}})
                                        .status();
                         if (!s.ok()) ++failed_calls;
                         return s;
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());

  const Uuid row = Uuid::Random();
  ASSERT_TRUE(PutCell(*c->store, row, "BASE", 0, {{"fare", {{"total", 12}}}}));
  ASSERT_TRUE(WaitFor([&] { return called.load(); }, 30s)) << "the handler was never called";
  db->Kill();
  down = true;
  ASSERT_TRUE(WaitFor([&] { return failed_calls.load() >= 3 * opts.retry.max_attempts; }, 30s))
      << "failed calls during the outage: " << failed_calls.load();
  EXPECT_EQ(Totals(w, "billing").set_aside, 0u) << "set aside during the store's outage";
  EXPECT_EQ(Totals(w, "billing").handled, 0u);

  try {
    db->Restart();
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  ASSERT_TRUE(WaitFor([&] { return c->store->Get("trips", row, "STATUS", 0).ok(); }, 30s))
      << "the event was not handled after the store came back";
  ASSERT_TRUE(WaitFor([&] { return Totals(w, "billing").handled >= 1; }, 10s));
  EXPECT_EQ(Totals(w, "billing").set_aside, 0u);
  auto dead = ListDeadLetters(c->config, "trips", "billing");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  EXPECT_THAT(*dead, IsEmpty());
  std::cout << "[ trigger ] store outage: " << failed_calls.load()
            << " failed calls while the host was down, none counted, nothing set aside\n";
  w.Stop();
  relay->Stop();
}

}  // namespace
}  // namespace cellar::trigtest
