// Integration tests of in-process triggers (triggers/trigger_worker.h) against
// a private MariaDB, the local Kafka-protocol broker and an in-process relay:
// the trip example, per-row order under a concurrent pool, and replay from the
// cell tables after Kafka lost its messages. Same binary: dead letters and
// pausing (trigger_dlq_test.cc), status, clean stop and shared consumer groups
// (trigger_group_test.cc), bodies too large for the change log
// (trigger_large_body_test.cc), the shared keyed consumer itself
// (keyed_consumer_test.cc). Trigger processes: trigger_process_test.cc;
// webhooks: webhook_test.cc.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

// The cellar-billing handler (examples/billing/cellar_billing_main.cc): STATUS at the
// BASE cell's ref_key, so a re-run is an identical put.
Status Bill(const CellEvent& e, TriggerContext& ctx) {
  const nlohmann::json& trip = e.cell.body;
  double total = 0;
  if (trip.contains("fare") && trip["fare"].is_object() && trip["fare"].contains("total") &&
      trip["fare"]["total"].is_number())
    total = trip["fare"]["total"].get<double>();
  nlohmann::json status = {{"state", "billed"},
                           {"amount", total},
                           {"billed_ref_key", e.cell.ref_key},
                           {"trigger", ctx.trigger()}};
  return ctx.store()
      .Put(e.datastore, CellWrite{e.cell.row_key, "STATUS", e.cell.ref_key, status})
      .status();
}
// Writes versions 0..versions-1 of every row: the first half before `w`
// starts (so each row's events wait in Kafka and reach the pool at once), the
// rest while it runs. Returns the cells' addresses; a test failure (and an
// empty set) when the worker does not start.
std::set<CellAddr> WriteAroundStart(CellStore& store, const std::vector<Uuid>& rows, int versions,
                                    TriggerWorker& w) {
  std::set<CellAddr> want;
  auto body = [](size_t i) { return nlohmann::json{{"i", i}}; };
  for (int v = 0; v < versions / 2; ++v) {
    auto a = PutVersion(store, rows, "BASE", v, body);
    want.insert(a.begin(), a.end());
  }
  if (!w.Start().ok()) {
    ADD_FAILURE() << "the trigger worker did not start";
    return {};
  }
  for (int v = versions / 2; v < versions; ++v) {
    auto a = PutVersion(store, rows, "BASE", v, body);
    want.insert(a.begin(), a.end());
  }
  return want;
}

// (row, ref_key) in the order a handler saw them: per row, ref_keys must
// increase, except that a re-delivery may repeat one already seen. Returns
// the violations.
std::vector<std::string> RowOrderViolations(
    const std::vector<std::pair<std::string, int64_t>>& seen) {
  std::map<std::string, std::pair<int64_t, std::set<int64_t>>> per_row;  // max, seen
  std::vector<std::string> violations;
  for (const auto& [row, ref] : seen) {
    auto& [max_ref, refs] = per_row.try_emplace(row, -1, std::set<int64_t>{}).first->second;
    if (ref <= max_ref && !refs.count(ref))
      violations.push_back("row " + row + ": ref_key " + std::to_string(ref) +
                           " handled after ref_key " + std::to_string(max_ref));
    max_ref = std::max(max_ref, ref);
    refs.insert(ref);
  }
  return violations;
}

// ---------------------------------------------------------------------------

TEST(TriggerTest, TripBaseWritesFireBillingAndStatusAuditSeesEveryStatusWrite) {
  auto c = MakeCluster("tg_trip", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "trip-relay");
  ASSERT_TRUE(relay);

  HandledLog billed, audited;
  TriggerWorker w(c->config, Opts("trip"));
  ASSERT_EQ("OK", w.on("trips", "BASE", "billing", [&](const CellEvent& e, TriggerContext& ctx) {
                     billed.Add(e);
                     return Bill(e, ctx);
                   }).ToString());
  ASSERT_EQ("OK", w.on("trips", "STATUS", "status_audit", [&](const CellEvent& e, TriggerContext&) {
                     audited.Add(e);
                     return Status::Ok();
                   }).ToString());
  ASSERT_TRUE(w.Start().ok());

  // 40 trips, two BASE versions each (requested, then completed with the final fare).
  const std::vector<Uuid> rows = NewRows(40);
  auto fare = [](size_t i, int64_t v) { return 10.0 + static_cast<double>(i) + 0.5 * v; };
  std::set<CellAddr> base;
  for (int64_t v = 1; v <= 2; ++v) {
    auto a = PutVersion(*c->store, rows, "BASE", v, [&](size_t i) {
      return nlohmann::json{{"state", v == 1 ? "requested" : "completed"},
                            {"fare", {{"total", fare(i, v)}, {"currency", "EUR"}}}};
    });
    base.insert(a.begin(), a.end());
  }
  ASSERT_EQ(base.size(), 80u);

  // Billing wrote STATUS at each BASE address...
  std::set<CellAddr> missing_status = base;
  const bool all_billed = WaitFor(
      [&] {
        for (auto it = missing_status.begin(); it != missing_status.end();) {
          auto row = Uuid::Parse(std::get<0>(*it));
          auto st = c->store->Get("trips", *row, "STATUS", std::get<2>(*it));
          it = st.ok() ? missing_status.erase(it) : std::next(it);
        }
        return missing_status.empty();
      },
      60s, 100ms);
  ASSERT_TRUE(all_billed) << "no STATUS for " << DescribeSome(missing_status);
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t v = 1; v <= 2; ++v) {
      auto st = c->store->Get("trips", rows[i], "STATUS", v);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      EXPECT_EQ(st->body.value("state", ""), "billed");
      EXPECT_DOUBLE_EQ(st->body.value("amount", -1.0), fare(i, v));
      EXPECT_EQ(st->body.value("billed_ref_key", int64_t{-1}), v);
      EXPECT_EQ(st->body.value("trigger", ""), "billing");
    }

  // ...and status_audit saw each of those STATUS writes.
  std::set<CellAddr> status_addrs;
  for (const auto& [row, col, ref] : base) status_addrs.emplace(row, "STATUS", ref);
  std::set<CellAddr> unaudited;
  ASSERT_TRUE(WaitFor(
      [&] {
        unaudited = audited.Missing(status_addrs);
        return unaudited.empty();
      },
      30s))
      << "status_audit never saw " << DescribeSome(unaudited);
  for (const Cell& e : audited.Events()) {
    EXPECT_EQ(e.column, "STATUS");
    EXPECT_EQ(e.body.value("state", ""), "billed");
  }
  // Billing saw BASE events only, each at least once.
  EXPECT_THAT(billed.Missing(base), IsEmpty());
  for (const Cell& e : billed.Events()) EXPECT_EQ(e.column, "BASE");
  EXPECT_EQ(billed.distinct(), base.size());
  EXPECT_EQ(audited.distinct(), status_addrs.size());

  const TriggerTotals bt = Totals(w, "billing"), at = Totals(w, "status_audit");
  EXPECT_GE(bt.handled, base.size());
  EXPECT_GE(at.handled, status_addrs.size());
  EXPECT_EQ(bt.set_aside + at.set_aside, 0u);
  std::cout << "[ trigger ] trip example: " << base.size() << " BASE -> billing " << billed.total()
            << " calls, status_audit " << audited.total() << " calls\n";
  w.Stop();
  relay->Stop();
}

// ---------------------------------------------------------------------------

TEST(TriggerTest, PerRowOrderHoldsUnderAConcurrentPool) {
  auto c = MakeCluster("tg_order", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "order-relay");
  ASSERT_TRUE(relay);

  constexpr int kRows = 60, kVersions = 6;
  std::mutex mu;
  std::vector<std::pair<std::string, int64_t>> seen;  // (row, ref_key), in call order
  std::atomic<int> in_flight{0}, max_in_flight{0};
  std::set<std::string> rows_in_flight;  // guarded by mu
  std::atomic<int> same_row_overlaps{0};
  HandledLog log;
  TriggerOptions opts;
  opts.concurrency = 8;
  TriggerWorker w(c->config, Opts("order"));
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "ordered",
                       [&](const CellEvent& e, TriggerContext&) {
                         const std::string row = e.cell.row_key.ToString();
                         {
                           std::lock_guard<std::mutex> lock(mu);
                           if (!rows_in_flight.insert(row).second) ++same_row_overlaps;
                           seen.emplace_back(row, e.cell.ref_key);
                         }
                         int now = ++in_flight, m = max_in_flight;
                         while (now > m && !max_in_flight.compare_exchange_weak(m, now)) {
                         }
                         thread_local std::mt19937 rng(std::random_device{}());
                         std::this_thread::sleep_for(std::chrono::microseconds(rng() % 4000));
                         --in_flight;
                         {
                           std::lock_guard<std::mutex> lock(mu);
                           rows_in_flight.erase(row);
                         }
                         log.Add(e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());

  const std::set<CellAddr> want = WriteAroundStart(*c->store, NewRows(kRows), kVersions, w);
  ASSERT_EQ(want.size(), static_cast<size_t>(kRows * kVersions));
  std::set<CellAddr> missing;
  ASSERT_TRUE(WaitFor(
      [&] {
        missing = log.Missing(want);
        return missing.empty();
      },
      90s))
      << "never handled: " << DescribeSome(missing);
  w.Stop();
  relay->Stop();

  std::vector<std::string> violations;
  {
    std::lock_guard<std::mutex> lock(mu);
    violations = RowOrderViolations(seen);
  }
  EXPECT_THAT(violations, IsEmpty()) << violations.size() << " out-of-order events";
  EXPECT_EQ(same_row_overlaps.load(), 0) << "two events of one row ran at the same time";
  EXPECT_GT(max_in_flight.load(), 1) << "the pool never ran rows concurrently";
  EXPECT_LE(max_in_flight.load(), opts.concurrency);
  const auto [dup_events, dup_calls] = log.Duplicates();
  std::cout << "[ trigger ] order: " << want.size() << " events of " << kRows << " rows, up to "
            << max_in_flight << " handlers at once, " << dup_calls << " re-deliveries\n";
}

// A batch handler (TriggerWorker::on_batch) gets many events per call, at
// most max_batch, each row's in log order; a row's events are never in two
// calls at once; a replay calls it with one event at a time.
TEST(TriggerTest, BatchHandlerKeepsRowOrderAndNeverSplitsARowAcrossConcurrentCalls) {
  auto c = MakeCluster("tg_batch", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "batch-relay");
  ASSERT_TRUE(relay);

  constexpr int kRows = 60, kVersions = 4;
  std::mutex mu;
  std::vector<std::pair<std::string, int64_t>> seen;  // (row, ref_key), in call order
  std::map<std::string, int> rows_in_flight;          // guarded by mu
  int same_row_overlaps = 0, calls = 0;               // guarded by mu
  size_t largest = 0, smallest = SIZE_MAX;            // guarded by mu
  HandledLog log;
  TriggerOptions opts;
  opts.concurrency = 8;
  opts.max_batch = 25;
  opts.batch_linger_ms = 50;
  TriggerWorker w(c->config, Opts("batch"));
  ASSERT_EQ("OK", w.on_batch(
                       "trips", "BASE", "batched",
                       [&](const std::vector<const CellEvent*>& events, TriggerContext&) {
                         std::set<std::string> rows;
                         for (const CellEvent* e : events) rows.insert(e->cell.row_key.ToString());
                         {
                           std::lock_guard<std::mutex> lock(mu);
                           ++calls;
                           largest = std::max(largest, events.size());
                           smallest = std::min(smallest, events.size());
                           for (const std::string& r : rows)
                             if (rows_in_flight[r]++ > 0) ++same_row_overlaps;
                           for (const CellEvent* e : events)
                             seen.emplace_back(e->cell.row_key.ToString(), e->cell.ref_key);
                         }
                         std::this_thread::sleep_for(std::chrono::milliseconds(2));
                         {
                           std::lock_guard<std::mutex> lock(mu);
                           for (const std::string& r : rows) --rows_in_flight[r];
                         }
                         for (const CellEvent* e : events) log.Add(*e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());

  // Half the versions wait in Kafka before the worker starts: batches fill.
  const std::set<CellAddr> want = WriteAroundStart(*c->store, NewRows(kRows), kVersions, w);
  ASSERT_EQ(want.size(), static_cast<size_t>(kRows * kVersions));
  std::set<CellAddr> missing;
  ASSERT_TRUE(WaitFor(
      [&] {
        missing = log.Missing(want);
        return missing.empty();
      },
      90s))
      << "never handled: " << DescribeSome(missing);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_GT(largest, 1u) << "no call carried more than one event";
    EXPECT_LE(largest, static_cast<size_t>(opts.max_batch));
    EXPECT_EQ(same_row_overlaps, 0) << "one row's events were in two calls at once";
    const std::vector<std::string> violations = RowOrderViolations(seen);
    EXPECT_THAT(violations, IsEmpty()) << violations.size() << " out-of-order events";
    std::cout << "[ trigger ] batches: " << want.size() << " events in " << calls
              << " calls, largest " << largest << "\n";
    seen.clear();
    largest = 0;
    smallest = SIZE_MAX;
  }
  const TriggerTotals totals = Totals(w, "batched");
  EXPECT_GE(totals.handled, want.size()) << "handled counts events, not calls";

  // A replay reaches every stored version again, one event per call.
  ASSERT_EQ("OK", w.Replay("batched", ReplayFrom{}).ToString());
  w.Stop();
  relay->Stop();
  std::lock_guard<std::mutex> lock(mu);
  std::set<CellAddr> replayed;
  for (const auto& [row, ref] : seen) replayed.insert({row, "BASE", ref});
  EXPECT_EQ(replayed, want);
  EXPECT_EQ(largest, 1u);
  EXPECT_EQ(smallest, 1u);
}

// A batch handler that reports some events failed (ReportFailure) while the
// call succeeds: the others are done once; a failed event is retried with its
// row's later events of the call, in order; what still fails after the last
// attempt is set aside, the row's followers with it.
TEST(TriggerTest, BatchPartialFailureRetriesOnlyTheFailedEventsAndTheirRowsLaterEvents) {
  auto c = MakeCluster("tg_batchpart", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "batchpart-relay");
  ASSERT_TRUE(relay);
  constexpr int kRows = 12, kVersions = 3;
  const std::vector<Uuid> rows = NewRows(kRows);
  // Row 0's first version fails once; row 1's second version always fails.
  std::set<CellAddr> want;
  for (int v = 0; v < kVersions; ++v) {
    auto a = PutVersion(*c->store, rows, "BASE", v, [v](size_t i) {
      int fail_times = 0;
      if (i == 0 && v == 0) fail_times = 1;
      if (i == 1 && v == 1) fail_times = 99;
      return nlohmann::json{{"i", i}, {"fail_times", fail_times}};
    });
    want.insert(a.begin(), a.end());
  }
  ASSERT_TRUE(WaitFor([&] { return relay->stats().acknowledged >= want.size(); }, 30s));

  std::mutex mu;
  std::map<CellAddr, int> seen;                       // calls that carried each event
  std::map<std::string, std::vector<int64_t>> order;  // per row, ref_keys in call order
  TriggerOptions opts;
  opts.max_batch = 100;
  opts.batch_linger_ms = 200;  // the backlog's versions of a row share a call
  opts.retry.max_attempts = 3;
  opts.retry.initial_backoff_ms = 10;
  opts.retry.max_backoff_ms = 50;
  TriggerWorker w(c->config, Opts("batchpart"));
  ASSERT_EQ("OK", w.on_batch(
                       "trips", "BASE", "partial",
                       [&](const std::vector<const CellEvent*>& events, TriggerContext& ctx) {
                         std::lock_guard<std::mutex> lock(mu);
                         for (size_t i = 0; i < events.size(); ++i) {
                           const Cell& cell = events[i]->cell;
                           const int calls = ++seen[AddrOf(cell)];
                           order[cell.row_key.ToString()].push_back(cell.ref_key);
                           if (calls <= cell.body.value("fail_times", 0))
                             ctx.ReportFailure(i, Unavailable("row not ready"));
                         }
                         return Status::Ok();
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());
  const std::string name = "partial";
  ASSERT_TRUE(WaitFor(
      [&] {
        const TriggerTotals t = Totals(w, name);
        return t.handled + t.set_aside >= want.size();
      },
      60s))
      << "handled " << Totals(w, name).handled << ", set aside " << Totals(w, name).set_aside;
  const TriggerTotals totals = Totals(w, name);
  w.Stop();
  relay->Stop();

  EXPECT_EQ(totals.handled, want.size() - 2);
  EXPECT_EQ(totals.set_aside, 2u);
  std::lock_guard<std::mutex> lock(mu);
  const std::string r0 = rows[0].ToString(), r1 = rows[1].ToString();
  for (const CellAddr& a : want) {
    const std::string& row = std::get<0>(a);
    const int64_t ref = std::get<2>(a);
    int expected = 1;                            // rows that never failed: carried once
    if (row == r0) expected = 2;                 // v0 failed once: v0-v2 go again once
    if (row == r1) expected = ref == 0 ? 1 : 3;  // v1 fails each attempt, v2 follows it
    EXPECT_EQ(seen[a], expected) << Describe(a);
  }
  // Each call carried a row's events in order, and a retry starts at the failed event.
  EXPECT_EQ(order[r0], (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(order[r1], (std::vector<int64_t>{0, 1, 2, 1, 2, 1, 2}));

  auto dead = ListDeadLetters(c->config, "trips", name);
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  std::map<int64_t, std::string> errors;  // row 1's ref_key -> error
  for (const DeadLetter& d : *dead) {
    auto e = DecodeCellEvent(d.event_json);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(e->cell.row_key.ToString(), r1);
    EXPECT_EQ(d.attempts, 3);
    errors[e->cell.ref_key] = d.error;
  }
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[1], ::testing::HasSubstr("row not ready"));
  EXPECT_THAT(errors[2], ::testing::HasSubstr("an earlier event of row " + r1));
  EXPECT_THAT(errors[2], ::testing::HasSubstr("row not ready")) << "names the row's failure";
}

// ---------------------------------------------------------------------------

// ParseReplayFrom's grammar and errors: triggers_unit_test.cc.
TEST(TriggerTest, ReplayAfterKafkaLostItsMessagesReachesEveryHistoricalCell) {
  // Its own broker: restarting it must not disturb the other tests.
  auto broker = testing::KafkaBroker::Start();
  auto c = MakeCluster("tg_replay", *broker);
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "replay-relay");
  ASSERT_TRUE(relay);

  // History: batch A (two versions of 25 rows), then batch B (25 new rows and a
  // third version of A's rows), plus STATUS cells the BASE trigger must skip.
  const std::vector<Uuid> rows_a = NewRows(25), rows_b = NewRows(25);
  auto body = [](size_t i) { return nlohmann::json{{"i", i}}; };
  std::vector<PutResult> res_a, res_b;
  std::set<CellAddr> a, bset;
  for (int v = 0; v < 2; ++v) {
    auto x = PutVersion(*c->store, rows_a, "BASE", v, body, &res_a);
    a.insert(x.begin(), x.end());
  }
  PutVersion(*c->store, rows_a, "STATUS", 0, body, &res_a);
  {
    auto x = PutVersion(*c->store, rows_b, "BASE", 0, body, &res_b);
    bset.insert(x.begin(), x.end());
    x = PutVersion(*c->store, rows_a, "BASE", 2, body, &res_b);
    bset.insert(x.begin(), x.end());
  }
  PutVersion(*c->store, rows_b, "STATUS", 0, body, &res_b);
  std::set<CellAddr> all = a;
  all.insert(bset.begin(), bset.end());
  ASSERT_EQ(all.size(), 100u);

  // The trigger first sees the history through Kafka.
  {
    HandledLog via_kafka;
    TriggerWorker w(c->config, Opts("replay-kafka"));
    ASSERT_EQ("OK", w.on("trips", "BASE", "backfill", [&](const CellEvent& e, TriggerContext&) {
                       via_kafka.Add(e);
                       return Status::Ok();
                     }).ToString());
    ASSERT_TRUE(w.Start().ok());
    std::set<CellAddr> missing;
    ASSERT_TRUE(WaitFor(
        [&] {
          missing = via_kafka.Missing(all);
          return missing.empty();
        },
        60s))
        << DescribeSome(missing);
    w.Stop();
  }
  relay->Stop();
  relay.reset();

  // Kafka loses everything: a new cluster on new ports, empty topics.
  broker->RestartEmpty();
  const ClusterConfig lost = ClusterConfigFor(c->prefix, broker->bootstrap());
  auto lag = ReadTriggerLag(lost, "trips", "backfill");
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  ASSERT_FALSE(lag->partitions.empty());
  for (const auto& p : lag->partitions) {
    EXPECT_EQ(p.end, 0) << p.topic << "/" << p.partition << " still has records";
    EXPECT_EQ(p.committed, -1) << "committed offsets survived the restart";
  }

  std::mutex mu;
  HandledLog* current = nullptr;
  TriggerWorker w(lost, Opts("replay"));
  ASSERT_EQ("OK", w.on("trips", "BASE", "backfill", [&](const CellEvent& e, TriggerContext&) {
                     std::lock_guard<std::mutex> lock(mu);
                     current->Add(e);
                     return Status::Ok();
                   }).ToString());
  auto replay = [&](HandledLog* log, const std::string& from) {
    {
      std::lock_guard<std::mutex> lock(mu);
      current = log;
    }
    auto f = ParseReplayFrom(from);
    EXPECT_TRUE(f.ok()) << from << ": " << f.status().ToString();
    if (!f.ok()) return f.status();
    return w.Replay("backfill", *f);
  };

  // From the beginning: every historical BASE cell, from the cell tables.
  HandledLog full;
  Status s = replay(&full, "beginning");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(full.Missing(all), IsEmpty());
  EXPECT_EQ(full.distinct(), all.size()) << "replayed cells of another column";
  EXPECT_EQ(full.total(), all.size()) << "a replay handles each cell once";
  for (const Cell& e : full.Events()) {
    EXPECT_EQ(e.column, "BASE");
    EXPECT_GT(e.added_id, 0u);
    EXPECT_GT(e.created_at, 0);
  }

  // From a time: only cells created at or after it (batch B).
  MicrosSinceEpoch max_a = 0, min_b = INT64_MAX;
  for (const auto& r : res_a) max_a = std::max(max_a, r.created_at);
  for (const auto& r : res_b) min_b = std::min(min_b, r.created_at);
  ASSERT_GT(min_b, max_a) << "batch B committed in the same microsecond as batch A";
  HandledLog since;
  s = replay(&since, FormatRfc3339(max_a + 1));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(since.Missing(bset), IsEmpty());
  EXPECT_EQ(since.distinct(), bset.size());

  // From shard:added_id pairs: after batch A's last added_id on each shard.
  std::map<uint32_t, uint64_t> after;
  for (const auto& r : res_a) after[r.shard] = std::max(after[r.shard], r.added_id);
  std::string pairs;
  for (uint32_t shard = 0; shard < kShards; ++shard)  // every shard, so none starts at 0
    pairs += (pairs.empty() ? "" : ",") + std::to_string(shard) + ":" +
             std::to_string(after.count(shard) ? after[shard] : 0);
  HandledLog tail;
  s = replay(&tail, pairs);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(tail.Missing(bset), IsEmpty()) << pairs;
  EXPECT_EQ(tail.distinct(), bset.size()) << pairs;

  // Only the shards listed are skipped ahead; the others start at the beginning.
  const uint32_t some_shard = res_a.front().shard;
  std::set<CellAddr> expect_partial;
  for (const auto& addr : all) {
    const uint32_t shard = ShardForRow(*Uuid::Parse(std::get<0>(addr)), kShards);
    if (shard != some_shard || bset.count(addr)) expect_partial.insert(addr);
  }
  HandledLog partial;
  s = replay(&partial, std::to_string(some_shard) + ":" + std::to_string(after[some_shard]));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(partial.Missing(expect_partial), IsEmpty());
  EXPECT_EQ(partial.distinct(), expect_partial.size());
  EXPECT_LT(expect_partial.size(), all.size());

  EXPECT_EQ(w.Replay("no_such_trigger", {}).code(), StatusCode::kNotFound);
  std::cout << "[ trigger ] replay after broker loss: " << full.distinct()
            << " cells from the beginning, " << since.distinct() << " since a time, "
            << tail.distinct() << " after shard positions\n";
}

}  // namespace
}  // namespace cellar::trigtest
