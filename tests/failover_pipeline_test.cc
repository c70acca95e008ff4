// The change log across failovers (cells/host_failover.h) on real MariaDB
// servers replicating semi-synchronously and a real Apache Kafka broker: the
// exactly-once relay carries on from its checkpoint on each new primary, and
// read_committed readers see every written cell once, per row in order.
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cells/host_failover.h"
#include "cells/host_topology.h"
#include "changelog/cell_event.h"
#include "changelog/relay.h"
#include "gtest/gtest.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"
#include "tests/relay_test_util.h"
#include "triggers/trigger_control.h"

namespace cellar {
namespace relaytest {

// Broker(): the binary's broker (relay_test_util.cc registers it).
namespace {

using namespace std::chrono_literals;

// One host of two servers replicating semi-synchronously (`first` the
// primary), its store, an exactly-once relay and a reader of its change log
// (topic prefix `prefix`).
struct Pipeline {
  std::unique_ptr<testing::PrivateMariaDb> first, second;
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
  std::unique_ptr<Relay> relay;
  std::unique_ptr<Collector> collector;

  void Start(const std::string& prefix, int semi_sync_timeout_ms = 10000) {
    testing::PrivateMariaDbOptions options;
    options.semi_sync_timeout_ms = semi_sync_timeout_ms;
    options.server_id = 1;
    first = testing::PrivateMariaDb::Start(prefix + "_a", options);
    options.server_id = 2;
    second = testing::PrivateMariaDb::Start(prefix + "_b", options);
    std::string yaml = testing::MakeReplicatedClusterYaml({{first.get(), second.get()}}, kShards,
                                                          Broker().bootstrap(), prefix,
                                                          "  topology_refresh: 100ms\n");
    // A topic prefix of its own per run: the binary's broker outlives a
    // test, and --gtest_repeat must not read an earlier run's records.
    static int runs = 0;
    const std::string topics = prefix + std::to_string(++runs);
    const auto kafka_line = yaml.find('\n', yaml.find("brokers:", yaml.find("kafka:\n")));
    yaml.insert(kafka_line + 1, "  topic_prefix: " + topics +
                                    "\n  partitions: " + std::to_string(kPartitions) + "\n");
    yaml += "relay:\n  lock_retry_ms: 200\n";
    auto cfg = ParseClusterConfig(yaml, "<test>");
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    config = *cfg;
    CreateTopics(Broker(), topics);
    store = CellStore::Open(config);
    ASSERT_TRUE(store->Init().ok());
    relay = std::make_unique<Relay>(store.get(), prefix + "-relay");
    ASSERT_TRUE(relay->Start().ok());
    collector = std::make_unique<Collector>(config);
  }
};

TEST(FailoverPipelineTest, RelayPublishesEveryCellOnceThroughPlannedAndEmergencyFailovers) {
  Pipeline p;
  ASSERT_NO_FATAL_FAILURE(p.Start("fp"));
  const ClusterConfig& config = p.config;
  Collector& collector = *p.collector;
  auto& second = p.second;
  Writers writers(p.store.get(), 4, /*rows_per_thread=*/0, /*versions=*/3, "fp");
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
  // The first server acknowledges the new primary's commits: it holds a
  // semi-sync heartbeat of epoch 2 (without one the emergency cannot rule
  // out loss, the first server may not have received what was acknowledged).
  const std::string heartbeat_sql = "SELECT epoch, semi_sync_on FROM " +
                                    config.HostDatabase(config.mysql.hosts[0]) +
                                    ".semi_sync_heartbeat";
  ASSERT_TRUE(WaitFor(
      [&] {
        std::string out;
        return p.first->Execute(heartbeat_sql, &out) && out == "2\t1\n";
      },
      30s))
      << [&] {
           std::string out;
           (void)p.first->Execute(heartbeat_sql + "; SHOW SLAVE STATUS", &out);
           return out;
         }();

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
  p.relay->Stop();
}

// Where `db`'s binary log ends: "<file>\t<position>" (SHOW MASTER STATUS).
std::pair<std::string, std::string> EndOfBinlog(const testing::PrivateMariaDb& db) {
  std::string out;
  EXPECT_TRUE(db.Execute("SHOW MASTER STATUS", &out));
  const size_t tab = out.find('\t');
  const size_t tab2 = out.find('\t', tab + 1);
  if (tab == std::string::npos || tab2 == std::string::npos) return {};
  return {out.substr(0, tab), out.substr(tab + 1, tab2 - tab - 1)};
}

// The statements other than BEGIN and COMMIT that `db` wrote to its binary log
// after `from` (in ROW format, DML is row events: these are DDL), one a line.
std::string DdlSince(const testing::PrivateMariaDb& db,
                     const std::pair<std::string, std::string>& from) {
  std::string out;
  EXPECT_TRUE(db.Execute("SHOW BINLOG EVENTS IN '" + from.first + "' FROM " + from.second, &out));
  std::string ddl;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    // Log_name, Pos, Event_type, Server_id, End_log_pos, Info
    std::vector<std::string> field;
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, '\t');) field.push_back(f);
    if (field.size() < 6 || field[2] != "Query") continue;
    const std::string& statement = field[5];
    if (statement.rfind("BEGIN", 0) == 0 || statement.rfind("COMMIT", 0) == 0) continue;
    ddl += statement + "\n";
  }
  return ddl;
}

// Components starting again and failovers write no DDL to the binary log once
// the schema is there. MariaDB logs even a CREATE TABLE IF NOT EXISTS that
// changes nothing, and a DDL event behind a transaction no replica
// acknowledged stops a crashed primary's crash recovery when it rejoins as a
// replica ("Cannot truncate the binary log ... unsafe statement is found";
// the history check met it).
TEST(FailoverPipelineTest, RestartsAndFailoversWriteNoDdlOnceTheSchemaIsThere) {
  Pipeline p;
  ASSERT_NO_FATAL_FAILURE(p.Start("nd"));
  const ClusterConfig& config = p.config;
  Result<std::vector<IndexDefinition>> defs = ParseIndexDefinitions(
      "table: trips_by_driver\n"
      "datastore: trips\n"
      "column_defs:\n"
      "  - column_key: BASE\n"
      "    fields:\n"
      "      - { field: driver, type: UUID }\n",
      "<test>", config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_TRUE(IndexCatalog(p.store.get()).Apply(defs->front()).ok());
  ASSERT_TRUE(EnsureTriggerControlTable(config).ok());
  auto put_and_publish = [&](CellStore& store, const std::string& tag) {
    const CellWrite w = MakeCell(RowOnShard(1), 1, tag);
    Result<PutResult> put = store.Put(kDatastore, w);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
    ASSERT_TRUE(WaitFor(
        [&] { return Checkpoint(store, 0, kDatastore).after_added_id >= put->added_id; }, 30s));
  };
  ASSERT_NO_FATAL_FAILURE(put_and_publish(*p.store, "first start"));

  // Every component starts again on the same primary.
  const auto before_restart = EndOfBinlog(*p.first);
  p.relay->Stop();
  auto store = CellStore::Open(config);
  ASSERT_TRUE(store->Init().ok());
  Relay relay(store.get(), "nd-relay-again");
  ASSERT_TRUE(relay.Start().ok());
  ASSERT_TRUE(IndexCatalog(store.get()).Apply(defs->front()).ok());
  ASSERT_TRUE(EnsureTriggerControlTable(config).ok());
  ASSERT_NO_FATAL_FAILURE(put_and_publish(*store, "second start"));
  EXPECT_EQ("", DdlSince(*p.first, before_restart));

  // A planned failover writes the new epoch's topology on the new primary.
  const auto before_failover = EndOfBinlog(*p.second);
  Result<FailoverReport> planned = FailoverHost(config, "nd_a", FailoverOptions{});
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  ASSERT_NO_FATAL_FAILURE(put_and_publish(*store, "after the failover"));
  EXPECT_EQ("", DdlSince(*p.second, before_failover));
  relay.Stop();
}

// After a failover that lost commits (--accept-loss) the new primary gives
// the lost cells' positions to new cells. The relay had published the lost
// ones; it must still publish the new ones at those positions (it skips a
// cell only when Kafka holds that very cell there).
TEST(FailoverPipelineTest, AfterAcceptLossCellsAtReusedPositionsArePublished) {
  Pipeline p;
  ASSERT_NO_FATAL_FAILURE(p.Start("fl", /*semi_sync_timeout_ms=*/300));
  const ClusterConfig& config = p.config;
  CellStore* store = p.store.get();
  Collector& collector = *p.collector;
  const uint32_t shard = 3;
  auto put = [&](const std::string& tag, int n) {
    std::vector<std::pair<CellWrite, PutResult>> out;
    for (int i = 0; i < n; ++i) {
      CellWrite w = MakeCell(RowOnShard(shard), 1, tag);
      Result<PutResult> r = store->Put(kDatastore, w);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) out.emplace_back(std::move(w), *r);
    }
    return out;
  };
  auto published = [&](const std::vector<std::pair<CellWrite, PutResult>>& cells) {
    std::set<std::string> seen;
    for (const ConsumedEvent& e : collector.Events()) seen.insert(CellSubject(e.event.cell));
    size_t n = 0;
    for (const auto& [w, r] : cells)
      n += seen.count(w.row_key.ToString() + "/" + w.column + "/" + std::to_string(w.ref_key));
    return n;
  };

  // Published and checkpointed while replication works: the replica holds
  // the relay's checkpoint and where in Kafka the stream's records start.
  const auto early = put("early", 10);
  ASSERT_TRUE(WaitFor([&] { return published(early) == early.size(); }, 30s));
  ASSERT_TRUE(WaitFor([&] { return Checkpoint(*store, 0, kDatastore).after_added_id >= 10; }, 30s));

  // The replica stops receiving: the primary falls back to asynchronous
  // commits after 300 ms and acknowledges cells the replica never gets; the
  // relay publishes them.
  ASSERT_TRUE(p.second->Execute("STOP SLAVE"));
  const auto doomed = put("doomed", 30);
  ASSERT_EQ(30u, doomed.size());
  ASSERT_TRUE(WaitFor([&] { return published(doomed) == doomed.size(); }, 30s));
  p.first->Kill();
  FailoverOptions accept;
  accept.accept_loss = true;
  Result<FailoverReport> r = FailoverHost(config, config.mysql.hosts[0].name, accept);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->loss_ruled_out);

  // New cells take the lost cells' positions in the host's log.
  const auto fresh = put("fresh", 30);
  ASSERT_EQ(30u, fresh.size());
  std::set<uint64_t> lost_ids;
  for (const auto& [w, pr] : doomed) lost_ids.insert(pr.added_id);
  size_t reused = 0;
  for (const auto& [w, pr] : fresh) reused += lost_ids.count(pr.added_id);
  ASSERT_GT(reused, 0u) << "no new cell took a lost cell's position: the test shows nothing";
  EXPECT_TRUE(WaitFor([&] { return published(fresh) == fresh.size(); }, 60s))
      << published(fresh) << " of " << fresh.size() << " cells written after the failover "
      << "were published (" << reused << " at positions of lost cells)";
  EXPECT_GT(p.relay->stats().positions_reused_after_loss, 0u);
  p.relay->Stop();
}

}  // namespace
}  // namespace relaytest
}  // namespace cellar
