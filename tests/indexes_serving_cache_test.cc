// An IndexReader keeps the serving version it read from the registry for
// serving_version_cache_ms (index_query.h): once a newer version serves, a
// plain query may read the retired one for that long; a query with `after`
// reads the registry itself; a cached version whose tables were dropped is
// read again and the query still answers. Two hosts (the registry lives on the
// first), the in-process relay and worker.
#include <string>
#include <vector>

#include "cells/log_position.h"
#include "gtest/gtest.h"
#include "indexes/index_catalog.h"
#include "indexes/index_retirement.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

// A query of `driver` by `reader`: the version it read, or -1 on an error
// (added to `errors`).
int VersionRead(IndexReader& reader, const Uuid& driver, const std::string& after,
                std::string* errors) {
  IndexQuery q = ByDriver(driver, 1000);
  q.after = after;
  auto r = reader.Query(q);
  if (!r.ok()) {
    *errors += r.status().ToString() + "\n";
    return -1;
  }
  return r->version;
}

TEST(IndexServingCacheTest, ReadersKeepTheServingVersionForTheirBoundAndAfterReadsTheRegistry) {
  auto c = MakeCluster("idx_serving_cache", /*hosts=*/2);
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ASSERT_EQ(ApplyIndex(*c->store, def).version, 1);
  c->StartRelay();
  c->StartWorker({def});
  std::mt19937_64 rng(18);
  const std::vector<Uuid> drivers = RandomUuids(2);
  const std::vector<Uuid> cities = RandomUuids(2);
  Trip t = RandomTrip(rng, drivers, cities);
  PutTrip(*c->store, Uuid::Random(), 1, TripBody(t));

  // Three readers with a bound longer than the test (so that what they read
  // does not depend on its speed), one with a short bound, one that never caches.
  constexpr int kLongerThanTheTestMs = 10 * 60 * 1000;
  IndexReader cached(c->store.get(), {def}, kLongerThanTheTestMs);
  IndexReader cached_then_after(c->store.get(), {def}, kLongerThanTheTestMs);
  IndexReader cached_then_dropped(c->store.get(), {def}, kLongerThanTheTestMs);
  IndexReader short_bound(c->store.get(), {def}, /*serving_version_cache_ms=*/300);
  IndexReader uncached(c->store.get(), {def}, /*serving_version_cache_ms=*/0);
  // A reader given the changed definition (below) before its version serves.
  IndexDefinition def2 = def;
  def2.column_defs[0].fields.push_back({"rider_uuid", IndexFieldType::kUuid, "f_rider_uuid"});
  IndexReader new_yaml(c->store.get(), {def2}, kLongerThanTheTestMs);
  std::string errors;
  for (IndexReader* r :
       {&cached, &cached_then_after, &cached_then_dropped, &short_bound, &uncached, &new_yaml})
    ASSERT_EQ(VersionRead(*r, t.driver, "", &errors), 1) << errors;

  // Version 2 (one field more) serves from now on; version 1 is retired. An
  // empty version is enough here: the test is about which version is read.
  IndexCatalog catalog(c->store.get());
  ASSERT_EQ(ApplyIndex(*c->store, def2).version, 2);
  ASSERT_TRUE(catalog.MarkReady(def.table, 2).ok());

  EXPECT_EQ(VersionRead(uncached, t.driver, "", &errors), 2) << errors;
  // The readers that read version 1 still read it...
  EXPECT_EQ(VersionRead(cached, t.driver, "", &errors), 1) << errors;
  // ... but a query on a field only version 2 has is not refused by the
  // cached version 1: the reader reads the registry again.
  IndexQuery by_rider = ByDriver(t.driver, 1000);
  by_rider.filters = {Filter(def2, "rider_uuid = " + Uuid::Random().ToString())};
  auto new_field = new_yaml.Query(by_rider);
  ASSERT_TRUE(new_field.ok()) << new_field.status().ToString();
  EXPECT_EQ(new_field->version, 2);
  // ... and a query that waits for a position reads the registry.
  auto put = c->store->Put("trips", CellWrite{Uuid::Random(), "BASE", 1, TripBody(t)});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  const std::string token = EncodeLogPosition(c->config, "trips", put->shard, put->added_id);
  EXPECT_EQ(VersionRead(cached_then_after, t.driver, token, &errors), 2) << errors;
  // That fresh read replaced the cached version.
  EXPECT_EQ(VersionRead(cached_then_after, t.driver, "", &errors), 2) << errors;

  // Version 1's tables dropped (no settle: the worker is stopped, and the
  // test's own reader is the one that still holds it): the reader that holds
  // it reads the registry again, and answers.
  c->StopWorker();
  DropRetiredOptions drop;
  drop.index = def.table;
  drop.settle_ms = 0;
  auto dropped = DropRetiredIndexVersions(c->store.get(), drop);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  ASSERT_EQ(dropped->versions.size(), 1u);
  EXPECT_EQ(VersionRead(cached_then_dropped, t.driver, "", &errors), 2) << errors;
  EXPECT_EQ(VersionRead(cached, t.driver, "", &errors), 2) << errors;

  // Past its bound a reader reads the registry again.
  EXPECT_TRUE(WaitFor([&] { return VersionRead(short_bound, t.driver, "", &errors) == 2; },
                      std::chrono::milliseconds(10000), std::chrono::milliseconds(50)))
      << errors;
  EXPECT_EQ(errors, "");
}

}  // namespace
}  // namespace cellar::idxtest
