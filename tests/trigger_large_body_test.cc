// Bodies too large for the change log (kafka.max_event_body_bytes): the relay
// publishes them as "body_omitted" and the trigger must read them from the
// store before its handler runs. An oversized body reaches the handler whole
// (and the filter is applied to it), and a re-read that fails because the
// store is down makes the event wait instead of handing the handler a null
// body. Part of the trigger_test binary.
#include <atomic>
#include <string>

#include "changelog/relay.h"
#include "gtest/gtest.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;

// A trip body of about `bytes` bytes of JSON.
nlohmann::json BigBody(const std::string& state, double fare, size_t bytes) {
  return {{"state", state},
          {"fare", {{"total", fare}, {"currency", "EUR"}}},
          {"route", std::string(bytes, 'r')}};
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

bool RelayCaughtUp(CellStore& store) {
  for (const auto& s : ReadRelayStatus(store))
    if (!s.error.empty() || s.lag != 0) return false;
  return true;
}

// Nothing of trigger `name` is left uncommitted on the trips change log.
bool TriggerCaughtUp(const ClusterConfig& config, const std::string& name) {
  auto lag = ReadTriggerLag(config, "trips", name);
  return lag.ok() && lag->total_lag == 0 && !lag->partitions.empty();
}

// Re-reads of omitted bodies that failed and will be tried again.
double RereadRetries(TriggerWorker& w) {
  return MetricValue(w.metrics().Render(), "cellar_consumer_body_rereads_total",
                     {{"outcome", "retry"}});
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

TEST(TriggerLargeBodyTest, OversizedBodyReachesTheHandlerWholeAndFilteredOnItsContent) {
  auto c = MakeCluster("tg_big", Broker());
  ASSERT_TRUE(c);
  const size_t big = static_cast<size_t>(c->config.kafka.max_event_body_bytes) + 4096;
  const nlohmann::json completed = BigBody("completed", 41.5, big);
  const nlohmann::json requested = BigBody("requested", 12, big);
  ASSERT_TRUE(OmittedFromTheLog(c->config, completed));

  HandledLog log;
  std::atomic<int> null_bodies{0};
  TriggerOptions opts;
  opts.filter = {FieldCondition{"state", FieldCondition::Op::kEq, "completed"}};
  TriggerWorker w(c->config, Opts("big"));
  ASSERT_EQ("OK", w.on(
                       "trips", "BASE", "big",
                       [&](const CellEvent& e, TriggerContext&) {
                         if (e.cell.body.is_null()) ++null_bodies;
                         log.Add(e);
                         return Status::Ok();
                       },
                       opts)
                      .ToString());
  ASSERT_TRUE(w.Start().ok());
  auto relay = StartRelay(c->store.get(), "big-relay");
  ASSERT_TRUE(relay);

  const Uuid a = Uuid::Random(), b = Uuid::Random();
  ASSERT_TRUE(PutCell(*c->store, a, "BASE", 1, completed));
  ASSERT_TRUE(PutCell(*c->store, b, "BASE", 1, requested));  // filtered out by its body
  ASSERT_TRUE(PutCell(*c->store, b, "BASE", 2, {{"state", "completed"}}));  // small: in the log
  const CellAddr big_a{a.ToString(), "BASE", 1}, small_b{b.ToString(), "BASE", 2};
  ASSERT_TRUE(WaitFor([&] { return log.Has(big_a) && log.Has(small_b); }, 30s))
      << "handled: " << log.total();
  ASSERT_TRUE(WaitFor([&] { return TriggerCaughtUp(c->config, "big"); }, 30s));

  EXPECT_EQ(null_bodies.load(), 0);
  EXPECT_EQ(log.Count(big_a), 1u);
  EXPECT_EQ(log.Count({b.ToString(), "BASE", 1}), 0u) << "the filter let a non-matching body by";
  EXPECT_EQ(log.total(), 2u);
  for (const Cell& e : log.Events()) {
    if (AddrOf(e) == big_a) {
      EXPECT_TRUE(e.body == completed)
          << "the handler's body differs (" << e.body.dump().size() << " bytes of JSON)";
    }
  }
}

// Issue #15: the trigger called its handler with a null body when the
// omitted body's re-read failed with Unavailable. The store is down while the
// trigger reads the event: the event must wait (its re-read retried) and run
// once, with its body, when the store is back.
TEST(TriggerLargeBodyTest, RereadFailingWhileTheStoreIsDownWaitsInsteadOfANullBody) {
  RestartDbOnExit restart_db;
  auto c = MakeCluster("tg_big_down", Broker());
  ASSERT_TRUE(c);
  const nlohmann::json body =
      BigBody("completed", 23, static_cast<size_t>(c->config.kafka.max_event_body_bytes) + 1);
  ASSERT_TRUE(OmittedFromTheLog(c->config, body));
  const Uuid big = Uuid::Random(), small = Uuid::Random();
  const CellAddr big_addr{big.ToString(), "BASE", 1}, small_addr{small.ToString(), "BASE", 1};
  {
    auto relay = StartRelay(c->store.get(), "big-down-relay");
    ASSERT_TRUE(relay);
    ASSERT_TRUE(PutCell(*c->store, big, "BASE", 1, body));
    ASSERT_TRUE(PutCell(*c->store, small, "BASE", 1, {{"state", "requested"}}));
    ASSERT_TRUE(WaitFor([&] { return RelayCaughtUp(*c->store); }, 30s));
    relay->Stop();
  }
  // Both events are in Kafka; the store goes away before the trigger reads them.
  Db().Kill();

  HandledLog log;
  std::atomic<int> null_bodies{0};
  TriggerWorker w(c->config, Opts("big_down"));
  ASSERT_EQ("OK", w.on("trips", "BASE", "big_down", [&](const CellEvent& e, TriggerContext&) {
                     if (e.cell.body.is_null()) ++null_bodies;
                     log.Add(e);
                     return Status::Ok();
                   }).ToString());
  ASSERT_TRUE(w.Start().ok());

  // The trigger consumes while the store is down (the small event needs no store)...
  EXPECT_TRUE(WaitFor([&] { return log.Has(small_addr); }, 30s)) << "nothing consumed";
  // ...and the large one waits on its re-read rather than reaching the handler.
  EXPECT_TRUE(WaitFor([&] { return RereadRetries(w) > 0 || log.Has(big_addr); }, 30s))
      << "the omitted body's re-read was never retried";
  EXPECT_FALSE(log.Has(big_addr)) << "the handler ran while its body could not be read";
  EXPECT_EQ(null_bodies.load(), 0) << "the handler got a null body";

  Db().Restart();
  ASSERT_TRUE(WaitFor([&] { return log.Has(big_addr); }, 30s)) << "not handled after the restart";
  ASSERT_TRUE(WaitFor([&] { return TriggerCaughtUp(c->config, "big_down"); }, 30s));
  EXPECT_EQ(log.Count(big_addr), 1u);
  EXPECT_EQ(null_bodies.load(), 0);
  for (const Cell& e : log.Events()) {
    if (AddrOf(e) == big_addr) {
      EXPECT_TRUE(e.body == body) << "the handler's body differs (" << e.body.dump().size()
                                  << " bytes of JSON)";
    }
  }
  w.Stop();
}

// A cell whose omitted body is no longer stored when the trigger reads it
// (EPHEMERAL has a 2 s TTL): nothing to handle, the event is passed by (not
// retried forever, not handed over without its body).
TEST(TriggerLargeBodyTest, OmittedBodyOfAnExpiredCellIsPassedBy) {
  auto c = MakeCluster("tg_big_gone", Broker());
  ASSERT_TRUE(c);
  const nlohmann::json body =
      BigBody("completed", 5, static_cast<size_t>(c->config.kafka.max_event_body_bytes) + 1);
  const Uuid row = Uuid::Random();
  {
    auto relay = StartRelay(c->store.get(), "big-gone-relay");
    ASSERT_TRUE(relay);
    ASSERT_TRUE(PutCell(*c->store, row, "EPHEMERAL", 1, body));
    ASSERT_TRUE(WaitFor([&] { return RelayCaughtUp(*c->store); }, 30s));
    relay->Stop();
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        return c->store->Get("trips", row, "EPHEMERAL", 1).status().code() == StatusCode::kNotFound;
      },
      30s, 100ms))
      << "the cell never expired";

  std::atomic<int> calls{0};
  TriggerWorker w(c->config, Opts("big_gone"));
  ASSERT_EQ("OK", w.on("trips", "EPHEMERAL", "big_gone", [&](const CellEvent&, TriggerContext&) {
                     ++calls;
                     return Status::Ok();
                   }).ToString());
  ASSERT_TRUE(w.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return TriggerCaughtUp(c->config, "big_gone"); }, 30s));
  EXPECT_GE(MetricValue(w.metrics().Render(), "cellar_consumer_body_rereads_total",
                        {{"outcome", "not_found"}}),
            1);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(Totals(w, "big_gone").set_aside, 0u);
}

}  // namespace
}  // namespace cellar::trigtest
