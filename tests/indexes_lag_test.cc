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

#include "gtest/gtest.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

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
  // One observation per entry written; the backlog wrote none.
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

}  // namespace
}  // namespace cellar::idxtest
