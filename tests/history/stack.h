// Stack: every server and process of one history run, started and stopped by
// the test: two MariaDB hosts (db1 owns shards 0-7 on a primary and a
// semi-synchronous replica, db2 8-15 on one server), an Apache Kafka broker,
// two worker nodes (cellard), the relay
// (cellar-relay), the index worker (cellar-indexer, the example
// driver_partner_index) and the billing trigger service (cellar-billing: a
// trip's BASE cell at ref_key K is billed into its STATUS cell at K).
//
// Every start, kill and restart must happen on the thread that called
// Start() (children and servers die with the thread that started them), and
// that thread must outlive the stack: the test's main thread.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "config/cluster_config.h"
#include "indexes/index_definition.h"
#include "testing/child_process.h"
#include "testing/kafka_broker.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"
#include "tests/http_test_util.h"

namespace cellar::history {

constexpr uint32_t kShards = 16;
// One partition per shard. A 45 s run stores 50-60k cells and the broker
// holds about 640 bytes per event, so with 8 partitions one reached the local
// broker's 5 MiB per-partition retention (CI, seed 2653773472: its 634 oldest
// events were gone; a 100 s run with 8 lost 47k); 16 give each twice the room.
constexpr int kPartitions = 16;
constexpr const char* kPrefix = "hist";
constexpr const char* kDatastore = "trips";

// The processes a fault can kill.
enum class Component { kRelay, kIndexer, kTrigger, kNode1, kNode2 };
constexpr std::array<Component, 5> kAllComponents = {Component::kRelay, Component::kIndexer,
                                                     Component::kTrigger, Component::kNode1,
                                                     Component::kNode2};
const char* ComponentName(Component c);

class Stack {
 public:
  // Starts everything, initialises the cluster and applies the index. Returns
  // null after printing why on failure (what was started is stopped).
  static std::unique_ptr<Stack> Start();
  // Stops every process, then the broker and both servers.
  ~Stack();
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;

  // The worker nodes' URLs; a node restarts on its port, so they never change.
  std::vector<std::string> Endpoints() const;
  // The cluster config in force .
  const ClusterConfig& config() const { return config_; }
  // An in-process store of the cluster for the checks (no Kafka).
  CellStore& store() { return *store_; }
  const IndexDefinition& index() const { return index_; }
  std::string Topic() const;  // the trips change log

  // SIGKILL (a crash). No-op when not running.
  void Kill(Component c);
  // Starts `c` with the current config; false (after printing why) on failure.
  bool Launch(Component c);
  // False once `c` is not running (an exit of its own is reaped and logged).
  bool Running(Component c);
  std::string LogTail(Component c) const;

  // The Kafka broker crashes (SIGKILL) and starts again on its ports and
  // data; the Kafka clients (relay, index worker, trigger) are SIGKILLed and
  // started again against it. False on failure.
  bool RestartBroker();
  // SIGKILL of MariaDB host `host`'s primary, then a start on the same port
  // and data directory (crash recovery). False on failure.
  // REQUIRES: `host` has no replica (1): a replicated host fails over instead.
  bool CrashAndRestartDatabase(size_t host);
  // What an operator does when db1's primary dies: SIGKILL of db1's primary,
  // `cellar host failover db1` (which must be an emergency failover that rules
  // out loss), then the dead server restarted with --init-rpl-role=SLAVE and
  // rejoined as a replica (`cellar host failover db1 --to <new primary>`).
  // False (after printing why) when a step fails or reports otherwise.
  bool FailOverDatabase();

  // Records the group of `c` (kIndexer or kTrigger) logged as deleted by the
  // broker's retention before it read them, over all its launches (its log
  // keeps every launch's lines). 0 when it reported none.
  uint64_t LostRecords(Component c) const;

  // The remedies those log lines name, run as a user would, to completion
  // within `timeout` (then killed). `exit_code`: the process's
  // (testing::kRunTimedOut when killed at the deadline); `report`: the JSON
  // line it printed, null when none; `log`: its output's tail.
  struct ToolRun {
    int exit_code = -1;
    nlohmann::json report;
    std::string log;
  };
  // cellar-billing --replay billing --from beginning: bills every BASE cell
  // from the cell tables again (identical puts).
  ToolRun ReplayBilling(std::chrono::seconds timeout);
  // cellar index check <the index> [--repair].
  ToolRun CheckIndexWithCli(bool repair, std::chrono::seconds timeout);

  // The sum over both hosts of `count_sql`, a query answering one number, in
  // which "{cells}" stands for the host's trips cells table. nullopt when a
  // host did not answer (e.g. while it restarts).
  std::optional<uint64_t> CountOnHosts(const std::string& count_sql) const;
  // `base` plus 1 s per 1,000 stored cells: after a broker restart the
  // consumers handle the whole history again, and a soak holds millions.
  std::chrono::seconds AllowingForHistory(std::chrono::seconds base) const;

 private:
  Stack() = default;
  bool WriteConfig();
  std::string LogPath(Component c) const;
  ToolRun RunTool(const std::vector<std::string>& args, const std::string& log_name,
                  std::chrono::seconds timeout);

  // The server that is now host `host`'s primary.
  testing::PrivateMariaDb& Primary(size_t host) const;

  testing::TempDir dir_{"history"};
  // db1's servers (db1_[db1_primary_] is its primary) and db2.
  std::unique_ptr<testing::PrivateMariaDb> db1_[2], db2_;
  size_t db1_primary_ = 0;
  std::unique_ptr<testing::KafkaBroker> broker_;
  std::string config_path_;
  ClusterConfig config_;
  std::unique_ptr<CellStore> store_;
  IndexDefinition index_;
  std::unique_ptr<testing::ChildProcess> relay_, indexer_, trigger_;
  std::unique_ptr<testing::CellardProcess> nodes_[2];
  int node_ports_[2] = {0, 0};
  int launches_ = 0;
  int tool_runs_ = 0;
};

}  // namespace cellar::history
