// The relay's metrics (changelog/relay_probe.h), read through the registry's
// Prometheus text as a scrape would see them, and scraped from a cellar-relay
// process's --metrics-address, against a private MariaDB and the local broker
// (relay_test_util.h).
#include <httplib.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "base/metrics.h"
#include "changelog/relay.h"
#include "changelog/relay_probe.h"
#include "gtest/gtest.h"
#include "testing/metric_value.h"
#include "testing/test_cluster.h"
#include "tests/relay_test_util.h"

namespace cellar::relaytest {
namespace {

using namespace std::chrono_literals;
using ::cellar::testing::MetricValue;

double Published(const MetricsRegistry& m, const std::string& datastore) {
  return MetricValue(m.Render(), "cellar_relay_events_published_total", {{"datastore", datastore}});
}

double StreamLag(const MetricsRegistry& m, const std::string& host, const std::string& datastore) {
  return MetricValue(m.Render(), "cellar_relay_lag_cells",
                     {{"host", host}, {"datastore", datastore}});
}

// Waits until the relay of `m` owns every stream of `config` (kHosts hosts).
bool OwnsEveryStream(const MetricsRegistry& m, const ClusterConfig& config) {
  return WaitFor(
      [&] {
        return MetricValue(m.Render(), "cellar_relay_owned_streams") ==
               static_cast<double>(kHosts * config.datastores.size());
      },
      30s);
}

// Both delivery modes: exactly-once counts a batch's events when it commits,
// at-least-once each event when Kafka acknowledges it.
class RelayMetricsModeTest : public ::testing::TestWithParam<bool> {};

TEST_P(RelayMetricsModeTest, PublishedCountsEveryCellAndStreamLagFallsToZero) {
  const bool exactly_once = GetParam();
  auto c = MakeCluster(exactly_once ? "rt_metrics_eo" : "rt_metrics_alo", Broker());
  ASSERT_TRUE(c);
  ClusterConfig config = c->config;
  config.relay.exactly_once = exactly_once;
  std::unique_ptr<CellStore> store_of_mode = CellStore::Open(config);
  CellStore& store = *store_of_mode;
  MetricsRegistry metrics;
  Relay relay(&store, "metrics", &metrics);
  // Every series exists, at 0, before anything happened.
  EXPECT_EQ(Published(metrics, kDatastore), 0);
  for (const auto& host : c->config.mysql.hosts)
    for (const auto& ds : c->config.datastores) {
      EXPECT_EQ(StreamLag(metrics, host.name, ds.name), 0) << host.name << "/" << ds.name;
      EXPECT_EQ(MetricValue(metrics.Render(), "cellar_relay_checkpoint_age_seconds",
                            {{"host", host.name}, {"datastore", ds.name}}),
                0);
    }
  ASSERT_TRUE(relay.Start().ok());

  // A writer held open on kShard's host holds that stream back: the cells
  // committed after it are lag until it commits.
  constexpr uint32_t kShard = 1;
  const std::string held_host = c->config.mysql.hosts[c->config.HostIndexForShard(kShard)].name;
  FencedWriter held(c->config, kShard);
  ASSERT_GT(held.BeginAndInsert(MakeCell(RowOnShard(kShard), 0, "held")), 0u);
  size_t written = 1;
  for (int i = 0; i < 3; ++i) {
    auto r = store.Put(kDatastore, MakeCell(RowOnShard(kShard), 0, "behind"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ++written;
  }
  EXPECT_TRUE(WaitFor([&] { return StreamLag(metrics, held_host, kDatastore) >= 3; }, 10s))
      << "lag of the held stream: " << StreamLag(metrics, held_host, kDatastore);

  // Cells on every shard, so on both hosts' streams.
  for (uint32_t shard = 0; shard < kShards; ++shard)
    for (int i = 0; i < 5; ++i) {
      auto r = store.Put(kDatastore, MakeCell(RowOnShard(shard), 0, "all"));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ++written;
    }
  ASSERT_TRUE(held.Commit().ok());

  const double want = static_cast<double>(written);
  EXPECT_TRUE(WaitFor([&] { return Published(metrics, kDatastore) >= want; }, 30s))
      << "published " << Published(metrics, kDatastore) << " of " << want;
  EXPECT_EQ(Published(metrics, kDatastore), want) << "a cell counted twice";
  EXPECT_EQ(Published(metrics, "users"), 0);
  auto all_caught_up = [&] {
    for (const auto& host : c->config.mysql.hosts)
      for (const auto& ds : c->config.datastores)
        if (StreamLag(metrics, host.name, ds.name) != 0) return false;
    return true;
  };
  EXPECT_TRUE(WaitFor(all_caught_up, 30s)) << metrics.Render();
  const std::string text = metrics.Render();
  EXPECT_EQ(MetricValue(text, "cellar_relay_owned_streams"),
            static_cast<double>(kHosts * c->config.datastores.size()))
      << text;
  for (const auto& host : c->config.mysql.hosts)
    EXPECT_GE(MetricValue(text, "cellar_relay_checkpoint_age_seconds",
                          {{"host", host.name}, {"datastore", kDatastore}}),
              0)
        << text;
  EXPECT_EQ(MetricValue(text, "cellar_relay_rewinds_total"), 0) << text;
  EXPECT_EQ(MetricValue(text, "cellar_relay_fenced_batches_rolled_back_total"), 0) << text;
  // Transactions: every host's trips stream had cells (exactly-once: at
  // least one transaction each, never more than its cells); the idle users
  // streams none; the series add up to the relay's own count.
  double transactions = 0;
  for (const auto& host : c->config.mysql.hosts) {
    const double busy = MetricValue(text, "cellar_relay_transactions_total",
                                    {{"host", host.name}, {"datastore", kDatastore}});
    if (exactly_once) {
      EXPECT_GE(busy, 1) << host.name << "\n" << text;
      EXPECT_LE(busy, want) << host.name << "\n" << text;
    } else {
      EXPECT_EQ(busy, 0) << "at least once has no transactions\n" << text;
    }
    EXPECT_EQ(MetricValue(text, "cellar_relay_transactions_total",
                          {{"host", host.name}, {"datastore", "users"}}),
              0)
        << text;
    transactions += busy;
  }
  EXPECT_EQ(transactions, static_cast<double>(relay.stats().transactions)) << text;
  relay.Stop();
  store.Close();
}

INSTANTIATE_TEST_SUITE_P(DeliveryModes, RelayMetricsModeTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("ExactlyOnce")
                                             : std::string("AtLeastOnce");
                         });

// cellar_relay_lag_cells and cellar_relay_oldest_unpublished_age_seconds of
// one stream: with no relay running, cells written to it are its lag and the
// age of the first of them grows with the clock (the library figures,
// ReadRelayStatus, and the probe's gauges agree); a relay started then
// brings both back to 0.
TEST(RelayMetricsTest, LagAndOldestUnpublishedAgeOfAStoppedStreamThenCaughtUp) {
  auto c = MakeCluster("rt_metrics_age", Broker());
  ASSERT_TRUE(c);
  constexpr uint32_t kShard = 2;
  const std::string host = c->config.mysql.hosts[c->config.HostIndexForShard(kShard)].name;
  constexpr int kCells = 7;
  MicrosSinceEpoch first_written = 0;  // after the first put returned: its created_at <= this
  for (int i = 0; i < kCells; ++i) {
    auto r = c->store->Put(kDatastore, MakeCell(RowOnShard(kShard), 0, "unpublished"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (i == 0) first_written = NowMicros();
  }
  auto stream = [&]() -> RelayStreamStatus {
    for (const RelayStreamStatus& st : ReadRelayStatus(*c->store))
      if (st.host == host && st.datastore == kDatastore) return st;
    ADD_FAILURE() << "no stream " << host << "/" << kDatastore;
    return {};
  };
  MetricsRegistry metrics;
  RelayProbe probe(&metrics, c->config);
  const std::map<std::string, std::string> labels{{"host", host}, {"datastore", kDatastore}};
  auto lag = [&] { return MetricValue(metrics.Render(), "cellar_relay_lag_cells", labels); };
  auto age = [&] {
    return MetricValue(metrics.Render(), "cellar_relay_oldest_unpublished_age_seconds", labels);
  };
  double last_age = 0;
  for (int round = 0; round < 2; ++round) {
    const RelayStreamStatus st = stream();
    ASSERT_EQ(st.error, "");
    const MicrosSinceEpoch now = NowMicros();
    probe.UpdateStreams({st}, now);
    EXPECT_EQ(st.lag, static_cast<uint64_t>(kCells));
    EXPECT_EQ(lag(), kCells) << metrics.Render();
    EXPECT_GT(st.oldest_unpublished_created_at, 0);
    EXPECT_LE(st.oldest_unpublished_created_at, first_written);
    EXPECT_EQ(age(), OldestUnpublishedAgeSeconds(st, now));
    EXPECT_GE(age(), static_cast<double>(now - first_written) / 1e6) << metrics.Render();
    EXPECT_GT(age(), last_age) << "the age did not grow";
    last_age = age();
    // The age grows with the clock while nothing is published.
    if (round == 0) {
      ASSERT_TRUE(WaitFor([&] { return NowMicros() - first_written > 300000; }, 5s));
    }
  }

  // A relay publishes the stream: its own gauges (kRelayMetricsIntervalMs)
  // and the library's figures return to 0.
  MetricsRegistry relay_metrics;
  Relay relay(c->store.get(), "age", &relay_metrics);
  ASSERT_TRUE(relay.Start().ok());
  auto relay_gauges_zero = [&] {
    const std::string text = relay_metrics.Render();
    return MetricValue(text, "cellar_relay_events_published_total", {{"datastore", kDatastore}}) ==
               kCells &&
           MetricValue(text, "cellar_relay_lag_cells", labels) == 0 &&
           MetricValue(text, "cellar_relay_oldest_unpublished_age_seconds", labels) == 0;
  };
  EXPECT_TRUE(WaitFor(relay_gauges_zero, 30s)) << relay_metrics.Render();
  const RelayStreamStatus after = stream();
  EXPECT_EQ(after.lag, 0u);
  EXPECT_EQ(after.oldest_unpublished_created_at, 0);
  EXPECT_EQ(OldestUnpublishedAgeSeconds(after, NowMicros()), 0);
  relay.Stop();
}

// The port a cellar-relay started with --metrics-address host:0 logged
// ("serving /metrics" address=host:PORT); 0 while not logged yet.
int LoggedMetricsPort(const std::string& log) {
  const std::string msg = "msg=\"serving /metrics\" address=";
  const size_t at = log.find(msg);
  if (at == std::string::npos) return 0;
  const size_t colon = log.find(':', at + msg.size());
  return colon == std::string::npos ? 0 : std::atoi(log.c_str() + colon + 1);
}

// The relay process's /metrics; "" when it does not answer 200.
std::string Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

TEST(RelayMetricsTest, RelayProcessServesItsMetricsOnMetricsAddress) {
  auto c = MakeCluster("rt_metrics_proc", Broker());
  ASSERT_TRUE(c);
  testing::TempDir logs("relay-metrics");
  RelayProcess relay(c->config_path, "metrics-proc", logs.File("relay.log"),
                     {"--metrics-address", "127.0.0.1:0"});
  int port = 0;
  ASSERT_TRUE(WaitFor([&] { return (port = LoggedMetricsPort(relay.Log())) > 0; }, 20s))
      << relay.Log();

  constexpr int kCells = 20;
  for (int i = 0; i < kCells; ++i) {
    auto r = c->store->Put(kDatastore, MakeCell(RowOnShard(i % kShards), 0, "proc"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::string text;
  EXPECT_TRUE(WaitFor(
      [&] {
        text = Scrape(port);
        return MetricValue(text, "cellar_relay_events_published_total",
                           {{"datastore", kDatastore}}) == kCells;
      },
      30s))
      << "scraped:\n"
      << text << "\nlog:\n"
      << relay.Log();
  EXPECT_GE(MetricValue(text, "cellar_relay_lag_cells"), 0) << text;
  EXPECT_EQ(relay.Terminate(10s), 0) << relay.Log();
}

// Each stream backs off on its own (cellar_relay_log_reads_total): while one
// host's trips stream gets cells all the time, the idle users stream of the
// same host is read far less often. (Before, a host's loop read every stream
// at the pace of its busiest one.) At least once: the read schedule is the
// same in both modes, and an exactly-once batch's Kafka transaction (tens of
// milliseconds on the real broker) would cap how often the busy stream can
// be read at all.
TEST(RelayMetricsTest, AnIdleStreamIsReadLessOftenThanABusyOneOfTheSameHost) {
  auto c = MakeCluster("rt_idle_reads", Broker());
  ASSERT_TRUE(c);
  ClusterConfig at_least_once = c->config;
  at_least_once.relay.exactly_once = false;
  // A busy stream is read every poll_min_ms, an idle one backs off to
  // poll_max_ms: set both, so the ratio does not depend on the defaults.
  at_least_once.relay.poll_min_ms = 1;
  at_least_once.relay.poll_max_ms = 50;
  at_least_once.relay.target_batch_cells = 0;  // busy: read every poll_min_ms
  auto relay_store = CellStore::Open(at_least_once);
  constexpr uint32_t kShard = 0;
  const std::string host = c->config.mysql.hosts[c->config.HostIndexForShard(kShard)].name;
  MetricsRegistry metrics;
  Relay relay(relay_store.get(), "idle-reads", &metrics);
  auto reads = [&](const std::string& datastore) {
    return MetricValue(metrics.Render(), "cellar_relay_log_reads_total",
                       {{"host", host}, {"datastore", datastore}});
  };
  EXPECT_EQ(reads("users"), 0) << "the series does not exist before the relay runs";
  ASSERT_TRUE(relay.Start().ok());
  ASSERT_TRUE(OwnsEveryStream(metrics, c->config)) << metrics.Render();
  const double busy_before = reads(kDatastore), idle_before = reads("users");
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {  // the busy stream: puts back to back
    auto r = c->store->Put(kDatastore, MakeCell(RowOnShard(kShard), 0, "busy"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const double busy = reads(kDatastore) - busy_before, idle = reads("users") - idle_before;
  EXPECT_GT(busy, 100) << "the busy stream was hardly read";
  EXPECT_LT(idle * 4, busy) << "the idle stream was read " << idle << " times, the busy one "
                            << busy;
  // relay.poll_max_ms 50: about 40 reads in 2 s, plus the back-off's first steps.
  EXPECT_LT(idle, 80) << "the idle stream did not back off to poll_max_ms";
  relay.Stop();
}

// A trickle is read in pages of about relay.target_batch_cells cells (each
// read a Kafka transaction in exactly-once mode), not at every poll_min_ms:
// 200 puts a second with a target of 20 pause ~100 ms between reads.
TEST(RelayMetricsTest, ATrickleIsReadInPagesOfTheTargetBatch) {
  auto c = MakeCluster("rt_trickle", Broker());
  ASSERT_TRUE(c);
  ClusterConfig paced = c->config;
  paced.relay.poll_min_ms = 1;
  paced.relay.poll_max_ms = 200;
  paced.relay.target_batch_cells = 20;
  auto relay_store = CellStore::Open(paced);
  constexpr uint32_t kShard = 0;
  const std::string host = c->config.mysql.hosts[c->config.HostIndexForShard(kShard)].name;
  MetricsRegistry metrics;
  Relay relay(relay_store.get(), "trickle-reads", &metrics);
  auto reads = [&] {
    return MetricValue(metrics.Render(), "cellar_relay_log_reads_total",
                       {{"host", host}, {"datastore", kDatastore}});
  };
  ASSERT_TRUE(relay.Start().ok());
  ASSERT_TRUE(OwnsEveryStream(metrics, c->config)) << metrics.Render();
  const double before = reads();
  auto next = std::chrono::steady_clock::now();
  constexpr int kPuts = 300;
  for (int i = 0; i < kPuts; ++i) {  // the load: one put every 5 ms
    next += 5ms;
    std::this_thread::sleep_until(next);
    auto r = c->store->Put(kDatastore, MakeCell(RowOnShard(kShard), 0, "trickle"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const double during = reads() - before;
  // ~15 reads of ~20 cells in 1.5 s; read every poll_min_ms it would be ~300.
  EXPECT_GT(during, 5) << "the stream was hardly read";
  EXPECT_LT(during, 40) << "a trickle of " << kPuts << " cells took " << during << " reads";
  relay.Stop();
}

}  // namespace
}  // namespace cellar::relaytest
