#include "tests/trigger_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "cells/shard_map.h"
#include "gtest/gtest.h"
#include "testing/cluster_environment.h"
#include "testing/free_port.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"

namespace cellar::trigtest {
namespace {

// The binary's MariaDB and broker (testing/cluster_environment.h).
testing::ClusterEnvironment* const g_env =
    testing::ClusterEnvironment::Register({.servers = {"trigtest"}, .broker = true});

}  // namespace

testing::PrivateMariaDb& Db() { return g_env->db(); }
testing::KafkaBroker& Broker() { return g_env->broker(); }

std::string ClusterYaml(const std::string& prefix, const std::string& bootstrap,
                        const testing::PrivateMariaDb* db) {
  std::string yaml = testing::MakeKafkaClusterYaml({db != nullptr ? db : &Db()}, kShards, bootstrap,
                                                   prefix, kPartitions);
  yaml += "relay:\n  lock_retry_ms: 200\n  poll_min_ms: 1\n  poll_max_ms: 20\n";
  return yaml;
}

ClusterConfig ClusterConfigFor(const std::string& prefix, const std::string& bootstrap) {
  const std::string yaml = ClusterYaml(prefix, bootstrap);
  auto cfg = ParseClusterConfig(yaml, "<trigger_test>");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << yaml;
  return cfg.ok() ? std::move(cfg).value() : ClusterConfig{};
}

void CreateTopics(testing::KafkaBroker& broker, const std::string& prefix) {
  for (const char* ds : {"trips", "users"}) {
    Status s = broker.CreateTopic(prefix + "." + ds + ".cells", kPartitions);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, testing::KafkaBroker& broker,
                                     const testing::PrivateMariaDb* db) {
  auto c = std::make_unique<Cluster>();
  // A fresh prefix when a test runs again in this process (--gtest_repeat).
  static std::map<std::string, int> runs;
  const int run = ++runs[prefix];
  c->prefix = run == 1 ? prefix : prefix + "_r" + std::to_string(run);
  c->yaml = ClusterYaml(c->prefix, broker.bootstrap(), db);
  c->config_path = testing::WriteTempFile(c->yaml, ".yaml");
  auto cfg = ParseClusterConfig(c->yaml, c->config_path);
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << c->yaml;
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  CreateTopics(broker, c->prefix);
  c->store = CellStore::Open(c->config);
  Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  return c;
}

std::unique_ptr<Relay> StartRelay(CellStore* store, const std::string& id) {
  auto relay = std::make_unique<Relay>(store, id);
  Status s = relay->Start();
  EXPECT_TRUE(s.ok()) << "relay " << id << ": " << s.ToString();
  if (!s.ok()) return nullptr;
  return relay;
}

int FreePort() { return testing::FreeLoopbackPort(); }

CellAddr AddrOf(const Cell& c) { return {c.row_key.ToString(), c.column, c.ref_key}; }

std::string Describe(const CellAddr& a) {
  return std::get<0>(a) + "/" + std::get<1>(a) + "/" + std::to_string(std::get<2>(a));
}

void HandledLog::Add(const CellEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(e.cell);
  ++counts_[AddrOf(e.cell)];
}

std::vector<Cell> HandledLog::Events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

size_t HandledLog::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

size_t HandledLog::distinct() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_.size();
}

size_t HandledLog::Count(const CellAddr& a) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counts_.find(a);
  return it == counts_.end() ? 0 : it->second;
}

std::set<CellAddr> HandledLog::Missing(const std::set<CellAddr>& want) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<CellAddr> missing;
  for (const auto& a : want)
    if (!counts_.count(a)) missing.insert(a);
  return missing;
}

std::pair<size_t, size_t> HandledLog::Duplicates() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t events = 0, extra = 0;
  for (const auto& [a, n] : counts_)
    if (n > 1) {
      ++events;
      extra += n - 1;
    }
  return {events, extra};
}

TriggerWorkerOptions Opts(const std::string& client_id) {
  TriggerWorkerOptions o;
  o.client_id = client_id;
  o.drain_timeout_ms = 10000;
  return o;
}

std::set<CellAddr> PutVersion(CellStore& store, const std::vector<Uuid>& rows,
                              const std::string& column, int64_t ref_key,
                              const std::function<nlohmann::json(size_t)>& body,
                              std::vector<PutResult>* results) {
  std::vector<CellWrite> writes;
  for (size_t i = 0; i < rows.size(); ++i)
    writes.push_back(CellWrite{rows[i], column, ref_key, body(i)});
  std::set<CellAddr> addrs;
  auto res = store.PutBatch("trips", writes);
  for (size_t i = 0; i < res.size(); ++i) {
    EXPECT_TRUE(res[i].ok()) << res[i].status().ToString();
    if (!res[i].ok()) continue;
    addrs.emplace(rows[i].ToString(), column, ref_key);
    if (results) results->push_back(*res[i]);
  }
  return addrs;
}

std::vector<Uuid> NewRows(size_t n) {
  std::vector<Uuid> rows;
  for (size_t i = 0; i < n; ++i) rows.push_back(Uuid::Random());
  return rows;
}

bool PutCell(CellStore& store, const Uuid& row, const std::string& column, int64_t ref_key,
             const nlohmann::json& body) {
  auto r = store.Put("trips", CellWrite{row, column, ref_key, body});
  EXPECT_TRUE(r.ok()) << CellAddress("trips", row, column, ref_key) << ": "
                      << r.status().ToString();
  return r.ok();
}

TriggerTotals Totals(TriggerWorker& w, const std::string& name) {
  TriggerTotals t;
  const std::string text = w.metrics().Render();
  auto get = [&](const char* metric) {
    double v = MetricValue(text, metric, {{"trigger", name}});
    return v < 0 ? uint64_t{0} : static_cast<uint64_t>(v);
  };
  t.handled = get("cellar_trigger_handled_total");
  t.retried = get("cellar_trigger_retried_total");
  t.set_aside = get("cellar_trigger_set_aside_total");
  for (const auto& st : w.status())
    if (st.name == name) {
      t.found = true;
      t.paused = st.paused;
    }
  return t;
}

std::string HttpGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);
  auto res = client.Get(path.c_str());
  if (!res || res->status != 200) return "";
  return res->body;
}

std::pair<Uuid, Uuid> TwoRowsOfOneShard(uint32_t shards) {
  std::map<uint32_t, Uuid> by_shard;
  for (;;) {
    const Uuid row = Uuid::Random();
    auto [it, added] = by_shard.try_emplace(ShardForRow(row, shards), row);
    if (!added) return {it->second, row};
  }
}

}  // namespace cellar::trigtest
