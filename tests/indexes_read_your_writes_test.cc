// Read your index writes (issue 16): a put's position token given to an index
// query as `after` makes the query wait until the index worker has applied
// that put, so the query sees it. Two hosts, the in-process relay and worker.
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "cells/log_position.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_position_watcher.h"
#include "indexes/index_positions.h"
#include "testing/private_mariadb.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

using ::testing::HasSubstr;

TEST(ReadYourIndexWritesTest, AThousandPutsEachSeenByTheQueryGivenItsPosition) {
  auto c = MakeCluster("idx_ryw", /*hosts=*/2);
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});
  const std::vector<Uuid> drivers = RandomUuids(8);
  const std::vector<Uuid> cities = RandomUuids(3);
  std::mt19937_64 rng(16);

  // The ref_key of `row` in a query of `driver` after `token`; -1 if absent.
  auto found = [&](const Uuid& driver, const std::string& token,
                   const Uuid& row) -> Result<int64_t> {
    IndexQuery q = ByDriver(driver, 1000);
    q.after = token;
    CELLAR_ASSIGN_OR_RETURN(IndexQueryResult r, reader.Query(q));
    for (const IndexHit& h : r.hits)
      if (h.row_key == row) return h.ref_key;
    return int64_t{-1};
  };
  struct Written {
    Uuid row, driver;
    int64_t ref_key;
  };
  std::vector<Written> written;
  int not_seen = 0, moved_not_seen = 0, old_still_there = 0;
  for (int i = 0; i < 1000; ++i) {
    CellWrite w;
    w.column = "BASE";
    Trip t = RandomTrip(rng, drivers, cities);
    // Every fourth pair moves an earlier row to another driver (its next version).
    const bool move = i % 4 == 3;
    Uuid old_driver;
    if (move) {
      Written& earlier = written[rng() % written.size()];
      old_driver = earlier.driver;
      while (t.driver == old_driver) t = RandomTrip(rng, drivers, cities);
      w.row_key = earlier.row;
      w.ref_key = ++earlier.ref_key;
      earlier.driver = t.driver;
    } else {
      w.row_key = Uuid::Random();
      w.ref_key = 1;
      written.push_back({w.row_key, t.driver, 1});
    }
    w.body = TripBody(t);
    auto put = c->store->Put("trips", w);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    const std::string token = EncodeLogPosition(c->config, "trips", put->shard, put->added_id);
    auto hit = found(t.driver, token, w.row_key);
    ASSERT_TRUE(hit.ok()) << hit.status().ToString();
    if (*hit != w.ref_key) ++(move ? moved_not_seen : not_seen);
    if (move) {
      auto old = found(old_driver, token, w.row_key);
      ASSERT_TRUE(old.ok()) << old.status().ToString();
      if (*old != -1) ++old_still_there;
    }
  }
  EXPECT_EQ(not_seen, 0) << "queries after their put's position missed the put";
  EXPECT_EQ(moved_not_seen, 0) << "queries missed a moved row under its new driver";
  EXPECT_EQ(old_still_there, 0) << "queries still saw a moved row under its old driver";

  // A column no index covers moves the position too: its token is answered.
  CellWrite status{written.front().row, "STATUS", 1, {{"state", "paid"}}};
  auto put = c->store->Put("trips", status);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  IndexQuery q = ByDriver(drivers[0]);
  q.after = EncodeLogPosition(c->config, "trips", put->shard, put->added_id);
  EXPECT_TRUE(reader.Query(q).ok());

  // A token the worker cannot reach in time: DeadlineExceeded saying how far it is.
  auto late = WaitForIndexPosition(c->store.get(), "trips", put->shard, put->added_id + 1000000,
                                   /*timeout_ms=*/300);
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late.ToString();
  EXPECT_THAT(late.message(), HasSubstr("up to position"));

  // Malformed and foreign tokens: InvalidArgument naming them, nothing waited for.
  for (const std::string& bad : {std::string("p1.1.2"), std::string("nonsense"),
                                 EncodeLogPosition(c->config, "users", put->shard, 1)}) {
    IndexQuery b = ByDriver(drivers[0]);
    b.after = bad;
    auto r = reader.Query(b);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(bad));
  }
}

// The first two shards of each host of `config`, host by host.
std::vector<uint32_t> TwoShardsPerHost(const ClusterConfig& config) {
  std::vector<uint32_t> out;
  std::vector<int> taken(config.mysql.hosts.size(), 0);
  for (uint32_t s = 0; s < config.shards; ++s) {
    const size_t h = config.HostIndexForShard(s);
    if (taken[h] < 2) {
      ++taken[h];
      out.push_back(s);
    }
  }
  return out;
}

// Raises the positions of `highest` on each shard's host, as the index worker
// does (in a transaction of its own here).
void Record(Cluster& c, const std::map<uint32_t, uint64_t>& highest) {
  std::map<size_t, std::map<uint32_t, uint64_t>> by_host;
  for (const auto& [shard, position] : highest)
    by_host[c.config.HostIndexForShard(shard)][shard] = position;
  for (const auto& [host, positions] : by_host) {
    auto lease = c.store->PoolForHost(host).Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    const std::string db = c.config.HostDatabase(c.config.mysql.hosts[host]);
    ASSERT_TRUE(EnsureIndexPositionsTable(**lease, db).ok());
    ASSERT_TRUE((*lease)->Begin().ok());
    ASSERT_TRUE(RecordIndexPositions(**lease, db, "trips", positions).ok());
    ASSERT_TRUE((*lease)->Commit().ok());
  }
}

// Sets `shards` to TwoShardsPerHost of a two-host cluster and records
// position 1 for each of them.
void StartAtPositionOne(Cluster& c, std::vector<uint32_t>* shards) {
  *shards = TwoShardsPerHost(c.config);
  ASSERT_EQ(shards->size(), 4u);
  std::map<uint32_t, uint64_t> one;
  for (uint32_t s : *shards) one[s] = 1;
  Record(c, one);
}

// cellar_index_position_waits_total{outcome} as registered by the watcher.
uint64_t WaitsEnded(MetricsRegistry& metrics, const std::string& outcome) {
  return metrics.GetCounter("cellar_index_position_waits_total", "", {{"outcome", outcome}})
      .value();
}

// Many queries waiting for their tokens share one reader per host: with 64
// callers waiting 400 ms each, a reader per caller (every 1-20 ms) would send
// ~1,600 reads; shared, the hosts are read a few dozen times. Every caller
// still gets the exact answer: OK once its position is recorded, the position
// read in a DeadlineExceeded.
TEST(ReadYourIndexWritesTest, CallersWaitingOnAHostShareItsReads) {
  auto c = MakeCluster("idx_ryw_share", /*hosts=*/2);
  ASSERT_TRUE(c);
  std::vector<uint32_t> shards;
  ASSERT_NO_FATAL_FAILURE(StartAtPositionOne(*c, &shards));
  MetricsRegistry metrics;
  IndexPositionWatcher watcher(c->store.get(), &metrics);

  constexpr int kCallers = 64;
  auto wait_all = [&](auto target_of, int timeout_ms) {
    std::vector<Status> out(kCallers);
    std::vector<std::thread> threads;
    for (int i = 0; i < kCallers; ++i)
      threads.emplace_back([&, i] {
        out[i] = watcher.Wait("trips", shards[i % shards.size()], target_of(i), timeout_ms);
      });
    for (auto& t : threads) t.join();
    return out;
  };

  // Nothing reaches the targets: everyone times out, naming the position read.
  const std::vector<Status> late = wait_all([](int i) { return uint64_t(100 + i); }, 400);
  for (const Status& st : late) {
    EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("up to position 1, not yet"));
  }
  const uint64_t shared_reads = watcher.reads();
  EXPECT_LT(shared_reads, 3u * kCallers) << "callers of one host did not share its reads";
  EXPECT_GE(shared_reads, 2u) << "each host is read at least once";
  EXPECT_EQ(WaitsEnded(metrics, "timed_out"), uint64_t{kCallers});
  EXPECT_EQ(WaitsEnded(metrics, "applied"), 0u);

  // The positions arrive while the callers wait: all of them answer OK.
  std::atomic<bool> recorded{false};
  std::thread recorder([&] {
    // Once every caller waits: the watcher has read since they started.
    const uint64_t before = watcher.reads();
    EXPECT_TRUE(WaitFor([&] { return watcher.reads() >= before + 4; }, std::chrono::seconds(10)));
    Record(*c, {{shards[0], 500}, {shards[1], 500}, {shards[2], 500}, {shards[3], 500}});
    recorded = true;
  });
  const std::vector<Status> reached = wait_all([](int i) { return uint64_t(200 + i); }, 20000);
  recorder.join();
  EXPECT_TRUE(recorded);
  for (const Status& st : reached) EXPECT_TRUE(st.ok()) << st.ToString();

  // A position already seen answers at once, without a read.
  const uint64_t reads_before = watcher.reads();
  EXPECT_TRUE(watcher.Wait("trips", shards[0], 450, 1000).ok());
  EXPECT_EQ(watcher.reads(), reads_before);

  // A zero timeout still reads once: a position already applied is OK, not a
  // timeout, even for a watcher that has seen nothing yet.
  IndexPositionWatcher fresh(c->store.get());
  EXPECT_TRUE(fresh.Wait("trips", shards[3], 450, /*timeout_ms=*/0).ok());
  EXPECT_EQ(fresh.reads(), 1u);
  const Status zero = fresh.Wait("trips", shards[3], 501, /*timeout_ms=*/0);
  EXPECT_EQ(zero.code(), StatusCode::kDeadlineExceeded) << zero.ToString();
  EXPECT_THAT(zero.message(), HasSubstr("up to position 500, not yet 501"));

  // What a node's GET /metrics shows of it.
  EXPECT_EQ(WaitsEnded(metrics, "applied"), uint64_t{kCallers} + 1);
  EXPECT_EQ(WaitsEnded(metrics, "failed"), 0u);
  EXPECT_EQ(metrics.GetCounter("cellar_index_position_reads_total", "").value(), watcher.reads());
  const std::string text = metrics.Render();
  EXPECT_THAT(
      text, HasSubstr("cellar_index_position_wait_seconds_count " + std::to_string(kCallers + 1)));
}

// A host that goes down while callers wait on it: every one of them gets the
// failed read's error, not a timeout; callers of the other host are unaffected.
TEST(ReadYourIndexWritesTest, CallersOfAHostThatGoesDownGetItsError) {
  auto second = testing::PrivateMariaDb::Start("ryw2");
  ASSERT_TRUE(second);
  auto c = MakeCluster("idx_ryw_down", {&Db(), second.get()});
  ASSERT_TRUE(c);
  std::vector<uint32_t> shards;
  ASSERT_NO_FATAL_FAILURE(StartAtPositionOne(*c, &shards));
  MetricsRegistry metrics;
  IndexPositionWatcher watcher(c->store.get(), &metrics);
  // shards[2] and shards[3] live on the second host.
  ASSERT_EQ(c->config.HostIndexForShard(shards[2]), 1u);

  std::vector<Status> down(8), up(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back(
        [&, i] { down[i] = watcher.Wait("trips", shards[2 + i % 2], 1000, 30000); });
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] { up[i] = watcher.Wait("trips", shards[i], 1000, 1500); });
  const uint64_t before = watcher.reads();
  EXPECT_TRUE(WaitFor([&] { return watcher.reads() >= before + 4; }, std::chrono::seconds(10)));
  second->Kill();
  for (auto& t : threads) t.join();
  for (const Status& st : down) {
    EXPECT_NE(st.code(), StatusCode::kOk);
    EXPECT_NE(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  }
  for (const Status& st : up) EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_EQ(WaitsEnded(metrics, "failed"), 8u);
  EXPECT_EQ(WaitsEnded(metrics, "timed_out"), 2u);
}

}  // namespace
}  // namespace cellar::idxtest
