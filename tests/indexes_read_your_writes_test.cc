// Read your index writes (issue 16): a put's position token given to an index
// query as `after` makes the query wait until the index worker has applied
// that put, so the query sees it. Two hosts, the in-process relay and worker.
#include <string>
#include <vector>

#include "cells/log_position.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_positions.h"
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

}  // namespace
}  // namespace cellar::idxtest
