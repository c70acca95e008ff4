// Helpers shared by the trigger integration tests (trigger_test.cc,
// trigger_process_test.cc, webhook_test.cc): the binary's MariaDB and local
// broker, a per-test cluster (own host databases, topics and consumer
// groups), an in-process relay, polling, a thread-safe record of handled
// events, Prometheus text parsing and child processes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cells/cell_store.h"
#include "changelog/cell_event.h"
#include "changelog/relay.h"
#include "config/cluster_config.h"
#include "testing/child_process.h"
#include "testing/kafka_broker.h"
#include "testing/metric_value.h"
#include "testing/private_mariadb.h"
#include "testing/wait_for.h"
#include "triggers/trigger_worker.h"

namespace cellar::trigtest {

constexpr uint32_t kShards = 8;
constexpr int kPartitions = 4;

// The binary's MariaDB and broker (started once by a gtest Environment on the
// main thread, stopped after the last test).
testing::PrivateMariaDb& Db();
testing::KafkaBroker& Broker();

// Polls `done` every `step` until it is true or `timeout` passed. Returns its last value.
using ::cellar::testing::WaitFor;

// One test's cluster: host databases <prefix>_<host>, topics <prefix>.<ds>.cells
// (kPartitions each) on the broker, consumer groups <prefix>.trigger.<name>.
struct Cluster {
  std::string prefix;
  std::string yaml;         // cluster YAML (for child processes)
  std::string config_path;  // `yaml` written to a temp file
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
};
// Creates the change-log topics on `broker` and initialises the databases
// on `db` (null: the binary's Db()). Returns null (after a test failure) when
// something went wrong.
std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, testing::KafkaBroker& broker,
                                     const testing::PrivateMariaDb* db = nullptr);
// The YAML of `prefix`'s cluster on `db` (null: Db()) pointing at `bootstrap`.
std::string ClusterYaml(const std::string& prefix, const std::string& bootstrap,
                        const testing::PrivateMariaDb* db = nullptr);
ClusterConfig ClusterConfigFor(const std::string& prefix, const std::string& bootstrap);
void CreateTopics(testing::KafkaBroker& broker, const std::string& prefix);

// An in-process relay over `store`, started (test failure when it cannot start).
std::unique_ptr<Relay> StartRelay(CellStore* store, const std::string& id);

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

// (row, column, ref_key): one cell version's address.
using CellAddr = std::tuple<std::string, std::string, int64_t>;
CellAddr AddrOf(const Cell& c);
// Two rows of one shard: the relay publishes one shard's cells to one
// partition in the order they were written.
std::pair<Uuid, Uuid> TwoRowsOfOneShard(uint32_t shards);
std::string Describe(const CellAddr& a);
template <typename Container>
std::string DescribeSome(const Container& addrs, size_t max = 5) {
  std::string out = std::to_string(addrs.size()) + " cells, e.g.";
  size_t i = 0;
  for (const auto& a : addrs) {
    if (i++ == max) break;
    out += " " + Describe(a);
  }
  return out;
}

// Every event a handler saw, in the order the handler was called.
class HandledLog {
 public:
  void Add(const CellEvent& e);
  std::vector<Cell> Events() const;
  size_t total() const;
  size_t distinct() const;
  size_t Count(const CellAddr& a) const;  // how often the handler saw it
  bool Has(const CellAddr& a) const { return Count(a) > 0; }
  // The members of `want` not seen yet.
  std::set<CellAddr> Missing(const std::set<CellAddr>& want) const;
  // How many distinct events were seen more than once, and the total extra calls.
  std::pair<size_t, size_t> Duplicates() const;

 private:
  mutable std::mutex mu_;
  std::vector<Cell> events_;
  std::map<CellAddr, size_t> counts_;
};

// Worker options for tests: `client_id`, a 10 s drain.
TriggerWorkerOptions Opts(const std::string& client_id);

// Writes version `ref_key` of every row in one PutBatch (trips datastore);
// returns the cells' addresses and appends the put results to `results` (if
// given). Test failure on any error.
std::set<CellAddr> PutVersion(CellStore& store, const std::vector<Uuid>& rows,
                              const std::string& column, int64_t ref_key,
                              const std::function<nlohmann::json(size_t)>& body,
                              std::vector<PutResult>* results = nullptr);

// n random row keys.
std::vector<Uuid> NewRows(size_t n);

// Writes `body` at (row, column, ref_key); a test failure when the put fails.
bool PutCell(CellStore& store, const Uuid& row, const std::string& column, int64_t ref_key,
             const nlohmann::json& body);

// Reads one metric out of Prometheus text (testing/metric_value.h).
using ::cellar::testing::MetricValue;

// Counters of trigger `name` summed over its partitions (metrics) and its paused flag.
struct TriggerTotals {
  uint64_t handled = 0, retried = 0, set_aside = 0;
  bool paused = false;
  bool found = false;
};
TriggerTotals Totals(TriggerWorker& w, const std::string& name);

// Child processes (testing/child_process.h).
using testing::ChildProcess;

// GET http://127.0.0.1:port/path; empty string when it fails.
std::string HttpGet(int port, const std::string& path);

}  // namespace cellar::trigtest
