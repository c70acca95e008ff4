// The change log across failovers (cells/host_failover.h) on real MariaDB
// servers replicating semi-synchronously and a real Apache Kafka broker: the
// exactly-once relay carries on from its checkpoint on each new primary, and
// read_committed readers see every written cell once, per row in order.
#include <memory>
#include <string>

#include "cells/host_failover.h"
#include "cells/host_topology.h"
#include "changelog/relay.h"
#include "gtest/gtest.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"
#include "tests/relay_test_util.h"

namespace cellar {
namespace relaytest {

// Broker(): the binary's broker (relay_test_util.cc registers it).
namespace {

using namespace std::chrono_literals;

TEST(FailoverPipelineTest, RelayPublishesEveryCellOnceThroughPlannedAndEmergencyFailovers) {
  testing::PrivateMariaDbOptions options;
  options.server_id = 1;
  auto first = testing::PrivateMariaDb::Start("fp_a", options);
  options.server_id = 2;
  auto second = testing::PrivateMariaDb::Start("fp_b", options);
  const std::string prefix = "fp";
  std::string yaml = testing::MakeReplicatedClusterYaml({{first.get(), second.get()}}, kShards,
                                                        Broker().bootstrap(), prefix,
                                                        "  topology_refresh: 100ms\n");
  const auto kafka_line = yaml.find('\n', yaml.find("brokers:", yaml.find("kafka:\n")));
  yaml.insert(kafka_line + 1, "  topic_prefix: " + prefix +
                                  "\n  partitions: " + std::to_string(kPartitions) + "\n");
  yaml += "relay:\n  lock_retry_ms: 200\n";
  auto cfg = ParseClusterConfig(yaml, "<test>");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  const ClusterConfig& config = *cfg;
  CreateTopics(Broker(), prefix);
  auto store = CellStore::Open(config);
  ASSERT_TRUE(store->Init().ok());

  Relay relay(store.get(), "fp-relay");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(config);
  Writers writers(store.get(), 4, /*rows_per_thread=*/0, /*versions=*/3, "fp");
  auto written_more = [&](size_t n) {
    const size_t at = collector.distinct();
    return WaitFor([&] { return collector.distinct() >= at + n; }, 60s);
  };
  ASSERT_TRUE(written_more(300));

  // Planned: first -> second, under load.
  Result<FailoverReport> planned = FailoverHost(config, "fp_a", FailoverOptions{});
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_EQ("planned", planned->kind);
  ASSERT_TRUE(written_more(300)) << "nothing published after the planned failover";

  // Emergency: the new primary dies; the first server (its replica now) takes over.
  second->Kill();
  Result<FailoverReport> emergency = FailoverHost(config, "fp_a", FailoverOptions{});
  ASSERT_TRUE(emergency.ok()) << emergency.status().ToString();
  EXPECT_EQ("emergency", emergency->kind);
  EXPECT_TRUE(emergency->loss_ruled_out) << emergency->may_be_lost;
  EXPECT_EQ(3u, emergency->epoch_after);
  ASSERT_TRUE(written_more(300)) << "nothing published after the emergency failover";

  const OnceFigures once = ExpectEveryWrittenCellOnce(writers, collector, config, 60s);
  std::cerr << "through two failovers: " << once.written << " cells written, " << once.dups
            << " seen twice\n";
  relay.Stop();
}

}  // namespace
}  // namespace relaytest
}  // namespace cellar
