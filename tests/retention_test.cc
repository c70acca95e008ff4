// Purge that loses nothing (issue 14 part 3), against the binary's private
// MariaDB and the local Kafka-protocol broker (relay_test_util.h): the relay
// bound (a relay stopped longer than a TTL, purge, relay restarted: every cell
// in the change log exactly once), index entries removed with their cells,
// the datastore default TTL, one purger per host (the named lock) and the
// background schedule. Every test has its own host databases (and topics).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/time.h"
#include "changelog/relay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_catalog.h"
#include "indexes/index_maintenance.h"
#include "indexes/index_writer.h"
#include "retention/purge_scheduler.h"
#include "retention/purger.h"
#include "testing/metric_value.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"
#include "tests/relay_test_util.h"

namespace cellar::relaytest {
namespace {

using ::cellar::testing::MetricValue;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A cluster like MakeCluster's (two hosts on Db(): shards 0-7 and 8-15) with
// `edit` applied to its YAML. `kafka`: with the broker (topics created) or
// without a kafka section (no relay, no bound).
std::unique_ptr<Cluster> MakePurgeCluster(const std::string& prefix, bool kafka,
                                          const std::function<void(std::string&)>& edit) {
  static std::map<std::string, int> runs;  // a fresh prefix under --gtest_repeat
  const int run = ++runs[prefix];
  auto c = std::make_unique<Cluster>();
  c->prefix = run == 1 ? prefix : prefix + "_r" + std::to_string(run);
  if (kafka) {
    c->yaml = ClusterYaml(c->prefix, Broker().bootstrap());
  } else {
    std::vector<const testing::PrivateMariaDb*> hosts(kHosts, &Db());
    c->yaml = testing::MakeClusterYaml(hosts, kShards, "", c->prefix);
  }
  edit(c->yaml);
  auto cfg = ParseClusterConfig(c->yaml, "<retention_test>");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << c->yaml;
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  if (kafka) CreateTopics(Broker(), c->prefix);
  c->store = CellStore::Open(c->config);
  Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  return c;
}

void Replace(std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in\n" << text;
  text.replace(at, from.size(), to);
}

// Short TTLs: EPHEMERAL 300 ms (instead of 2 s).
void ShortTtl(std::string& yaml) {
  Replace(yaml, "EPHEMERAL: { ttl: 2s }", "EPHEMERAL: { ttl: 300ms }");
}

struct Written {
  std::vector<CellId> ids;
  MicrosSinceEpoch newest = 0;  // the latest created_at
};

// Puts one cell of `column` on each of `rows` rows spread over every shard.
Written Put(CellStore& store, const std::string& datastore, const std::string& column, int rows,
            const std::string& tag) {
  Written w;
  for (int i = 0; i < rows; ++i) {
    CellWrite cw = MakeCell(RowOnShard(static_cast<uint32_t>(i) % kShards), 1, tag);
    cw.column = column;
    auto r = store.Put(datastore, cw);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) continue;
    w.ids.push_back({r->shard, r->added_id});
    w.newest = std::max(w.newest, r->created_at);
  }
  return w;
}

// Waits (on wall time, the one thing a TTL depends on) until cells created at
// `newest` are older than `ttl_ms`.
void WaitPastTtl(MicrosSinceEpoch newest, int64_t ttl_ms) {
  ASSERT_TRUE(WaitFor([&] { return NowMicros() > newest + ttl_ms * 1000 + 1000; }, seconds(30)));
}

// Every (shard, added_id) still in the datastore's host logs (expired included).
std::set<CellId> Stored(CellStore& store, const std::string& datastore = kDatastore) {
  std::set<CellId> out;
  for (size_t h = 0; h < kHosts; ++h) {
    uint64_t after = 0;
    while (true) {
      auto page = store.HostLog(datastore, h, after, 1000);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok() || page->cells.empty()) break;
      for (const Cell& c : page->cells) out.insert({c.shard, c.added_id});
      after = page->next_after;
    }
  }
  return out;
}

size_t CountStored(const std::set<CellId>& stored, const std::vector<CellId>& ids) {
  size_t n = 0;
  for (const CellId& id : ids) n += stored.count(id);
  return n;
}

// The test: a relay stopped for longer than a TTL, purge, the relay
// restarted: nothing above the checkpoint is deleted, and every cell appears
// in the change log exactly once.
TEST(RetentionTest, RelayStoppedLongerThanTtlLosesNothing) {
  auto c = MakePurgeCluster("ret_relay", /*kafka=*/true, ShortTtl);
  ASSERT_TRUE(c);
  Collector collector(c->config);
  const int64_t ttl = c->config.FindDatastore(kDatastore)->FindColumn("EPHEMERAL")->ttl_ms;
  ASSERT_EQ(ttl, 300);

  // Published: the relay runs until both streams' checkpoints reach the head.
  auto relay = std::make_unique<Relay>(c->store.get(), "ret-1");
  ASSERT_TRUE(relay->Start().ok());
  const Written published = Put(*c->store, kDatastore, "EPHEMERAL", 40, "published");
  EXPECT_THAT(WaitForAll(collector, published.ids, seconds(60)), ::testing::IsEmpty());
  ASSERT_TRUE(WaitFor([&] { return AllCheckpointsAtHead(*c->store); }, seconds(30)));
  relay->Stop();
  relay.reset();
  std::vector<uint64_t> checkpoints;
  for (size_t h = 0; h < kHosts; ++h)
    checkpoints.push_back(Checkpoint(*c->store, h).after_added_id);

  // Not published: written while the relay is stopped, then it stays stopped
  // for longer than the TTL.
  const Written unpublished = Put(*c->store, kDatastore, "EPHEMERAL", 40, "unpublished");
  const Written lasting = Put(*c->store, kDatastore, "BASE", 8, "lasting");
  WaitPastTtl(unpublished.newest, ttl);

  Purger purger(c->store.get());
  auto report = purger.Run(kDatastore);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->deleted, published.ids.size());
  EXPECT_EQ(report->held_back, unpublished.ids.size());
  EXPECT_EQ(report->hosts_failed, 0u);
  ASSERT_EQ(report->hosts.size(), kHosts);
  for (size_t h = 0; h < kHosts; ++h) {
    ASSERT_TRUE(report->hosts[h].published_up_to.has_value());
    EXPECT_EQ(*report->hosts[h].published_up_to, checkpoints[h]);
  }
  std::set<CellId> stored = Stored(*c->store);
  EXPECT_EQ(CountStored(stored, published.ids), 0u);
  EXPECT_EQ(CountStored(stored, unpublished.ids), unpublished.ids.size());
  EXPECT_EQ(CountStored(stored, lasting.ids), lasting.ids.size());
  // Nothing above a stream's checkpoint is gone.
  for (const CellId& id : unpublished.ids)
    EXPECT_GT(id.second, checkpoints[c->config.HostIndexForShard(id.first)]);

  // The relay restarted publishes the rest: every cell exactly once.
  relay = std::make_unique<Relay>(c->store.get(), "ret-2");
  ASSERT_TRUE(relay->Start().ok());
  std::vector<CellId> all = published.ids;
  all.insert(all.end(), unpublished.ids.begin(), unpublished.ids.end());
  all.insert(all.end(), lasting.ids.begin(), lasting.ids.end());
  EXPECT_THAT(WaitForAll(collector, all, seconds(60)), ::testing::IsEmpty());
  ASSERT_TRUE(WaitFor([&] { return AllCheckpointsAtHead(*c->store); }, seconds(30)));
  relay->Stop();
  std::map<CellId, int> seen;
  for (const ConsumedEvent& e : collector.Events())
    ++seen[{e.event.cell.shard, e.event.cell.added_id}];
  for (const CellId& id : all)
    EXPECT_EQ(seen[id], 1) << "shard " << id.first << " added_id " << id.second;
  EXPECT_EQ(seen.size(), all.size());

  // Now published, the rest goes.
  report = purger.Run(kDatastore);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->deleted, unpublished.ids.size());
  EXPECT_EQ(report->held_back, 0u);
  stored = Stored(*c->store);
  EXPECT_EQ(CountStored(stored, unpublished.ids), 0u);
  EXPECT_EQ(CountStored(stored, lasting.ids), lasting.ids.size());
}

// With kafka.brokers and no checkpoint row, nothing is published yet: nothing goes.
TEST(RetentionTest, NoCheckpointWithKafkaDeletesNothing) {
  auto c = MakePurgeCluster("ret_nocp", /*kafka=*/true, ShortTtl);
  ASSERT_TRUE(c);
  const Written w = Put(*c->store, kDatastore, "EPHEMERAL", 10, "never published");
  WaitPastTtl(w.newest, 300);
  auto report = Purger(c->store.get()).Run(kDatastore);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->deleted, 0u);
  EXPECT_EQ(report->held_back, w.ids.size());
  for (const HostPurge& h : report->hosts) EXPECT_EQ(h.published_up_to, std::optional<uint64_t>(0));
  EXPECT_EQ(CountStored(Stored(*c->store), w.ids), w.ids.size());
}

constexpr const char* kIndexYaml =
    "table: purge_idx\n"
    "datastore: trips\n"
    "column_defs:\n"
    "  - column_key: EPHEMERAL\n"
    "    fields: [ { field: tag, type: string } ]\n"
    "  - column_key: BASE\n"
    "    fields: [ { field: tag, type: string } ]\n";

// Purge removes the index entry of each cell it deletes, and only that one:
// an entry of a newer version of the same row's column stays.
TEST(RetentionTest, PurgeRemovesIndexEntriesOfDeletedCells) {
  // No Kafka: no relay, no bound. EPHEMERAL keeps its 2 s TTL, time enough to
  // index the cells before they expire.
  auto c = MakePurgeCluster("ret_index", /*kafka=*/false, [](std::string&) {});
  ASSERT_TRUE(c);
  auto defs = ParseIndexDefinitions(kIndexYaml, "<test>", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  const IndexDefinition def = defs->front();
  IndexCatalog catalog(c->store.get());
  auto applied = catalog.Apply(def);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  const int version = applied->version.version;
  IndexWriter writer(c->store.get(), nullptr);
  // Indexes a cell as the index worker would.
  auto put_indexed = [&](const Uuid& row, const std::string& column, int64_t ref) {
    CellWrite w = MakeCell(row, ref, "t" + std::to_string(ref));
    w.column = column;
    auto r = c->store->Put(kDatastore, w);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    auto cell = c->store->Get(kDatastore, row, column, ref);
    EXPECT_TRUE(cell.ok()) << cell.status().ToString();
    auto a = writer.Apply(def, version, *cell);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (a.ok()) {
      EXPECT_EQ(a->outcome, IndexApply::kUpserted);
    }
    return r.ok() ? r->created_at : 0;
  };
  std::vector<Uuid> expiring, renewed, lasting;
  MicrosSinceEpoch newest = 0;
  for (uint32_t s = 0; s < kShards; s += 3) {
    expiring.push_back(RowOnShard(s));
    renewed.push_back(RowOnShard((s + 1) % kShards));
    lasting.push_back(RowOnShard(s));
    newest = std::max(newest, put_indexed(expiring.back(), "EPHEMERAL", 1));
    newest = std::max(newest, put_indexed(renewed.back(), "EPHEMERAL", 1));
    put_indexed(lasting.back(), "BASE", 1);
  }
  WaitPastTtl(newest, 2000);
  for (const Uuid& row : renewed) put_indexed(row, "EPHEMERAL", 2);  // not expired
  auto before = CheckIndex(c->store.get(), def, false);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->extra, expiring.size());  // entries of expired cells

  auto report = Purger(c->store.get()).Run(kDatastore);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->deleted, expiring.size() + renewed.size());
  EXPECT_EQ(report->index_entries_removed, expiring.size());
  EXPECT_EQ(report->held_back, 0u);
  for (const HostPurge& h : report->hosts) EXPECT_FALSE(h.published_up_to.has_value());

  auto after = CheckIndex(c->store.get(), def, false);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->missing, 0u);
  EXPECT_EQ(after->stale, 0u);
  EXPECT_EQ(after->extra, 0u);
  EXPECT_EQ(after->present, renewed.size() + lasting.size());
  // A replayed event of a purged version changes nothing.
  Cell old;
  old.row_key = expiring.front();
  old.column = "EPHEMERAL";
  old.ref_key = 1;
  old.body = {{"tag", "t1"}};
  old.created_at = NowMicros();  // even one that does not look expired
  auto replay = writer.Apply(def, version, old);
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_EQ(replay->outcome, IndexApply::kStale);
}

// A datastore-level ttl applies to columns without their own.
TEST(RetentionTest, DatastoreDefaultTtlExpiresAndPurges) {
  auto c = MakePurgeCluster("ret_default", /*kafka=*/false, [](std::string& y) {
    Replace(y, "  - name: users\n    columns:\n",
            "  - name: users\n    ttl: 300ms\n    columns:\n");
  });
  ASSERT_TRUE(c);
  ASSERT_EQ(c->config.FindDatastore("users")->FindColumn("PROFILE")->ttl_ms, 300);
  const Written w = Put(*c->store, "users", "PROFILE", 12, "profile");
  ASSERT_FALSE(w.ids.empty());
  WaitPastTtl(w.newest, 300);
  EXPECT_EQ(CountStored(Stored(*c->store, "users"), w.ids), w.ids.size());
  auto report = Purger(c->store.get()).Run("users");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->deleted, w.ids.size());
  EXPECT_EQ(CountStored(Stored(*c->store, "users"), w.ids), 0u);
}

// One purger per host: a host whose purge lock another session holds is skipped.
TEST(RetentionTest, BusyHostIsSkipped) {
  auto c = MakePurgeCluster("ret_busy", /*kafka=*/false, ShortTtl);
  ASSERT_TRUE(c);
  const Written w = Put(*c->store, kDatastore, "EPHEMERAL", 16, "busy");
  WaitPastTtl(w.newest, 300);
  auto lock = MysqlConnection::Connect(EndpointFor(c->config, c->config.mysql.hosts[0]));
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  const std::string name = PurgeLockName(c->config.HostDatabase(c->config.mysql.hosts[0]));
  auto got = (*lock)->Query("SELECT GET_LOCK(?, 0)", {name});
  ASSERT_TRUE(got.ok() && got->size() == 1 && (*got)[0].Int(0) == 1);

  Purger purger(c->store.get());
  auto report = purger.Run(kDatastore);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->hosts_busy, 1u);
  EXPECT_TRUE(report->hosts[0].busy);
  EXPECT_FALSE(report->hosts[1].busy);
  size_t on_host1 = 0;
  for (const CellId& id : w.ids) on_host1 += c->config.HostIndexForShard(id.first) == 1;
  EXPECT_EQ(report->deleted, on_host1);

  ASSERT_TRUE((*lock)->Query("SELECT RELEASE_LOCK(?)", {name}).ok());
  report = purger.Run(kDatastore);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->hosts_busy, 0u);
  EXPECT_EQ(report->deleted, w.ids.size() - on_host1);
  EXPECT_EQ(CountStored(Stored(*c->store), w.ids), 0u);
}

// The background schedule purges on its own, exports its metrics and stops cleanly.
TEST(RetentionTest, BackgroundSchedulePurges) {
  auto c = MakePurgeCluster("ret_sched", /*kafka=*/false, [](std::string& y) {
    ShortTtl(y);
    y += "purge:\n  interval: 100ms\n";
  });
  ASSERT_TRUE(c);
  ASSERT_EQ(c->config.purge.interval_ms, 100);
  MetricsRegistry metrics;
  PurgeScheduler scheduler(c->store.get(), &metrics);
  // The probe registers every series of the purged datastores at 0 up front.
  EXPECT_EQ(PurgeScheduler::PurgedDatastores(c->config), std::vector<std::string>{kDatastore});
  const std::map<std::string, std::string> trips{{"datastore", kDatastore}};
  for (const char* name :
       {"cellar_purge_runs_total", "cellar_purge_failures_total",
        "cellar_purge_cells_deleted_total", "cellar_purge_index_entries_removed_total",
        "cellar_purge_held_back_cells"})
    EXPECT_EQ(MetricValue(metrics.Render(), name, trips), 0) << name << " before the first run";
  ASSERT_TRUE(scheduler.Start().ok());
  const Written w = Put(*c->store, kDatastore, "EPHEMERAL", 16, "scheduled");
  EXPECT_TRUE(WaitFor([&] { return CountStored(Stored(*c->store), w.ids) == 0; }, seconds(30)));
  scheduler.Stop();
  EXPECT_GE(scheduler.runs(), 1u);
  const std::string text = metrics.Render();
  // trips is the only datastore purged, so every run counted is one of its.
  EXPECT_EQ(MetricValue(text, "cellar_purge_runs_total", trips),
            static_cast<double>(scheduler.runs()));
  // Without Kafka there is no relay bound: nothing is held back.
  EXPECT_EQ(MetricValue(text, "cellar_purge_held_back_cells", trips), 0);
  EXPECT_THAT(text, ::testing::HasSubstr("cellar_purge_runs_total{datastore=\"trips\"}"));
  EXPECT_THAT(text, ::testing::HasSubstr("cellar_purge_cells_deleted_total{datastore=\"trips\"} " +
                                         std::to_string(w.ids.size())));
  EXPECT_THAT(text, ::testing::HasSubstr("cellar_purge_failures_total{datastore=\"trips\"} 0"));
  // users has no TTL column: never run.
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("datastore=\"users\"")));

  // Off by default: Start refuses.
  auto off = MakePurgeCluster("ret_sched_off", /*kafka=*/false, [](std::string&) {});
  ASSERT_TRUE(off);
  PurgeScheduler idle(off->store.get(), nullptr);
  EXPECT_EQ(idle.Start().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace cellar::relaytest
