// Operator commands of issue #17 against two private MariaDB servers and the
// local broker, run as the `cellar` binary (a child process) the way an
// operator runs them:
//  - `cellar index drop-retired`: a retired version's tables go from every
//    host, the serving and the building versions stay, a second run drops
//    nothing and says so.
//  - `cellar status --json`: relay lag per host stream equals the cells
//    written while the relay is stopped, a trigger's DLQ size, index versions
//    and lag; a stopped host is "down" while the others are still reported;
//    nothing reachable exits non-zero; --watch redraws until SIGTERM and exits 0.
//  - `cellar relay status`, `cellar trigger status`, `cellar index status`
//    print JSON with the same figures.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "changelog/relay.h"
#include "gtest/gtest.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"
#include "indexes/index_maintenance.h"
#include "indexes/index_query.h"
#include "indexes/index_retirement.h"
#include "testing/child_process.h"
#include "testing/cluster_environment.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"
#include "tests/cli_test_util.h"
#include "triggers/trigger_admin.h"
#include "triggers/trigger_worker.h"

namespace cellar {
namespace {

using std::chrono::seconds;
using testing::WaitFor;

testing::ClusterEnvironment* const env = &CliEnv();

constexpr uint32_t kShards = 8;
constexpr int kPartitions = 4;

std::vector<const testing::PrivateMariaDb*> Servers() { return CliServers(); }

// How many of `tables` exist in `database` on server `i`.
int TablesOn(size_t i, const std::string& database, const std::vector<std::string>& tables) {
  std::string list;
  for (const auto& t : tables) list += (list.empty() ? "'" : ",'") + t + "'";
  std::string out;
  EXPECT_TRUE(
      env->db(i).Execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                         "TABLE_SCHEMA = '" +
                             database + "' AND TABLE_NAME IN (" + list + ")",
                         &out));
  return std::atoi(out.c_str());
}

IndexDefinition DriverPartnerDef(const ClusterConfig& config) {
  auto defs = LoadIndexDefinitions(
      std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes/driver_partner_index.yaml",
      config);
  EXPECT_TRUE(defs.ok()) << defs.status().ToString();
  return defs.ok() && !defs->empty() ? defs->front() : IndexDefinition{};
}

nlohmann::json TripBody(const Uuid& driver, int i) {
  return {{"driver_partner_uuid", driver.ToString()},
          {"city_uuid", Uuid::Random().ToString()},
          {"trip_created_at", "2026-01-0" + std::to_string(1 + i % 9) + "T10:00:00Z"},
          {"fare", {{"total", 10.5 + i}}},
          {"status", "completed"},
          {"rider_uuid", Uuid::Random().ToString()}};
}

void PutTrips(CellStore& store, const Uuid& driver, int n) {
  for (int i = 0; i < n; ++i) {
    CellWrite w;
    w.row_key = Uuid::Random();
    w.column = "BASE";
    w.ref_key = 1;
    w.body = TripBody(driver, i);
    auto r = store.Put("trips", w);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
}

// ---------------------------------------------------------------------------

TEST(IndexDropRetiredTest, DropsRetiredVersionOnEveryHostKeepsServingAndBuilding) {
  const std::string prefix = "st_drop";
  const std::string yaml = testing::MakeClusterYaml(Servers(), kShards, "", prefix);
  const std::string config_path = testing::WriteTempFile(yaml, ".yaml");
  auto cfg = ParseClusterConfig(yaml, config_path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto store = CellStore::Open(*cfg);
  ASSERT_EQ(store->Init().ToString(), "OK");

  // v1 over an empty datastore: ready at once.
  const IndexDefinition def = DriverPartnerDef(*cfg);
  IndexCatalog catalog(store.get());
  auto v1 = catalog.Apply(def);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  ASSERT_EQ(v1->version.state, IndexState::kReady);
  const Uuid driver = Uuid::Random();
  PutTrips(*store, driver, 30);

  // Nothing retired yet: nothing to drop.
  CliResult none = RunCli(config_path, {"index", "drop-retired"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.json["dropped"], nlohmann::json::array()) << none.out;

  // v2 (one more field) builds, then serves: v1 retires.
  IndexDefinition def2 = def;
  def2.column_defs[0].fields.push_back({"rider_uuid", IndexFieldType::kUuid, "f_rider_uuid"});
  auto v2 = catalog.Apply(def2);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  ASSERT_EQ(v2->version.version, 2);
  ASSERT_EQ(BackfillIndex(store.get(), def2, nullptr).ToString(), "OK");
  // v3 (one more field again) is applied and left building.
  IndexDefinition def3 = def2;
  def3.column_defs[0].fields.push_back({"city_name", IndexFieldType::kString, "f_city_name"});
  auto v3 = catalog.Apply(def3);
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  ASSERT_EQ(v3->version.version, 3);
  ASSERT_EQ(v3->version.state, IndexState::kBuilding);
  auto versions = catalog.Versions(def.table);
  ASSERT_TRUE(versions.ok());
  ASSERT_EQ(versions->size(), 3u);
  EXPECT_EQ((*versions)[0].state, IndexState::kRetired);
  EXPECT_EQ((*versions)[1].state, IndexState::kReady);

  auto tables_of = [&](int v) {
    return std::vector<std::string>{EntryTableName(def.table, v), PointerTableName(def.table, v)};
  };
  for (size_t h = 0; h < 2; ++h) {
    const std::string db = cfg->HostDatabase(cfg->mysql.hosts[h]);
    for (int v = 1; v <= 3; ++v) ASSERT_EQ(TablesOn(h, db, tables_of(v)), 2) << db << " v" << v;
  }

  // --dry-run names v1 on both hosts and drops nothing.
  CliResult dry = RunCli(config_path, {"index", "drop-retired", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  ASSERT_TRUE(dry.json.is_object()) << dry.out;
  EXPECT_EQ(dry.json["dry_run"], true);
  ASSERT_EQ(dry.json["would_drop"].size(), 1u) << dry.out;
  EXPECT_EQ(dry.json["would_drop"][0]["index"], def.table);
  EXPECT_EQ(dry.json["would_drop"][0]["version"], 1);
  EXPECT_EQ(dry.json["would_drop"][0]["serving_version"], 2);
  EXPECT_EQ(dry.json["would_drop"][0]["hosts"], nlohmann::json({"stat1", "stat2"}));
  for (size_t h = 0; h < 2; ++h)
    EXPECT_EQ(TablesOn(h, cfg->HostDatabase(cfg->mysql.hosts[h]), tables_of(1)), 2);

  // The drop: v1's tables go from every host; v2 (serving) and v3 (building) stay.
  CliResult drop = RunCli(config_path, {"index", "drop-retired", def.table});
  ASSERT_EQ(drop.code, 0) << drop.err;
  ASSERT_TRUE(drop.json.is_object()) << drop.out;
  EXPECT_EQ(drop.json["dry_run"], false);
  ASSERT_EQ(drop.json["dropped"].size(), 1u) << drop.out;
  EXPECT_EQ(drop.json["dropped"][0]["version"], 1);
  EXPECT_EQ(drop.json["dropped"][0]["hosts"], nlohmann::json({"stat1", "stat2"}));
  EXPECT_EQ(drop.json["dropped"][0]["errors"], nlohmann::json::array());
  EXPECT_EQ(drop.json["unreachable_hosts"], nlohmann::json::array());
  for (size_t h = 0; h < 2; ++h) {
    const std::string db = cfg->HostDatabase(cfg->mysql.hosts[h]);
    EXPECT_EQ(TablesOn(h, db, tables_of(1)), 0) << db;
    EXPECT_EQ(TablesOn(h, db, tables_of(2)), 2) << db;
    EXPECT_EQ(TablesOn(h, db, tables_of(3)), 2) << db;
    std::string rows;
    ASSERT_TRUE(env->db(h).Execute("SELECT COUNT(*) FROM " + db +
                                       ".index_backfill WHERE table_version = '" +
                                       EntryTableName(def.table, 1) + "'",
                                   &rows));
    EXPECT_EQ(std::atoi(rows.c_str()), 0) << "backfill progress of v1 on " << db;
  }

  // v2 still answers: the driver's 30 trips.
  IndexReader reader(store.get(), {def2});
  IndexQuery q;
  q.index = def.table;
  q.shard_value = driver.ToString();
  q.limit = 100;
  auto hits = reader.Query(q);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->version, 2);
  EXPECT_EQ(hits->hits.size(), 30u);

  // A second run drops nothing and says so; the registry keeps v1's history.
  CliResult again = RunCli(config_path, {"index", "drop-retired"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.json["dropped"], nlohmann::json::array()) << again.out;
  EXPECT_NE(again.json.value("message", ""), "") << again.out;
  versions = catalog.Versions(def.table);
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(versions->size(), 3u);

  // v2 becomes retired once v3 is built, and only then can go.
  ASSERT_EQ(BackfillIndex(store.get(), def3, nullptr).ToString(), "OK");
  DropRetiredOptions opts;
  opts.settle_ms = 0;  // no worker and no query runs here
  auto r = DropRetiredIndexVersions(store.get(), opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->versions.size(), 1u);
  EXPECT_EQ(r->versions[0].version, 2);
  EXPECT_EQ(r->versions[0].serving_version, 3);
  for (size_t h = 0; h < 2; ++h)
    EXPECT_EQ(TablesOn(h, cfg->HostDatabase(cfg->mysql.hosts[h]), tables_of(3)), 2);

  // A host down during the drop: the others are done, it is reported and the
  // exit code is 1; a run once it is back finishes the job.
  IndexDefinition def4 = def3;
  def4.column_defs[0].fields.push_back({"city_code", IndexFieldType::kString, "f_city_code"});
  ASSERT_TRUE(catalog.Apply(def4).ok());
  ASSERT_EQ(BackfillIndex(store.get(), def4, nullptr).ToString(), "OK");  // v3 retires
  env->db(1).Stop();
  CliResult partial = RunCli(config_path, {"index", "drop-retired"});
  env->db(1).Restart();
  EXPECT_EQ(partial.code, 1) << partial.out << partial.err;
  ASSERT_TRUE(partial.json.is_object()) << partial.out;
  ASSERT_EQ(partial.json["dropped"].size(), 1u) << partial.out;
  EXPECT_EQ(partial.json["dropped"][0]["version"], 3);
  EXPECT_EQ(partial.json["dropped"][0]["hosts"], nlohmann::json({"stat1"})) << partial.out;
  ASSERT_EQ(partial.json["dropped"][0]["errors"].size(), 1u) << partial.out;
  EXPECT_EQ(partial.json["dropped"][0]["errors"][0].get<std::string>().rfind("stat2: ", 0), 0u)
      << partial.out;
  ASSERT_EQ(partial.json["unreachable_hosts"].size(), 1u) << partial.out;
  EXPECT_EQ(TablesOn(0, cfg->HostDatabase(cfg->mysql.hosts[0]), tables_of(3)), 0);
  EXPECT_EQ(TablesOn(1, cfg->HostDatabase(cfg->mysql.hosts[1]), tables_of(3)), 2);
  r = DropRetiredIndexVersions(store.get(), opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->versions.size(), 1u);
  EXPECT_EQ(r->versions[0].version, 3);
  EXPECT_EQ(r->versions[0].hosts, std::vector<std::string>{"stat2"});
  EXPECT_TRUE(r->ok()) << (r->unreachable_hosts.empty() ? "" : r->unreachable_hosts[0]);
  EXPECT_EQ(TablesOn(1, cfg->HostDatabase(cfg->mysql.hosts[1]), tables_of(3)), 0);
  for (size_t h = 0; h < 2; ++h)
    EXPECT_EQ(TablesOn(h, cfg->HostDatabase(cfg->mysql.hosts[h]), tables_of(4)), 2);

  opts.index = "no_such_index";
  EXPECT_EQ(DropRetiredIndexVersions(store.get(), opts).status().code(), StatusCode::kNotFound);
  store->Close();
}

// ---------------------------------------------------------------------------

struct KafkaCluster {
  std::string prefix, yaml, config_path;
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
};

std::unique_ptr<KafkaCluster> MakeKafkaCluster(const std::string& prefix) {
  auto c = std::make_unique<KafkaCluster>();
  c->prefix = prefix;
  c->yaml = testing::MakeKafkaClusterYaml(Servers(), kShards, env->broker().bootstrap(), prefix,
                                          kPartitions);
  c->yaml += "relay:\n  lock_retry_ms: 200\n  poll_min_ms: 1\n  poll_max_ms: 10\n";
  c->config_path = testing::WriteTempFile(c->yaml, ".yaml");
  auto cfg = ParseClusterConfig(c->yaml, c->config_path);
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  for (const char* ds : {"trips", "users"}) {
    Status s = env->broker().CreateTopic(prefix + "." + ds + ".cells", kPartitions);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  c->store = CellStore::Open(c->config);
  Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  return c;
}

const nlohmann::json* Find(const nlohmann::json& rows, const std::string& key,
                           const std::string& value) {
  for (const auto& r : rows)
    if (r.value(key, "") == value) return &r;
  return nullptr;
}

TEST(ClusterStatusTest, RelayLagDlqIndexesAndAHostDown) {
  auto c = MakeKafkaCluster("st_status");
  ASSERT_TRUE(c);
  const std::string trigger = "st_fails";

  // A trigger whose handler refuses every event: the one event published is
  // set aside (DLQ size 1) and committed past.
  {
    auto relay = std::make_unique<Relay>(c->store.get(), "st-relay");
    ASSERT_EQ(relay->Start().ToString(), "OK");
    TriggerWorkerOptions wo;
    wo.client_id = "st-trigger";
    wo.drain_timeout_ms = 5000;
    TriggerWorker w(c->config, wo);
    ASSERT_EQ(w.on("trips", "BASE", trigger,
                   [](const CellEvent&, TriggerContext&) {
                     return FailedPrecondition("this trigger refuses everything");
                   })
                  .ToString(),
              "OK");
    ASSERT_EQ(w.Start().ToString(), "OK");
    PutTrips(*c->store, Uuid::Random(), 1);
    Result<TriggerLagReport> lag = Unavailable("not read");
    ASSERT_TRUE(WaitFor(
        [&] {
          lag = ReadTriggerLag(c->config, "trips", trigger);
          return lag.ok() && lag->dead_letters == 1 && lag->total_lag == 0;
        },
        seconds(60)))
        << (lag.ok() ? "dead letters " + std::to_string(lag->dead_letters) + ", lag " +
                           std::to_string(lag->total_lag)
                     : lag.status().ToString());
    ASSERT_TRUE(WaitFor(
        [&] {
          for (const auto& s : ReadRelayStatus(*c->store))
            if (!s.error.empty() || s.lag != 0) return false;
          return true;
        },
        seconds(30)));
    w.Stop();
    relay->Stop();
  }
  // The relay is stopped: 7 cells written now are its lag.
  const Uuid driver = Uuid::Random();
  PutTrips(*c->store, driver, 7);
  // An index applied over a non-empty datastore: version 1 building; no
  // indexer ever ran, so its lag is the offsets of the change log: the one
  // record and the commit marker of the relay's transaction that held it.
  const std::string indexes_path =
      testing::WriteTempFile(ReadFile(std::string(CELLAR_SOURCE_DIR) +
                                      "/config/examples/indexes/driver_partner_index.yaml"),
                             ".yaml");
  const IndexDefinition def = DriverPartnerDef(c->config);
  IndexCatalog catalog(c->store.get());
  ASSERT_TRUE(catalog.Apply(def).ok());

  CliResult st = RunCli(c->config_path, {"status", "--json", "--trigger", trigger + "@trips"});
  ASSERT_EQ(st.code, 0) << st.err;
  ASSERT_TRUE(st.json.is_object()) << st.out;
  const auto& j = st.json;
  EXPECT_EQ(j["reachable"], true);
  ASSERT_EQ(j["hosts"].size(), 2u) << st.out;
  for (const auto& h : j["hosts"]) {
    EXPECT_EQ(h["up"], true) << h.dump();
    EXPECT_TRUE(h["error"].is_null()) << h.dump();
  }
  EXPECT_EQ(j["kafka"]["reachable"], true) << st.out;
  ASSERT_EQ(j["relay"].size(), 4u) << st.out;  // 2 hosts x 2 datastores
  uint64_t trips_lag = 0;
  for (const auto& r : j["relay"]) {
    EXPECT_TRUE(r["error"].is_null()) << r.dump();
    EXPECT_EQ(r["owned"], false) << r.dump();
    EXPECT_EQ(r["lag"].get<uint64_t>(),
              r["head"].get<uint64_t>() - r["checkpoint"].get<uint64_t>());
    if (r["datastore"] == "trips") trips_lag += r["lag"].get<uint64_t>();
    // The age of the oldest unpublished cell: > 0 exactly when cells wait.
    ASSERT_TRUE(r["oldest_age_s"].is_number()) << r.dump();
    EXPECT_EQ(r["lag"].get<uint64_t>() > 0, r["oldest_age_s"].get<double>() > 0) << r.dump();
  }
  EXPECT_EQ(trips_lag, 7u) << st.out;
  EXPECT_EQ(j["relay_total_lag"], 7) << st.out;
  ASSERT_EQ(j["triggers"].size(), 1u) << st.out;
  EXPECT_EQ(j["triggers"][0]["name"], trigger);
  EXPECT_EQ(j["triggers"][0]["dead_letters"], 1) << st.out;
  EXPECT_EQ(j["triggers"][0]["lag"], 0) << st.out;
  EXPECT_EQ(j["triggers"][0]["oldest_age_s"], 0.0) << st.out;  // caught up
  EXPECT_EQ(j["triggers"][0]["paused"], false) << st.out;
  const nlohmann::json* idx = Find(j["indexes"], "name", def.table);
  ASSERT_NE(idx, nullptr) << st.out;
  EXPECT_EQ((*idx)["serving_version"], 1);
  EXPECT_EQ((*idx)["versions"], nlohmann::json::parse(R"([{"version":1,"state":"building"}])"));
  EXPECT_EQ((*idx)["lag"], 2) << st.out;

  // The human table says the same in words.
  CliResult human = RunCli(c->config_path, {"status", "--trigger", trigger + "@trips"});
  ASSERT_EQ(human.code, 0) << human.err;
  std::printf("%s", human.out.c_str());  // what an operator sees, in the test log
  EXPECT_NE(human.out.find("stat1"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find(trigger), std::string::npos) << human.out;
  EXPECT_NE(human.out.find(def.table), std::string::npos) << human.out;

  // A trigger paused with `cellar trigger pause` shows as paused with its
  // reason, and a paused trigger the caller did not name is listed too.
  for (const std::string& name : {trigger, std::string("unnamed_paused")}) {
    CliResult paused = RunCli(c->config_path, {"trigger", "pause", name, "--reason", "upgrade"});
    ASSERT_EQ(paused.code, 0) << paused.err;
  }
  CliResult after_pause =
      RunCli(c->config_path, {"status", "--json", "--trigger", trigger + "@trips"});
  ASSERT_EQ(after_pause.code, 0) << after_pause.err;
  ASSERT_TRUE(after_pause.json.is_object()) << after_pause.out;
  const nlohmann::json* named = Find(after_pause.json["triggers"], "name", trigger);
  const nlohmann::json* unnamed = Find(after_pause.json["triggers"], "name", "unnamed_paused");
  ASSERT_NE(named, nullptr) << after_pause.out;
  ASSERT_NE(unnamed, nullptr) << after_pause.out;
  EXPECT_EQ((*named)["paused"], true) << after_pause.out;
  EXPECT_EQ((*named)["paused_reason"], "upgrade") << after_pause.out;
  EXPECT_EQ((*unnamed)["paused"], true) << after_pause.out;
  ASSERT_EQ(RunCli(c->config_path, {"trigger", "resume", trigger}).code, 0);
  CliResult resumed = RunCli(c->config_path, {"status", "--json", "--trigger", trigger + "@trips"});
  ASSERT_TRUE(resumed.json.is_object()) << resumed.out;
  named = Find(resumed.json["triggers"], "name", trigger);
  ASSERT_NE(named, nullptr) << resumed.out;
  EXPECT_EQ((*named)["paused"], false) << resumed.out;

  // The older per-topic commands carry the same figures.
  CliResult relay = RunCli(c->config_path, {"relay", "status"});
  ASSERT_EQ(relay.code, 0) << relay.err;
  ASSERT_TRUE(relay.json.is_object()) << relay.out;
  EXPECT_EQ(relay.json["total_lag"], 7) << relay.out;
  EXPECT_EQ(relay.json["streams"].size(), 4u);
  CliResult trig = RunCli(c->config_path, {"trigger", "status", trigger, "-d", "trips"});
  ASSERT_EQ(trig.code, 0) << trig.err;
  ASSERT_TRUE(trig.json.is_object()) << trig.out;
  EXPECT_EQ(trig.json["dead_letters"], 1) << trig.out;
  EXPECT_EQ(trig.json["total_lag"], 0) << trig.out;
  EXPECT_EQ(trig.json["group"], c->prefix + ".trigger." + trigger);
  CliResult index = RunCli(c->config_path, {"index", "--indexes", indexes_path, "status"});
  ASSERT_EQ(index.code, 0) << index.err;
  ASSERT_TRUE(index.json.is_object()) << index.out;
  ASSERT_EQ(index.json["indexes"].size(), 1u) << index.out;
  EXPECT_EQ(index.json["indexes"][0]["versions"][0]["state"], "building") << index.out;
  EXPECT_EQ(index.json["worker_lag_events"], 2) << index.out;
  // `--indexes` after the command reads the same definitions; a path that
  // does not exist is an error naming it and the flag (docs/reference.md, Command line).
  CliResult after_command = RunCli(c->config_path, {"index", "status", "--indexes", indexes_path});
  ASSERT_EQ(after_command.code, 0) << after_command.err;
  EXPECT_EQ(after_command.json["indexes"], index.json["indexes"]) << after_command.out;
  CliResult missing = RunCli(c->config_path, {"index", "--indexes", "no-such-indexes", "status"});
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("'no-such-indexes' do not exist"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("cellar index --indexes PATH"), std::string::npos) << missing.err;

  // --watch: a document per interval until SIGTERM, then a clean exit.
  {
    testing::TempDir dir("watch");
    const std::string out = dir.File("out");
    testing::ChildProcess p({"/bin/sh", "-c",
                             std::string("exec '") + CELLAR_BIN + "' --config '" + c->config_path +
                                 "' status --json --watch 0.2 >'" + out + "'"},
                            dir.File("log"));
    ASSERT_TRUE(p.running());
    auto lines = [&] {
      const std::string s = ReadFile(out);
      return std::count(s.begin(), s.end(), '\n');
    };
    ASSERT_TRUE(WaitFor([&] { return lines() >= 2; }, seconds(60))) << p.Log();
    EXPECT_EQ(p.Terminate(std::chrono::seconds(10)), 0) << p.Log();
    const std::string s = ReadFile(out);
    const auto first = nlohmann::json::parse(s.substr(0, s.find('\n')), nullptr, false);
    EXPECT_EQ(first.value("relay_total_lag", -1), 7) << s;
  }

  // Kafka down: shown unreachable, trigger and index figures carry the error,
  // the hosts and the relay are still reported, exit 0.
  env->broker().SetDown(true);
  CliResult nokafka = RunCli(c->config_path, {"status", "--json", "--trigger", trigger + "@trips"});
  env->broker().SetDown(false);
  ASSERT_EQ(nokafka.code, 0) << nokafka.err;
  ASSERT_TRUE(nokafka.json.is_object()) << nokafka.out;
  EXPECT_EQ(nokafka.json["kafka"]["reachable"], false) << nokafka.out;
  EXPECT_TRUE(nokafka.json["kafka"]["error"].is_string()) << nokafka.out;
  EXPECT_TRUE(nokafka.json["triggers"][0]["error"].is_string()) << nokafka.out;
  EXPECT_TRUE(nokafka.json["triggers"][0]["dead_letters"].is_null()) << nokafka.out;
  EXPECT_EQ(nokafka.json["relay_total_lag"], 7) << nokafka.out;

  // Host stat2 stopped: it is "down" with its error; stat1 is still reported.
  env->db(1).Stop();
  CliResult down = RunCli(c->config_path, {"status", "--json"});
  env->db(1).Restart();
  ASSERT_EQ(down.code, 0) << down.err;
  ASSERT_TRUE(down.json.is_object()) << down.out;
  const nlohmann::json* h1 = Find(down.json["hosts"], "name", "stat1");
  const nlohmann::json* h2 = Find(down.json["hosts"], "name", "stat2");
  ASSERT_TRUE(h1 && h2) << down.out;
  EXPECT_EQ((*h1)["up"], true);
  EXPECT_EQ((*h2)["up"], false);
  EXPECT_TRUE((*h2)["error"].is_string()) << down.out;
  uint64_t lag_up = 0;
  for (const auto& r : down.json["relay"]) {
    if (r["host"] == "stat2") {
      EXPECT_TRUE(r["error"].is_string()) << r.dump();
    } else {
      EXPECT_TRUE(r["error"].is_null()) << r.dump();
      lag_up += r["lag"].get<uint64_t>();
    }
  }
  uint64_t lag_stat1 = 0;
  for (const auto& r : j["relay"])
    if (r["host"] == "stat1") lag_stat1 += r["lag"].get<uint64_t>();
  EXPECT_EQ(lag_up, lag_stat1);
  c->store->Close();
}

// Nothing answers (no MySQL host, no Kafka): the command still prints what it
// found, and exits 1.
TEST(ClusterStatusTest, NothingReachableExitsNonZero) {
  // A port nothing listens on: bound, then closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  std::string yaml = testing::MakeClusterYaml({&env->db(0)}, kShards, "", "st_gone");
  const std::string live = "port: " + std::to_string(env->db(0).port()) + ",";
  ASSERT_NE(yaml.find(live), std::string::npos) << yaml;
  yaml.replace(yaml.find(live), live.size(), "port: " + std::to_string(port) + ",");
  const std::string path = testing::WriteTempFile(yaml, ".yaml");
  CliResult r = RunCli(path, {"status", "--json"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  ASSERT_TRUE(r.json.is_object()) << r.out;
  EXPECT_EQ(r.json["reachable"], false);
  EXPECT_EQ(r.json["hosts"][0]["up"], false);
  EXPECT_TRUE(r.json["hosts"][0]["error"].is_string());
}

}  // namespace
}  // namespace cellar
