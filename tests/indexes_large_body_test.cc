// Bodies too large for the change log (kafka.max_event_body_bytes): the relay
// publishes them as "body_omitted" and the index worker must read them from
// the store before it applies them. An oversized body is indexed like any
// other, and a re-read that fails because the store is down makes the event
// wait instead of being applied as if it had no body. Part of the
// indexes_test binary.
#include <set>
#include <string>

#include "changelog/cell_event.h"
#include "changelog/consumer_groups.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

using std::chrono::seconds;

// The trip's body with `bytes` of padding in a field no index reads.
nlohmann::json BigTripBody(const Trip& t, size_t bytes) {
  nlohmann::json body = TripBody(t);
  body["notes"] = std::string(bytes, 'n');
  return body;
}

// The relay would leave this body out of its event (the test's precondition).
bool OmittedFromTheLog(const ClusterConfig& config, const nlohmann::json& body) {
  Cell cell;
  cell.row_key = Uuid::Random();
  cell.column = "BASE";
  cell.body = body;
  return EncodeCellEvent("trips", cell, config.kafka.max_event_body_bytes)
             .find("\"body_omitted\":true") != std::string::npos;
}

// (row, ref_key) of every hit of `driver`.
std::set<std::pair<Uuid, int64_t>> HitsOf(IndexReader& reader, const Uuid& driver) {
  std::set<std::pair<Uuid, int64_t>> out;
  for (const auto& h : QueryAll(reader, ByDriver(driver))) out.insert({h.row_key, h.ref_key});
  return out;
}

// Re-reads of omitted bodies that failed and will be tried again.
uint64_t RereadRetries(Cluster& c) {
  return c.worker->metrics()
      .GetCounter("cellar_consumer_body_rereads_total", "",
                  {{"group", IndexerGroup(c.config.kafka)}, {"outcome", "retry"}})
      .value();
}

// Restarts the binary's MariaDB if a test leaves it killed, so later tests
// of the binary still have it.
struct RestartDbOnExit {
  ~RestartDbOnExit() {
    if (Db().running()) return;
    try {
      Db().Restart();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "MariaDB restart failed: " << e.what();
    }
  }
};

TEST(IndexesLargeBodyTest, OversizedBodiesAreIndexedLikeAnyOther) {
  auto c = MakeCluster("idx_big");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});
  const size_t big = static_cast<size_t>(c->config.kafka.max_event_body_bytes) + 4096;

  const Uuid driver_a = Uuid::Random(), driver_b = UuidOnOtherShard(driver_a);
  const Uuid row = Uuid::Random();
  Trip t{driver_a, Uuid::Random(), *ParseRfc3339("2026-03-01T10:00:00Z"),
         31.5,     "open",         Uuid::Random()};
  ASSERT_TRUE(OmittedFromTheLog(c->config, BigTripBody(t, big)));
  PutTrip(*c->store, row, 1, BigTripBody(t, big));
  ASSERT_TRUE(WaitFor([&] { return HitsOf(reader, driver_a).count({row, 1}) == 1; }, seconds(30)));
  // A second oversized version moves the entry to another driver's shard.
  t.driver = driver_b;
  t.status = "completed";
  PutTrip(*c->store, row, 2, BigTripBody(t, big));
  ASSERT_TRUE(WaitFor([&] { return HitsOf(reader, driver_b).count({row, 2}) == 1; }, seconds(30)));
  EXPECT_TRUE(HitsOf(reader, driver_a).empty());
  for (const Uuid& d : {driver_a, driver_b})
    EXPECT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(d)), "");
  EXPECT_EQ(CheckProblems(*c->store, def), "");
}

// Issue #15: the index worker applied an event whose omitted body could not
// be re-read (Unavailable) as if the cell had no body, which left the row's
// entry wrong until a repair. The store is down while a new worker reads such
// an event: the event must wait (its re-read retried), and once the store is
// back the entry must be the new version's.
TEST(IndexesLargeBodyTest, RereadFailingWhileTheStoreIsDownWaitsAndTheEntryEndsRight) {
  RestartDbOnExit restart_db;
  auto c = MakeCluster("idx_big_down");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();
  c->StartWorker({def});
  IndexReader reader(c->store.get(), {def});

  // Version 1 (small) is indexed under driver A.
  const Uuid driver_a = Uuid::Random(), driver_b = UuidOnOtherShard(driver_a);
  const Uuid row = Uuid::Random();
  Trip t{driver_a, Uuid::Random(), *ParseRfc3339("2026-03-02T10:00:00Z"),
         18,       "open",         Uuid::Random()};
  PutTrip(*c->store, row, 1, TripBody(t));
  ASSERT_TRUE(WaitFor([&] { return HitsOf(reader, driver_a).count({row, 1}) == 1; }, seconds(30)));

  // Version 2 (oversized, driver B) reaches Kafka while no worker runs.
  c->StopWorker();
  t.driver = driver_b;
  t.status = "completed";
  const nlohmann::json v2 =
      BigTripBody(t, static_cast<size_t>(c->config.kafka.max_event_body_bytes) + 1);
  ASSERT_TRUE(OmittedFromTheLog(c->config, v2));
  PutTrip(*c->store, row, 2, v2);
  ASSERT_TRUE(WaitFor([&] { return c->RelayCaughtUp(); }, seconds(30)));
  c->relay->Stop();
  c->relay.reset();

  // The store goes away; a new worker reads the event and cannot re-read its body.
  Db().Kill();
  c->StartWorker({def});
  EXPECT_TRUE(WaitFor([&] { return RereadRetries(*c) > 0; }, seconds(20)))
      << "the omitted body's re-read was never retried";

  Db().Restart();
  Db().Execute("SET GLOBAL innodb_flush_log_at_trx_commit = 2");  // as the environment set it
  EXPECT_TRUE(WaitFor(
      [&] {
        return HitsOf(reader, driver_b).count({row, 2}) == 1;
      },
      seconds(30)))
      << "no entry of version 2 under driver B";
  EXPECT_TRUE(HitsOf(reader, driver_a).empty()) << "version 1's entry is still there";
  EXPECT_EQ(WaitForConverge(*c->store, reader, def, ByDriver(driver_b)), "");
  EXPECT_EQ(CheckProblems(*c->store, def), "");
  EXPECT_TRUE(WaitFor([&] { return c->WorkerLag() == 0; }, seconds(30)));
}

// A version of a TTL column whose omitted body is no longer stored when the
// worker reads it (EPHEMERAL has a 2 s TTL) has no entry whatever its body:
// the worker applies it as expired instead of waiting for a body that will
// never come back.
TEST(IndexesLargeBodyTest, OmittedBodyOfAnExpiredVersionIsAppliedAsExpired) {
  auto c = MakeCluster("idx_big_gone");
  ASSERT_TRUE(c);
  const IndexDefinition def = ParseDef(
      "table: ephemeral_by_driver\ndatastore: trips\ncolumn_defs:\n"
      "  - column_key: EPHEMERAL\n    fields:\n"
      "      - { field: driver_partner_uuid, type: UUID }\n",
      c->config);
  ApplyIndex(*c->store, def);
  const Uuid row = Uuid::Random();
  Trip t{Uuid::Random(), Uuid::Random(), *ParseRfc3339("2026-03-03T10:00:00Z"), 9,
         "open",         Uuid::Random()};
  c->StartRelay();
  auto put = c->store->Put(
      "trips", {row, "EPHEMERAL", 1,
                BigTripBody(t, static_cast<size_t>(c->config.kafka.max_event_body_bytes) + 1)});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return c->RelayCaughtUp(); }, seconds(30)));
  ASSERT_TRUE(WaitFor(
      [&] {
        return c->store->Get("trips", row, "EPHEMERAL", 1).status().code() == StatusCode::kNotFound;
      },
      seconds(30), std::chrono::milliseconds(100)))
      << "the cell never expired";

  c->StartWorker({def});
  auto removed = [&] {
    return c->worker->metrics()
        .GetCounter("cellar_index_applied_total", "",
                    {{"index", def.table}, {"outcome", "removed"}})
        .value();
  };
  EXPECT_TRUE(WaitFor([&] { return removed() == 1; }, seconds(30)))
      << "the expired version was not applied";
  EXPECT_TRUE(WaitFor([&] { return c->WorkerLag() == 0; }, seconds(30)));
  EXPECT_EQ(EntryCount(*c, def.table, 1, row), 0);
}

}  // namespace
}  // namespace cellar::idxtest
