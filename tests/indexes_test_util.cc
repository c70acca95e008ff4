#include "tests/indexes_test_util.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "base/time.h"
#include "cells/shard_map.h"
#include "changelog/consumer_groups.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "gtest/gtest.h"
#include "indexes/index_entry.h"
#include "testing/cluster_environment.h"
#include "testing/test_cluster.h"

namespace cellar::idxtest {
namespace {

// The binary's MariaDB and broker (testing/cluster_environment.h).
testing::ClusterEnvironment* const g_env = testing::ClusterEnvironment::Register(
    {.servers = {"idxtest"}, .broker = true, .relaxed_durability = true});

}  // namespace

testing::PrivateMariaDb& Db() { return g_env->db(); }
testing::KafkaBroker& Broker() { return g_env->broker(); }

Cluster::~Cluster() {
  StopWorker();
  if (relay) relay->Stop();
  relay.reset();
  if (store) store->Close();
}

void Cluster::StartRelay() {
  relay = std::make_unique<Relay>(store.get(), "idxtest-relay");
  Status s = relay->Start();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

void Cluster::StartWorker(const std::vector<IndexDefinition>& defs, IndexWorkerOptions options) {
  worker = std::make_unique<IndexWorker>(store.get(), defs, options);
  Status s = worker->Start();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

void Cluster::StopWorker() {
  if (worker) worker->Stop();
  worker.reset();
}

int64_t Cluster::WorkerLag() const {
  auto lag = ReadGroupLag(
      config, IndexerGroup(config.kafka),
      {config.kafka.topic_prefix + ".trips.cells", config.kafka.topic_prefix + ".users.cells"});
  return lag.ok() ? lag->total : -1;
}

bool Cluster::RelayCaughtUp() const {
  for (const auto& s : ReadRelayStatus(*store))
    if (!s.error.empty() || s.lag != 0) return false;
  return true;
}

std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, int hosts) {
  // The same server once per host: distinct names (db1, db2, ...), so
  // distinct host databases.
  return MakeCluster(prefix, std::vector<const testing::PrivateMariaDb*>(hosts, &Db()));
}

std::unique_ptr<Cluster> MakeCluster(const std::string& prefix,
                                     const std::vector<const testing::PrivateMariaDb*>& dbs) {
  auto c = std::make_unique<Cluster>();
  static std::map<std::string, int> runs;  // --gtest_repeat: fresh databases and topics
  const int run = ++runs[prefix];
  c->prefix = run == 1 ? prefix : prefix + "_r" + std::to_string(run);
  std::string yaml =
      testing::MakeKafkaClusterYaml(dbs, kShards, Broker().bootstrap(), c->prefix, kPartitions);
  yaml += "relay:\n  lock_retry_ms: 200\n  poll_min_ms: 1\n  poll_max_ms: 10\n";
  auto cfg = ParseClusterConfig(yaml, "<indexes_test>");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << yaml;
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  for (const char* ds : {"trips", "users"}) {
    Status s = Broker().CreateTopic(c->prefix + "." + ds + ".cells", kPartitions);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  c->store = CellStore::Open(c->config);
  Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  return c;
}

IndexDefinition DriverPartnerDef(const ClusterConfig& config) {
  auto defs = LoadIndexDefinitions(
      std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes/driver_partner_index.yaml",
      config);
  EXPECT_TRUE(defs.ok()) << defs.status().ToString();
  return defs.ok() && !defs->empty() ? defs->front() : IndexDefinition{};
}

IndexDefinition ParseDef(const std::string& yaml, const ClusterConfig& config) {
  auto defs = ParseIndexDefinitions(yaml, "<test>", config);
  EXPECT_TRUE(defs.ok()) << defs.status().ToString();
  return defs.ok() && !defs->empty() ? defs->front() : IndexDefinition{};
}

IndexVersion ApplyIndex(CellStore& store, const IndexDefinition& def) {
  IndexCatalog catalog(&store);
  auto r = catalog.Apply(def);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->version : IndexVersion{};
}

nlohmann::json TripBody(const Trip& t) {
  return {{"driver_partner_uuid", t.driver.ToString()},
          {"city_uuid", t.city.ToString()},
          {"trip_created_at", FormatRfc3339(t.when)},
          {"fare", {{"total", t.fare}, {"currency", "EUR"}}},
          {"status", t.status},
          {"rider_uuid", t.rider.ToString()},
          {"notes", "not indexed"}};
}

Trip RandomTrip(std::mt19937_64& rng, const std::vector<Uuid>& drivers,
                const std::vector<Uuid>& cities) {
  static const char* kStatuses[] = {"completed", "canceled", "open", "disputed"};
  static const double kFares[] = {7.5, 10, 12.25, 15, 19.99, 23.5, 40};
  Trip t;
  t.driver = drivers[rng() % drivers.size()];
  t.city = cities[rng() % cities.size()];
  // Whole seconds over 60 days of 2026 (and sometimes equal times).
  t.when = *ParseRfc3339("2026-01-01T00:00:00Z") +
           static_cast<int64_t>(rng() % (60 * 24 * 60)) * 60'000'000;
  t.fare = kFares[rng() % 7];
  t.status = kStatuses[rng() % 4];
  std::array<uint8_t, 16> b;
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  t.rider = Uuid(b);
  return t;
}

std::vector<Uuid> RandomUuids(int n) {
  std::vector<Uuid> out;
  for (int i = 0; i < n; ++i) out.push_back(Uuid::Random());
  return out;
}

Uuid UuidOnOtherShard(const Uuid& other) {
  while (true) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) != ShardForRow(other, kShards)) return u;
  }
}

Uuid UuidOnSameShard(const Uuid& other) {
  while (true) {
    Uuid u = Uuid::Random();
    if (u != other && ShardForRow(u, kShards) == ShardForRow(other, kShards)) return u;
  }
}

int64_t PutTrip(CellStore& store, const Uuid& row, int64_t ref_key, const nlohmann::json& body) {
  CellWrite w;
  w.row_key = row;
  w.column = "BASE";
  w.ref_key = ref_key;
  w.body = body;
  auto r = store.Put("trips", w);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return ref_key;
}

std::string WaitForConverge(CellStore& store, IndexReader& reader, const IndexDefinition& def,
                            const IndexQuery& q, std::chrono::milliseconds timeout) {
  std::string diff;
  WaitFor(
      [&] {
        Model model(def, LatestCells(store, def.datastore));
        diff = Diff(model.Answer(q), QueryAll(reader, q));
        return diff.empty();
      },
      timeout, std::chrono::milliseconds(100));
  return diff;
}

IndexFilter Filter(const IndexDefinition& def, const std::string& text) {
  auto f = ParseIndexFilter(def, text);
  EXPECT_TRUE(f.ok()) << text << ": " << f.status().ToString();
  return f.ok() ? *f : IndexFilter{};
}

std::string CheckProblems(CellStore& store, const IndexDefinition& def) {
  auto r = CheckIndex(&store, def, false);
  if (!r.ok()) return r.status().ToString();
  if (r->missing == 0 && r->stale == 0 && r->extra == 0 && r->expected == r->present) return "";
  std::ostringstream os;
  os << "v" << r->version << " expected " << r->expected << " present " << r->present << " missing "
     << r->missing << " stale " << r->stale << " extra " << r->extra;
  for (const auto& e : r->examples) os << "\n  " << e;
  return os.str();
}

std::string RowHex(const Uuid& row) {
  std::string s = row.ToString();
  s.erase(std::remove(s.begin(), s.end(), '-'), s.end());
  return s;
}

IndexQuery ByDriver(const Uuid& driver, int limit) {
  IndexQuery q;
  q.index = "driver_partner_index";
  q.shard_value = driver.ToString();
  q.limit = limit;
  return q;
}

int EntryCount(const Cluster& c, const std::string& table, int version, const Uuid& row) {
  int n = 0;
  for (const auto& host : c.config.mysql.hosts) {
    std::string out;
    EXPECT_TRUE(Db().Execute("SELECT COUNT(*) FROM " + c.config.HostDatabase(host) + "." +
                                 EntryTableName(table, version) + " WHERE row_key = UNHEX('" +
                                 RowHex(row) + "')",
                             &out));
    n += std::atoi(out.c_str());
  }
  return n;
}

}  // namespace cellar::idxtest
