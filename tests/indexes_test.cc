// Index integration tests against one private MariaDB, the local broker, an
// in-process relay and an in-process IndexWorker (issue 5): the
// driver_partner_index example against a brute-force scan, ordering and
// paging, verify, updates / replays / shard-field moves / tombstones, bad
// bodies and SQL-looking values, query errors, check --repair, and an index
// applied while the worker already runs. Every test has its own host
// databases, topics and consumer group (its own cluster prefix). Same binary:
// bodies too large for the change log (indexes_large_body_test.cc) and the lag
// histogram against measured lag (indexes_lag_test.cc).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/time.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_entry.h"
#include "indexes/index_writer.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar {

namespace idxtest {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

uint64_t Skipped(Cluster& c, const std::string& index) {
  return c.worker->metrics()
      .GetCounter("cellar_index_skipped_total", "Cell versions without a valid entry",
                  {{"index", index}})
      .value();
}

// 1. The example: trips of several drivers in several cities; queries by
// driver with a city equality and a time range equal a brute-force scan;
// ordering by a field; cursors; verify.
TEST(IndexesTest, DriverPartnerExampleMatchesBruteForce) {
  auto c = MakeCluster("idx_example", /*hosts=*/2);
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  IndexVersion v = ApplyIndex(*c->store, def);
  EXPECT_EQ(v.version, 1);
  EXPECT_EQ(v.state, IndexState::kReady);  // an empty datastore has nothing to backfill
  c->StartRelay();
  c->StartWorker({def});

  std::mt19937_64 rng(1234);
  const auto drivers = RandomUuids(6);
  const auto cities = RandomUuids(4);
  std::vector<Uuid> rows;
  for (int i = 0; i < 240; ++i) {
    rows.push_back(Uuid::Random());
    PutTrip(*c->store, rows.back(), 1, TripBody(RandomTrip(rng, drivers, cities)));
  }
  IndexReader reader(c->store.get(), {def});
  // Wait for the whole index (every driver) before the detailed queries.
  for (const Uuid& d : drivers)
    ASSERT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(d)), "") << d.ToString();

  const auto latest = LatestCells(*c->store, "trips");
  Model model(def, latest);
  EXPECT_EQ(model.size(), rows.size());
  size_t total_hits = 0;
  for (const Uuid& d : drivers) {
    for (const Uuid& city : cities) {
      IndexQuery q = ByDriver(d);
      q.filters = {Filter(def, "city_uuid = " + city.ToString()),
                   Filter(def, "trip_created_at >= 2026-01-10T00:00:00Z"),
                   Filter(def, "trip_created_at < 2026-02-15T00:00:00Z")};
      auto want = model.Answer(q);
      total_hits += want.size();
      auto r = reader.Query(q);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->version, 1);
      EXPECT_TRUE(r->next_cursor.empty());
      EXPECT_EQ(Diff(want, ToHits(*r)), "") << d.ToString() << " in " << city.ToString();
      // Only some fields, ordered by trip time ascending.
      q.fields = {"trip_created_at", "fare.total"};
      q.order_by = "trip_created_at";
      q.descending = false;
      EXPECT_EQ(Diff(model.Answer(q), QueryAll(reader, q)), "");
    }
  }
  EXPECT_GT(total_hits, 30u) << "the time range should select a good share of the trips";

  // Orders, and pages of several sizes: the pages concatenate to the full answer.
  for (const Uuid& d : {drivers[0], drivers[1]}) {
    for (const std::string order : {"", "fare.total", "trip_created_at", "status", "city_uuid"}) {
      for (bool desc : {true, false}) {
        IndexQuery q = ByDriver(d);
        q.order_by = order;
        q.descending = desc;
        const auto want = model.Answer(q);
        ASSERT_GT(want.size(), 10u);
        for (int limit : {1, 3, 7, 1000}) {
          q.limit = limit;
          int pages = 0;
          auto got = QueryAll(reader, q, &pages);
          EXPECT_EQ(Diff(want, got), "")
              << "order " << order << " desc " << desc << " limit " << limit;
          EXPECT_EQ(pages, std::max<int>(1, (want.size() + limit - 1) / limit));
        }
      }
    }
  }
  // In-lists and inequalities.
  IndexQuery q = ByDriver(drivers[2]);
  q.filters = {Filter(def, "status in (completed, 'open')"), Filter(def, "fare.total >= 12.25"),
               Filter(def, "city_uuid != " + cities[0].ToString())};
  EXPECT_EQ(Diff(model.Answer(q), QueryAll(reader, q)), "");

  // verify: stop the worker, change a trip's city; the index is stale until
  // the worker runs again, and verify drops the stale hit.
  c->StopWorker();
  IndexQuery by_city = ByDriver(drivers[3]);
  by_city.filters = {Filter(def, "city_uuid = " + cities[1].ToString())};
  auto before = reader.Query(by_city);
  ASSERT_TRUE(before.ok());
  ASSERT_FALSE(before->hits.empty());
  const IndexHit moved = before->hits.front();
  nlohmann::json body = latest.at({moved.row_key, "BASE"}).body;
  body["city_uuid"] = cities[2].ToString();
  PutTrip(*c->store, moved.row_key, 2, body);
  auto stale = reader.Query(by_city);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->hits.size(), before->hits.size());  // not yet re-indexed
  by_city.verify = true;
  auto verified = reader.Query(by_city);
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_EQ(verified->dropped_by_verify, 1);
  ASSERT_EQ(verified->hits.size(), before->hits.size() - 1);
  for (const auto& h : verified->hits) EXPECT_NE(h.row_key, moved.row_key);
  c->StartWorker({def});
  by_city.verify = false;
  EXPECT_EQ(WaitForConverge(*c->store, reader, def, by_city), "");
  by_city.verify = true;
  auto after = reader.Query(by_city);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->dropped_by_verify, 0);
  EXPECT_EQ(CheckProblems(*c->store, def), "");
}

// 2. A new version with another city replaces the entry; replays of old
// events change nothing; a new driver moves the entry; a tombstone removes it.
TEST(IndexesTest, UpdatesReplaysDriverChangesAndTombstones) {
  auto c = MakeCluster("idx_updates");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  const int version = ApplyIndex(*c->store, def).version;
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});
  IndexWriter writer(c->store.get(), nullptr);

  const Uuid driver_a = Uuid::Random();
  const Uuid driver_b = UuidOnOtherShard(driver_a);  // entries live on another shard
  const Uuid driver_c = UuidOnSameShard(driver_b);
  const Uuid city_x = Uuid::Random(), city_y = Uuid::Random();
  const Uuid row = Uuid::Random();
  Trip t{driver_a, city_x, *ParseRfc3339("2026-02-01T08:00:00Z"), 12.5, "open", Uuid::Random()};
  PutTrip(*c->store, row, 1, TripBody(t));
  // Some neighbours, so that emptiness is not the only thing checked.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20; ++i)
    PutTrip(*c->store, Uuid::Random(), 1,
            TripBody(RandomTrip(rng, {driver_a, driver_b, driver_c}, {city_x, city_y})));
  for (const Uuid& d : {driver_a, driver_b, driver_c})
    ASSERT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(d)), "");

  auto in_city = [&](const Uuid& driver, const Uuid& city) {
    IndexQuery q = ByDriver(driver);
    q.filters = {Filter(def, "city_uuid = " + city.ToString())};
    std::set<std::pair<Uuid, int64_t>> out;
    for (const auto& h : QueryAll(reader, q)) out.insert({h.row_key, h.ref_key});
    return out;
  };
  EXPECT_TRUE(in_city(driver_a, city_x).count({row, 1}));

  // New city (ref_key 2).
  t.city = city_y;
  PutTrip(*c->store, row, 2, TripBody(t));
  ASSERT_TRUE(WaitFor([&] { return in_city(driver_a, city_y).count({row, 2}) == 1; }, seconds(20)));
  for (const auto& [r, ref] : in_city(driver_a, city_x)) EXPECT_NE(r, row);
  EXPECT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(driver_a)), "");

  // Replays of the old and of the current event: stale, nothing regresses.
  auto v1 = c->store->Get("trips", row, "BASE", 1);
  auto v2 = c->store->Get("trips", row, "BASE", 2);
  ASSERT_TRUE(v1.ok() && v2.ok());
  for (const Cell* old : {&*v1, &*v2}) {
    auto r = writer.Apply(def, version, *old);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->outcome, IndexApply::kStale);
  }
  EXPECT_TRUE(in_city(driver_a, city_y).count({row, 2}));
  for (const auto& [r, ref] : in_city(driver_a, city_x)) EXPECT_NE(r, row);
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 1);

  // Another driver on another shard (ref_key 3): the old driver loses it.
  t.driver = driver_b;
  PutTrip(*c->store, row, 3, TripBody(t));
  ASSERT_TRUE(WaitFor([&] { return in_city(driver_b, city_y).count({row, 3}) == 1; }, seconds(20)));
  for (const auto& h : QueryAll(reader, ByDriver(driver_a))) EXPECT_NE(h.row_key, row);
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 1);
  // A driver on the same shard as the current one (ref_key 4).
  t.driver = driver_c;
  PutTrip(*c->store, row, 4, TripBody(t));
  ASSERT_TRUE(WaitFor([&] { return in_city(driver_c, city_y).count({row, 4}) == 1; }, seconds(20)));
  for (const auto& h : QueryAll(reader, ByDriver(driver_b))) EXPECT_NE(h.row_key, row);
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 1);
  // Replaying the driver_b version brings nothing back.
  auto v3 = c->store->Get("trips", row, "BASE", 3);
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(writer.Apply(def, version, *v3)->outcome, IndexApply::kStale);
  for (const auto& h : QueryAll(reader, ByDriver(driver_b))) EXPECT_NE(h.row_key, row);

  // Tombstone: gone everywhere; replays of older versions do not resurrect it.
  auto erased = c->store->Erase("trips", row, "BASE");
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(erased->ref_key, 5);
  ASSERT_TRUE(WaitFor([&] { return EntryCount(*c, def.table, version, row) == 0; }, seconds(20)));
  for (const auto& h : QueryAll(reader, ByDriver(driver_c))) EXPECT_NE(h.row_key, row);
  auto v4 = c->store->Get("trips", row, "BASE", 4);
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(writer.Apply(def, version, *v4)->outcome, IndexApply::kStale);
  EXPECT_EQ(EntryCount(*c, def.table, version, row), 0);
  // A put after the tombstone indexes the row again.
  t.driver = driver_a;
  PutTrip(*c->store, row, 6, TripBody(t));
  ASSERT_TRUE(WaitFor([&] { return in_city(driver_a, city_y).count({row, 6}) == 1; }, seconds(20)));
  for (const Uuid& d : {driver_a, driver_b, driver_c})
    EXPECT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(d)), "");
  EXPECT_TRUE(WaitFor([&] { return CheckProblems(*c->store, def).empty(); }, seconds(10)))
      << CheckProblems(*c->store, def);
}

// 5. Bad bodies produce no entry and are counted; SQL-looking values are data.
TEST(IndexesTest, BadBodiesAreSkippedAndCountedAndSqlLookingValuesAreData) {
  auto c = MakeCluster("idx_bad");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  const int version = ApplyIndex(*c->store, def).version;
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});
  const Uuid driver = Uuid::Random(), city = Uuid::Random();
  Trip good{driver, city, *ParseRfc3339("2026-01-05T10:00:00Z"), 9.5, "completed", Uuid::Random()};

  std::vector<std::pair<std::string, nlohmann::json>> bad;
  auto body = TripBody(good);
  body.erase("city_uuid");
  bad.push_back({"missing city_uuid", body});
  body = TripBody(good);
  body["fare"]["total"] = "9.50";
  bad.push_back({"fare.total a string", body});
  body = TripBody(good);
  body["fare"] = 9.5;
  bad.push_back({"fare not an object", body});
  body = TripBody(good);
  body["trip_created_at"] = "2026-13-01T00:00:00Z";
  bad.push_back({"bad datetime", body});
  body = TripBody(good);
  body["status"] = std::string(300, 's');
  bad.push_back({"status too long", body});
  body = TripBody(good);
  body["driver_partner_uuid"] = "x'; DROP TABLE cells_trips; --";
  bad.push_back({"driver not a UUID", body});
  std::vector<Uuid> bad_rows;
  for (const auto& [why, b] : bad) {
    bad_rows.push_back(Uuid::Random());
    PutTrip(*c->store, bad_rows.back(), 1, b);
  }
  const Uuid good_row = Uuid::Random();
  PutTrip(*c->store, good_row, 1, TripBody(good));
  ASSERT_TRUE(WaitFor([&] { return Skipped(*c, def.table) >= bad.size(); }, seconds(30)))
      << Skipped(*c, def.table);
  ASSERT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(driver)), "");
  auto hits = QueryAll(reader, ByDriver(driver));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].row_key, good_row);
  for (size_t i = 0; i < bad_rows.size(); ++i)
    EXPECT_EQ(EntryCount(*c, def.table, version, bad_rows[i]), 0) << bad[i].first;
  EXPECT_EQ(Skipped(*c, def.table), bad.size());
  EXPECT_THAT(c->worker->metrics().Render(), HasSubstr("cellar_index_skipped_total"));

  // A good row whose new version is bad loses its entry (and is counted).
  body = TripBody(good);
  body.erase("trip_created_at");
  PutTrip(*c->store, good_row, 2, body);
  ASSERT_TRUE(
      WaitFor([&] { return EntryCount(*c, def.table, version, good_row) == 0; }, seconds(20)));
  EXPECT_EQ(Skipped(*c, def.table), bad.size() + 1);

  // SQL-looking and otherwise awkward strings are stored and matched as data.
  const std::vector<std::string> statuses = {
      "x'; DROP TABLE cells_trips; --",
      "Robert'); DROP TABLE idx_driver_partner_index_v1;--",
      "\" OR \"1\"=\"1",
      "a\\'b\\\\",
      "%",
      "_",
      "café ☕",
      "done",
      "done ",
      "DONE",
      "",
  };
  std::vector<Uuid> rows;
  for (const auto& s : statuses) {
    rows.push_back(Uuid::Random());
    Trip t = good;
    t.status = s;
    PutTrip(*c->store, rows.back(), 1, TripBody(t));
  }
  ASSERT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(driver)), "");
  for (size_t i = 0; i < statuses.size(); ++i) {
    IndexQuery q = ByDriver(driver);
    IndexFilter f;  // built directly: the value is exactly the string
    f.field = "status";
    f.values = {statuses[i]};
    q.filters = {f};
    auto got = QueryAll(reader, q);
    ASSERT_EQ(got.size(), 1u) << "status '" << statuses[i] << "': " << Describe(got);
    EXPECT_EQ(got[0].row_key, rows[i]);
    EXPECT_EQ(got[0].fields["status"], statuses[i]);
    if (statuses[i].find('\'') == std::string::npos && !statuses[i].empty() &&
        statuses[i].back() != ' ') {
      q.filters = {Filter(def, "status = '" + statuses[i] + "'")};
      EXPECT_EQ(QueryAll(reader, q).size(), 1u) << statuses[i];
    }
    q.filters = {Filter(def, "status = " + statuses[i])};
    if (!statuses[i].empty() && statuses[i].back() != ' ' && statuses[i].front() != '"') {
      EXPECT_EQ(QueryAll(reader, q).size(), 1u) << statuses[i];
    }
  }
  Model model(def, LatestCells(*c->store, "trips"));
  IndexQuery q = ByDriver(driver);
  q.filters = {Filter(def, "status in ('done', 'DONE', '%')")};
  EXPECT_EQ(QueryAll(reader, q).size(), 3u);
  EXPECT_EQ(Diff(model.Answer(q), QueryAll(reader, q)), "");
  q.filters = {Filter(def, "status >= done")};
  EXPECT_EQ(Diff(model.Answer(q), QueryAll(reader, q)), "");
  q.filters = {};
  q.order_by = "status";
  EXPECT_EQ(Diff(model.Answer(q), QueryAll(reader, q)), "");
  // The cells table is intact, and so is the index.
  EXPECT_TRUE(c->store->Latest("trips", rows[0], "BASE").ok());
  EXPECT_EQ(CheckProblems(*c->store, def), "");
}

// Query and maintenance errors are documented statuses, not crashes.
TEST(IndexesTest, QueryErrors) {
  auto c = MakeCluster("idx_errors");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  const IndexDefinition other = ParseDef(
      "table: never_applied\ndatastore: users\ncolumn_defs:\n  - column_key: PROFILE\n"
      "    fields: [ { field: email, type: string } ]\n",
      c->config);
  IndexReader reader(c->store.get(), {def, other});
  const Uuid driver = Uuid::Random();

  auto code = [&](const IndexQuery& q) {
    auto r = reader.Query(q);
    return r.ok() ? StatusCode::kOk : r.status().code();
  };
  IndexQuery q = ByDriver(driver);
  // Not applied yet.
  auto r = reader.Query(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("has not been applied"));
  {
    // Queries run no DDL (they did CREATE TABLE IF NOT EXISTS on every call):
    // this one left no registry table behind.
    auto lease = c->store->PoolForShard(0).Acquire();
    ASSERT_TRUE(lease.ok());
    auto tables = (*lease)->Query(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND "
        "TABLE_NAME = 'index_versions'",
        {c->config.DatabaseForShard(0)});
    ASSERT_TRUE(tables.ok()) << tables.status().ToString();
    EXPECT_EQ(0u, (*tables)[0].Uint(0));
  }
  EXPECT_EQ(BackfillIndex(c->store.get(), def, nullptr).code(), StatusCode::kNotFound);
  EXPECT_EQ(CheckIndex(c->store.get(), def, false).status().code(), StatusCode::kNotFound);
  ApplyIndex(*c->store, def);
  EXPECT_EQ(code(q), StatusCode::kOk);
  // The same definition again creates nothing new.
  IndexCatalog catalog(c->store.get());
  auto again = catalog.Apply(def);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->version.version, 1);

  IndexQuery bad = q;
  bad.index = "no_such_index";
  EXPECT_EQ(code(bad), StatusCode::kNotFound);
  for (int limit : {0, -1, 1001}) {
    bad = q;
    bad.limit = limit;
    EXPECT_EQ(code(bad), StatusCode::kInvalidArgument) << limit;
  }
  bad = q;
  bad.shard_value = "";
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  bad.shard_value = "x'; DROP TABLE cells_trips; --";
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  bad = q;
  bad.fields = {"nope"};
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  bad = q;
  bad.order_by = "fare";
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  bad = q;
  bad.order_by = "created_at; DROP TABLE cells_trips";
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  for (const std::string cursor : {"zz", "00", "7b7d", "not a cursor", "7b2276223a317d"}) {
    bad = q;
    bad.cursor = cursor;
    EXPECT_EQ(code(bad), StatusCode::kInvalidArgument) << cursor;
  }
  bad = q;
  IndexFilter empty;
  empty.field = "status";
  bad.filters = {empty};
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);
  empty.field = "status; DROP TABLE x";
  empty.values = {std::string("x")};
  bad.filters = {empty};
  EXPECT_EQ(code(bad), StatusCode::kInvalidArgument);

  IndexWorker none(c->store.get(), {});
  EXPECT_EQ(none.Start().code(), StatusCode::kInvalidArgument);
  // The cells and the index are untouched by all of this.
  EXPECT_EQ(CheckProblems(*c->store, def), "");
}

// 6. check reports missing, stale (old ref_key or wrong values) and extra
// entries; --repair fixes them; check is clean afterwards.
TEST(IndexesTest, CheckFindsAndRepairRestoresDamagedEntries) {
  auto c = MakeCluster("idx_repair");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  const int version = ApplyIndex(*c->store, def).version;
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});
  std::mt19937_64 rng(99);
  const auto drivers = RandomUuids(5);
  const auto cities = RandomUuids(3);
  std::vector<std::pair<Uuid, Trip>> trips;
  for (int i = 0; i < 150; ++i) {
    trips.push_back({Uuid::Random(), RandomTrip(rng, drivers, cities)});
    PutTrip(*c->store, trips.back().first, 1, TripBody(trips.back().second));
  }
  for (int i = 0; i < 30; ++i) PutTrip(*c->store, trips[i].first, 2, TripBody(trips[i].second));
  ASSERT_TRUE(WaitFor([&] { return c->RelayCaughtUp() && c->WorkerLag() == 0; }, seconds(30)));
  ASSERT_TRUE(WaitFor([&] { return CheckProblems(*c->store, def).empty(); }, seconds(20)))
      << CheckProblems(*c->store, def);

  // The entry table on the host of `driver`'s shard (other shards' entries share it).
  auto table = [&](const Uuid& driver) {
    return c->config.DatabaseForShard(ShardForRow(driver, kShards)) + "." +
           EntryTableName(def.table, version);
  };
  auto where = [&](int i) { return " WHERE row_key = UNHEX('" + RowHex(trips[i].first) + "')"; };
  // Missing: 4 deleted entries.
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(Db().Execute("DELETE FROM " + table(trips[i].second.driver) + where(i)));
  // Stale: an older ref_key (2), a newer ref_key (1), wrong values with the right ref_key (3).
  for (int i : {40, 41})
    ASSERT_TRUE(Db().Execute("UPDATE " + table(trips[i].second.driver) +
                             " SET ref_key = 0, f_status = 'forged'" + where(i)));
  ASSERT_TRUE(
      Db().Execute("UPDATE " + table(trips[42].second.driver) + " SET ref_key = 7" + where(42)));
  ASSERT_TRUE(Db().Execute("UPDATE " + table(trips[43].second.driver) +
                           " SET f_city_uuid = UNHEX('" + RowHex(Uuid::Random()) + "')" +
                           where(43)));
  ASSERT_TRUE(Db().Execute("UPDATE " + table(trips[44].second.driver) +
                           " SET f_fare__total = f_fare__total + 1" + where(44)));
  ASSERT_TRUE(Db().Execute("UPDATE " + table(trips[45].second.driver) +
                           " SET f_trip_created_at = 0" + where(45)));
  // Extra: a copy on a wrong shard, and an entry for a row that does not exist.
  const Uuid wrong_shard_driver = UuidOnOtherShard(trips[50].second.driver);
  const std::string kFields =
      " f_driver_partner_uuid, f_city_uuid, f_trip_created_at, f_fare__total, f_status";
  ASSERT_TRUE(Db().Execute("INSERT INTO " + table(wrong_shard_driver) + " SELECT " +
                           std::to_string(ShardForRow(wrong_shard_driver, kShards)) +
                           ", row_key, column_key, ref_key, added_id, source_shard, created_at," +
                           kFields + " FROM " + table(trips[50].second.driver) + where(50)));
  const Uuid ghost = Uuid::Random();
  ASSERT_TRUE(Db().Execute("INSERT INTO " + table(trips[51].second.driver) +
                           " SELECT shard, UNHEX('" + RowHex(ghost) +
                           "'), column_key, ref_key, added_id, source_shard, created_at," +
                           kFields + " FROM " + table(trips[51].second.driver) + where(51)));
  // A query reads only its own shard's entries, even where another shard's
  // rows share the table: the copy (driver 50's values, wrong shard) is not a hit.
  {
    auto r = reader.Query(ByDriver(trips[50].second.driver));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    int copies = 0;
    for (const auto& h : r->hits) copies += h.row_key == trips[50].first;
    EXPECT_EQ(copies, 1);
  }

  auto report = CheckIndex(c->store.get(), def, false);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->version, version);
  EXPECT_EQ(report->expected, 150u);
  EXPECT_EQ(report->missing, 4u);
  EXPECT_EQ(report->stale, 6u);
  EXPECT_EQ(report->extra, 2u);
  EXPECT_EQ(report->repaired, 0u);
  // A few examples ("missing trips/<row>/BASE"), each naming a damaged row.
  std::set<std::string> damaged = {ghost.ToString(), trips[50].first.ToString()};
  for (int i : {0, 1, 2, 3, 40, 41, 42, 43, 44, 45}) damaged.insert(trips[i].first.ToString());
  std::string examples;
  for (const auto& e : report->examples) {
    examples += e + "\n";
    const auto slash = e.find("trips/");
    ASSERT_NE(slash, std::string::npos) << e;
    EXPECT_TRUE(damaged.count(e.substr(slash + 6, 36))) << e;
    EXPECT_THAT(e, ::testing::EndsWith("/BASE"));
  }
  EXPECT_EQ(report->examples.size(), 10u);  // capped
  EXPECT_THAT(examples, HasSubstr("missing trips/"));
  EXPECT_THAT(examples, HasSubstr("stale trips/"));
  EXPECT_THAT(examples, HasSubstr("extra trips/"));
  // Check changed nothing.
  EXPECT_EQ(CheckIndex(c->store.get(), def, false)->missing, 4u);

  auto repaired = CheckIndex(c->store.get(), def, true);
  ASSERT_TRUE(repaired.ok()) << repaired.status().ToString();
  EXPECT_EQ(repaired->repaired, 12u);
  EXPECT_EQ(CheckProblems(*c->store, def), "");
  for (const Uuid& d : drivers) EXPECT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(d)), "");
  // The repaired rows keep following new versions.
  for (int i : {0, 40, 42, 43}) {
    trips[i].second.status = "after-repair";
    PutTrip(*c->store, trips[i].first, 5, TripBody(trips[i].second));
  }
  for (const Uuid& d : drivers) EXPECT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(d)), "");
  EXPECT_TRUE(WaitFor([&] { return CheckProblems(*c->store, def).empty(); }, seconds(10)))
      << CheckProblems(*c->store, def);
}

// Repair beside live writes (#51): a row rewritten and a row written while the
// check runs (between reading a page and comparing it) are neither undone nor
// deleted. Before, repair worked from a snapshot of every row's latest cell:
// it re-applied the snapshot's older version over the newer one and deleted
// the new row's entry as extra.
TEST(IndexesTest, RepairUnderLiveWritesNeitherUndoesNorDeletesNewerEntries) {
  auto c = MakeCluster("idx_repair_live");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  const int version = ApplyIndex(*c->store, def).version;
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});
  std::mt19937_64 rng(51);
  const auto drivers = RandomUuids(4);
  const auto cities = RandomUuids(2);
  std::vector<std::pair<Uuid, Trip>> trips;
  for (int i = 0; i < 20; ++i) {
    trips.push_back({Uuid::Random(), RandomTrip(rng, drivers, cities)});
    PutTrip(*c->store, trips.back().first, 1, TripBody(trips.back().second));
  }
  ASSERT_TRUE(WaitFor([&] { return c->RelayCaughtUp() && c->WorkerLag() == 0; }, seconds(30)));
  ASSERT_TRUE(WaitFor([&] { return CheckProblems(*c->store, def).empty(); }, seconds(20)))
      << CheckProblems(*c->store, def);
  // Damage that gives the repair work on trip 0's row: its entry is gone.
  const Uuid row = trips[0].first;
  ASSERT_TRUE(Db().Execute(
      "DELETE FROM " + c->config.DatabaseForShard(ShardForRow(trips[0].second.driver, kShards)) +
      "." + EntryTableName(def.table, version) + " WHERE row_key = UNHEX('" + RowHex(row) + "')"));
  // While the check runs, trip 0 moves to another driver (version 2) and a new
  // trip is written; the live worker applies both.
  Trip moved = trips[0].second;
  moved.driver = moved.driver == drivers[0] ? drivers[1] : drivers[0];
  const Uuid fresh = Uuid::Random();
  const Trip fresh_trip = RandomTrip(rng, drivers, cities);
  bool raced = false;
  IndexCheckOptions options;
  options.repair = true;
  options.page = 7;
  options.after_page_read = [&] {
    if (raced) return;
    raced = true;
    PutTrip(*c->store, row, 2, TripBody(moved));
    PutTrip(*c->store, fresh, 1, TripBody(fresh_trip));
    EXPECT_TRUE(WaitFor([&] { return c->RelayCaughtUp() && c->WorkerLag() == 0; }, seconds(30)));
  };
  auto report = CheckIndex(c->store.get(), def, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(raced);
  auto hits_of = [&](const Uuid& driver) {
    std::map<Uuid, int64_t> out;  // row -> ref_key
    auto r = reader.Query(ByDriver(driver));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok())
      for (const auto& h : r->hits) out[h.row_key] = h.ref_key;
    return out;
  };
  EXPECT_EQ(hits_of(moved.driver).count(row) ? hits_of(moved.driver)[row] : -1, 2)
      << "trip 0's version 2 (written during the check) is not under its new driver";
  EXPECT_EQ(hits_of(trips[0].second.driver).count(row), 0u)
      << "the check's older version 1 was applied again under the old driver";
  EXPECT_EQ(hits_of(fresh_trip.driver).count(fresh), 1u)
      << "the trip written during the check lost its entry";
  EXPECT_EQ(CheckProblems(*c->store, def), "");
}

// An index applied while the worker already runs (over an empty datastore, so
// it is ready at once) indexes the cells written right after the apply.
TEST(IndexesTest, IndexAppliedWhileTheWorkerRunsMissesNothing) {
  auto c = MakeCluster("idx_live_apply");
  ASSERT_TRUE(c);
  const IndexDefinition trips_def = DriverPartnerDef(c->config);
  const IndexDefinition users_def = ParseDef(
      "table: users_by_email\ndatastore: users\ncolumn_defs:\n"
      "  - column_key: PROFILE\n    fields: [ { field: email, type: string },"
      " { field: age, type: int } ]\n",
      c->config);
  ApplyIndex(*c->store, trips_def);
  c->StartRelay();
  c->StartWorker({trips_def, users_def});
  IndexReader reader(c->store.get(), {trips_def, users_def});
  const Uuid driver = Uuid::Random();
  std::mt19937_64 rng(5);
  for (int round = 0; round < 3; ++round) {
    PutTrip(*c->store, Uuid::Random(), 1, TripBody(RandomTrip(rng, {driver}, {driver})));
    ASSERT_EQ(WaitForConverge(*c->store, reader, trips_def, ByDriver(driver)), "");
  }
  const IndexVersion v = ApplyIndex(*c->store, users_def);
  EXPECT_EQ(v.state, IndexState::kReady);
  CellWrite w;
  w.row_key = Uuid::Random();
  w.column = "PROFILE";
  w.ref_key = 1;
  w.body = {{"email", "ann@example.com"}, {"age", 33}};
  ASSERT_TRUE(c->store->Put("users", w).ok());
  IndexQuery q;
  q.index = "users_by_email";
  q.shard_value = "ann@example.com";
  EXPECT_EQ(WaitForConverge(*c->store, reader, users_def, q, seconds(15)), "");
  EXPECT_EQ(CheckProblems(*c->store, users_def), "");
}

}  // namespace
}  // namespace idxtest
}  // namespace cellar
