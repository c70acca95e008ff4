// The index worker's cellar_index_lag_seconds histogram against the lag a test
// measures itself: each cell is timed from its created_at to the moment a
// query returns its entry (an upper bound of the worker's created_at to entry
// written), so every quantile of the histogram must lie in or below the bucket
// of the same quantile of the measured lags, and the histogram must hold one
// observation per entry written. Before the worker's first entry it reads a
// backlog of events that change no entry (a column no index covers), as a
// worker catching up on a used cluster does: those must not count as lag.
// Part of the indexes_test binary.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include "cells/mysql_client.h"
#include "changelog/cell_event.h"
#include "changelog/consumer_groups.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "gtest/gtest.h"
#include "testing/metric_value.h"
#include "testing/plain_topic_reader.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

using ::cellar::testing::MetricValue;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The upper bound of the bucket of `bounds` holding `seconds`; +Inf above the
// top bound (Histogram::Quantile then answers the largest value observed,
// which this test does not know).
double BucketOf(const std::vector<double>& bounds, double secs) {
  auto it = std::lower_bound(bounds.begin(), bounds.end(), secs);
  return it == bounds.end() ? std::numeric_limits<double>::infinity() : *it;
}

TEST(IndexesLagTest, LagHistogramAgreesWithTheMeasuredCommitToEntryLag) {
  auto c = MakeCluster("idx_lag");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();

  // The backlog: STATUS cells of the indexed datastore, published before the worker starts.
  constexpr int kBacklog = 40;
  for (int i = 0; i < kBacklog; ++i) {
    auto r = c->store->Put("trips", {Uuid::Random(), "STATUS", 1, {{"state", "billed"}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  ASSERT_TRUE(WaitFor([&] { return c->RelayCaughtUp(); }, seconds(30)));
  c->StartWorker({def});
  // The worker's group has read past the backlog: it is assigned and consuming.
  ASSERT_TRUE(WaitFor([&] { return c->WorkerLag() == 0; }, seconds(30)));

  // Live cells, one at a time, each timed until a query returns its entry.
  IndexReader reader(c->store.get(), {def});
  constexpr int kCells = 20;
  std::mt19937_64 rng(99);
  const auto cities = RandomUuids(2);
  std::vector<double> measured;  // seconds
  for (int i = 0; i < kCells; ++i) {
    const Uuid driver = Uuid::Random(), row = Uuid::Random();
    Trip t = RandomTrip(rng, {driver}, cities);
    auto put = c->store->Put("trips", {row, "BASE", 1, TripBody(t)});
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    IndexQuery q;
    q.index = def.table;
    q.shard_value = driver.ToString();
    q.limit = 10;
    MicrosSinceEpoch visible_at = 0;
    ASSERT_TRUE(WaitFor(
        [&] {
          auto r = reader.Query(q);
          if (!r.ok() || r->hits.empty()) return false;
          visible_at = NowMicros();
          return true;
        },
        seconds(30), milliseconds(2)))
        << "entry " << i << " never became visible";
    measured.push_back(static_cast<double>(visible_at - put->created_at) / 1e6);
  }
  std::sort(measured.begin(), measured.end());

  Histogram& h = c->worker->metrics().GetHistogram("cellar_index_lag_seconds", "");
  // One observation per entry written; the backlog wrote none. The worker
  // observes right after its transaction commits, so a query can see the last
  // entry a moment before its observation lands: wait for it (a lost one
  // still fails here).
  EXPECT_TRUE(WaitFor([&] { return h.count() >= static_cast<uint64_t>(kCells); }, seconds(10)))
      << h.count() << " observations";
  EXPECT_EQ(h.count(), static_cast<uint64_t>(kCells));
  double sum = 0;
  (void)h.CumulativeCounts(&sum);
  double measured_sum = 0;
  for (double m : measured) measured_sum += m;
  EXPECT_LE(sum, measured_sum + 1e-6) << "observations exceed the measured lags in total";
  EXPECT_GT(sum, 0);
  for (double q : {0.5, 0.99}) {
    const size_t k = static_cast<size_t>(std::ceil(q * kCells));  // the quantile's order statistic
    const double measured_q = measured[k - 1];
    const double histogram_q = c->worker->LagQuantileMs(q) / 1000;
    EXPECT_LE(histogram_q, BucketOf(h.bounds(), measured_q) + 1e-9)
        << "p" << q * 100 << ": histogram says " << histogram_q * 1000 << " ms, measured "
        << measured_q * 1000 << " ms";
    std::cout << "lag p" << q * 100 << ": measured " << measured_q * 1000
              << " ms, histogram bucket " << histogram_q * 1000 << " ms\n";
  }
}

// An index's lag and oldest unprocessed age: from Kafka alone while no
// worker runs (ReadIndexerLag), then as the worker's gauges
// cellar_index_lag_events and cellar_index_oldest_unprocessed_age_seconds
// while its writes are held (the host's index_positions table locked by
// another session: every batch waits), and both 0 once the lock goes.
TEST(IndexesLagTest, LagAndOldestUnprocessedAgeWhileHeldThenZeroWhenCaughtUp) {
  auto c = MakeCluster("idx_age");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();
  std::mt19937_64 rng(7);
  const auto drivers = RandomUuids(3), cities = RandomUuids(2);
  constexpr int kCells = 10;
  auto write = [&] {
    for (int i = 0; i < kCells; ++i)
      PutTrip(*c->store, Uuid::Random(), 1, TripBody(RandomTrip(rng, drivers, cities)));
  };
  write();
  MicrosSinceEpoch written = NowMicros();  // every created_at so far <= this
  // Lag counts offsets: the cells, and the commit markers the exactly-once
  // relay's transactions end with (no consumer gets them). Nothing is
  // committed yet, so the lag is every offset once all cells are visible.
  const std::string topic = ChangeLogTopic(c->config.kafka, "trips");
  Result<GroupLag> lag = Unavailable("not read");
  ASSERT_TRUE(WaitFor(
      [&] {
        auto visible =
            testing::ReadTopic(c->config.kafka.brokers, topic, c->config.kafka.partitions, 5000);
        auto offsets = TopicRecordCount(c->config, topic);
        lag = ReadIndexerLag(c->config, "trips");
        return visible.ok() && visible->records.size() == kCells && offsets.ok() && lag.ok() &&
               lag->total == *offsets;
      },
      seconds(30), milliseconds(50)))
      << (lag.ok() ? std::to_string(lag->total) : lag.status().ToString());
  const MicrosSinceEpoch before = NowMicros();
  lag = ReadIndexerLag(c->config, "trips");
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_GE(lag->OldestAgeSeconds(NowMicros() / 1000), static_cast<double>(before - written) / 1e6);

  c->StartWorker({def});
  MetricsRegistry& m = c->worker->metrics();
  auto gauge = [&](const char* name) {
    return MetricValue(m.Render(), name, {{"index", def.table}});
  };
  ASSERT_TRUE(WaitFor([&] { return c->WorkerLag() == 0; }, seconds(30)));
  EXPECT_TRUE(WaitFor(
      [&] {
        return gauge("cellar_index_lag_events") == 0 &&
               gauge("cellar_index_oldest_unprocessed_age_seconds") == 0;
      },
      seconds(30)))
      << m.Render();

  // Hold every write of the worker, then write more.
  auto lease = c->store->PoolForHost(0).Acquire();
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  const std::string positions =
      QualifiedTable(c->config.HostDatabase(c->config.mysql.hosts[0]), "index_positions");
  ASSERT_TRUE((*lease)->Execute("LOCK TABLES " + positions + " WRITE").ok());
  write();
  written = NowMicros();
  // The new cells, their transactions' markers (at most one per transaction
  // and partition) and the marker each partition ended with before.
  const double max_lag = 2 * kCells + c->config.kafka.partitions;
  double held = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        held = gauge("cellar_index_lag_events");
        return held >= kCells && held <= max_lag;
      },
      seconds(30)))
      << m.Render();
  for (int round = 0; round < 2; ++round) {
    const double since = static_cast<double>(NowMicros() - written) / 1e6;
    EXPECT_TRUE(WaitFor(
        [&] { return gauge("cellar_index_oldest_unprocessed_age_seconds") >= since; }, seconds(10)))
        << "age below " << since << " s:\n"
        << m.Render();
    // (no ASSERT while the table is locked: the lease must be unlocked below)
    EXPECT_TRUE(WaitFor([&] { return NowMicros() - written > (round + 1) * 700000; }, seconds(5)));
  }
  EXPECT_EQ(gauge("cellar_index_lag_events"), held) << "lag moved while every write is held";

  ASSERT_TRUE((*lease)->Execute("UNLOCK TABLES").ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        return gauge("cellar_index_lag_events") == 0 &&
               gauge("cellar_index_oldest_unprocessed_age_seconds") == 0;
      },
      seconds(30)))
      << m.Render();
  EXPECT_TRUE(WaitFor(
      [&] {
        lag = ReadIndexerLag(c->config, "trips");
        return lag.ok() && lag->total == 0;
      },
      seconds(30), milliseconds(50)));
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(lag->OldestAgeSeconds(NowMicros() / 1000), 0);
}

}  // namespace
}  // namespace cellar::idxtest
