// The index worker's stop drain (IndexWorkerOptions::drain_timeout_ms, the
// `cellar-indexer --drain-timeout-ms` flag): Stop() waits for the batch in
// flight but starts no queued batch once the drain timed out, and a later
// worker applies what was left. Part of the indexes_test binary.
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "cells/mysql_client.h"
#include "gtest/gtest.h"
#include "testing/metric_value.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

using ::cellar::testing::MetricValue;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Every write of the worker is held (the host's index_positions table locked
// by another session, as in indexes_lag_test.cc) while one batch is in flight
// and the rest are queued; Stop() begins, and the lock is released 1.5 s
// later, past the 500 ms drain. The batch in flight then commits and no
// other starts: with the 30 s default every queued event would be applied
// right after the release, so the test fails if the option is not used.
TEST(IndexesStopTest, StopStartsNoBatchOnceTheDrainTimedOutAndTheNextWorkerAppliesTheRest) {
  auto c = MakeCluster("idx_drain");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  const int version = ApplyIndex(*c->store, def).version;
  c->StartRelay();
  IndexWorkerOptions options;
  options.concurrency = 1;
  options.lanes_per_host = 1;
  options.lane_share_below = 0;
  options.max_batch = 1;  // one event per batch: one in flight, the rest queued
  options.drain_timeout_ms = 500;
  c->StartWorker({def}, options);

  auto lease = c->store->PoolForHost(0).Acquire();
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  const std::string positions =
      QualifiedTable(c->config.HostDatabase(c->config.mysql.hosts[0]), "index_positions");
  ASSERT_TRUE((*lease)->Execute("LOCK TABLES " + positions + " WRITE").ok());
  // (no ASSERT while the table is locked: the lease must be unlocked below)
  std::mt19937_64 rng(11);
  const auto drivers = RandomUuids(2), cities = RandomUuids(2);
  constexpr int kCells = 10;
  std::vector<Uuid> rows;
  for (int i = 0; i < kCells; ++i) {
    rows.push_back(Uuid::Random());
    PutTrip(*c->store, rows.back(), 1, TripBody(RandomTrip(rng, drivers, cities)));
  }
  MetricsRegistry& m = c->worker->metrics();
  EXPECT_TRUE(WaitFor(
      [&] { return MetricValue(m.Render(), "cellar_consumer_records_decoded_total") >= kCells; },
      seconds(30)))
      << m.Render();

  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] { c->StopWorker(); });
  const auto held = milliseconds(1500);
  EXPECT_TRUE(WaitFor([&] { return std::chrono::steady_clock::now() - t0 >= held; }, seconds(5)));
  EXPECT_TRUE((*lease)->Execute("UNLOCK TABLES").ok());
  stopper.join();
  const auto stop_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
  auto applied = [&] {
    int n = 0;
    for (const Uuid& row : rows) n += EntryCount(*c, def.table, version, row) > 0;
    return n;
  };
  const int applied_at_stop = applied();
  EXPECT_GE(applied_at_stop, 1) << "the batch in flight was not waited for";
  EXPECT_LT(applied_at_stop, kCells) << "queued batches started after the drain timed out";
  EXPECT_LT(stop_ms, 1500 + 3000);
  std::cout << "[ index ] Stop() with a " << options.drain_timeout_ms
            << " ms drain: " << kCells - applied_at_stop
            << " events left to the next worker, returned in " << stop_ms << " ms\n";

  c->StartWorker({def});
  EXPECT_TRUE(WaitFor([&] { return applied() == kCells; }, seconds(30)))
      << "events left by the drain were not applied by the next worker";
}

}  // namespace
}  // namespace cellar::idxtest
