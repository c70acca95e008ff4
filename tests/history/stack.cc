#include "tests/history/stack.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cells/internal/cells_table.h"
#include "cells/mysql_client.h"
#include "indexes/index_catalog.h"

namespace cellar::history {
namespace {

const std::string kIndexes = std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes";

std::string Tail(const std::string& path, size_t max = 6000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max ? "...\n" + s.substr(s.size() - max) : s;
}

}  // namespace

const char* ComponentName(Component c) {
  switch (c) {
    case Component::kRelay:
      return "relay";
    case Component::kIndexer:
      return "index worker";
    case Component::kTrigger:
      return "trigger (cellar-billing)";
    case Component::kNode1:
      return "worker node 1";
    case Component::kNode2:
      return "worker node 2";
  }
  return "?";
}

std::unique_ptr<Stack> Stack::Start() {
  std::unique_ptr<Stack> s(new Stack());
  try {
    testing::PrivateMariaDbOptions replicated;
    // Short enough that writes do not stall long while db1's only replica is
    // down (after a failover, until the old primary rejoins), long enough for
    // the emergency failover to find a heartbeat proving no loss (host_failover.h).
    replicated.semi_sync_timeout_ms = 5000;
    replicated.server_id = 1;
    s->db1_[0] = testing::PrivateMariaDb::Start("db1", replicated);
    replicated.server_id = 2;
    s->db1_[1] = testing::PrivateMariaDb::Start("db1r", replicated);
    s->db2_ = testing::PrivateMariaDb::Start("db2");
    s->broker_ = testing::KafkaBroker::Start();
  } catch (const std::exception& e) {
    std::cerr << "history stack: " << e.what() << "\n";
    return nullptr;
  }
  for (const char* ds : {"trips", "users"}) {
    Status st = s->broker_->CreateTopic(std::string(kPrefix) + "." + ds + ".cells", kPartitions);
    if (!st.ok()) {
      std::cerr << "history stack: " << st.ToString() << "\n";
      return nullptr;
    }
  }
  if (!s->WriteConfig()) return nullptr;
  s->store_ = CellStore::Open(s->config_);
  if (Status st = s->store_->Init(); !st.ok()) {
    std::cerr << "history stack: init: " << st.ToString() << "\n";
    return nullptr;
  }
  auto defs = LoadIndexDefinitions(kIndexes + "/driver_partner_index.yaml", s->config_);
  if (!defs.ok() || defs->empty()) {
    std::cerr << "history stack: index definitions: " << defs.status().ToString() << "\n";
    return nullptr;
  }
  s->index_ = defs->front();
  // A first version over an empty datastore starts ready (no backfill).
  IndexCatalog catalog(s->store_.get());
  if (auto applied = catalog.Apply(s->index_); !applied.ok()) {
    std::cerr << "history stack: index apply: " << applied.status().ToString() << "\n";
    return nullptr;
  }
  for (Component c : kAllComponents)
    if (!s->Launch(c)) return nullptr;
  return s;
}

Stack::~Stack() {
  // Consumers before the broker, everything before the servers.
  for (Component c : kAllComponents) Kill(c);
  store_.reset();
  broker_.reset();
  db2_.reset();
  db1_[1].reset();
  db1_[0].reset();
}

bool Stack::WriteConfig() {
  // db1's configured primary stays db1_[0]: the topology in the databases
  // says which server is primary now.
  std::string yaml = testing::MakeReplicatedClusterYaml(
      {{db1_[0].get(), db1_[1].get()}, {db2_.get()}}, kShards, broker_->bootstrap(), kPrefix,
      "  topology_refresh: 200ms\n");
  // MakeClusterYaml writes "kafka:\n  brokers: ...\n"; add the topic prefix and partitions.
  const auto line_end = yaml.find('\n', yaml.find("brokers:", yaml.find("kafka:\n")));
  yaml.insert(line_end + 1, std::string("  topic_prefix: ") + kPrefix +
                                "\n  partitions: " + std::to_string(kPartitions) + "\n");
  // Quick ownership rounds, so that a restarted relay takes its streams soon.
  yaml += "relay:\n  lock_retry_ms: 200\n  poll_min_ms: 1\n  poll_max_ms: 20\n";
  auto cfg = ParseClusterConfig(yaml, "<history>");
  if (!cfg.ok()) {
    std::cerr << "history stack: config: " << cfg.status().ToString() << "\n" << yaml;
    return false;
  }
  config_ = *cfg;
  // Written beside and renamed over, so that a starting process reads a whole file.
  const std::string path = dir_.File("cellar.yaml");
  {
    std::ofstream out(path + ".tmp");
    out << yaml;
    if (!out) return false;
  }
  std::filesystem::rename(path + ".tmp", path);
  config_path_ = path;
  return true;
}

std::vector<std::string> Stack::Endpoints() const {
  return {"http://127.0.0.1:" + std::to_string(node_ports_[0]),
          "http://127.0.0.1:" + std::to_string(node_ports_[1])};
}

std::string Stack::Topic() const { return std::string(kPrefix) + "." + kDatastore + ".cells"; }

std::string Stack::LogPath(Component c) const {
  switch (c) {
    case Component::kRelay:
      return dir_.File("relay.log");
    case Component::kIndexer:
      return dir_.File("indexer.log");
    case Component::kTrigger:
      return dir_.File("billing.log");
    case Component::kNode1:
      return nodes_[0] ? nodes_[0]->log_path() : "";
    case Component::kNode2:
      return nodes_[1] ? nodes_[1]->log_path() : "";
  }
  return "";
}

void Stack::Kill(Component c) {
  switch (c) {
    case Component::kRelay:
      if (relay_) relay_->Kill();
      break;
    case Component::kIndexer:
      if (indexer_) indexer_->Kill();
      break;
    case Component::kTrigger:
      if (trigger_) trigger_->Kill();
      break;
    case Component::kNode1:
    case Component::kNode2: {
      auto& node = nodes_[c == Component::kNode1 ? 0 : 1];
      if (node) node->Kill();  // keeps its log for LogTail
      break;
    }
  }
}

bool Stack::Launch(Component c) {
  Kill(c);
  const std::string id = std::to_string(++launches_);
  std::unique_ptr<testing::ChildProcess>* child = nullptr;
  std::vector<std::string> args;
  switch (c) {
    case Component::kRelay:
      child = &relay_;
      args = {CELLAR_RELAY_BIN, "--config", config_path_, "--id", "relay-" + id};
      break;
    case Component::kIndexer:
      child = &indexer_;
      args = {CELLAR_INDEXER_BIN, "--config", config_path_, "--indexes", kIndexes};
      break;
    case Component::kTrigger:
      child = &trigger_;
      args = {CELLAR_BILLING_BIN, "--config", config_path_};
      break;
    case Component::kNode1:
    case Component::kNode2: {
      const int i = c == Component::kNode1 ? 0 : 1;
      nodes_[i].reset();
      const std::string listen = "127.0.0.1:" + std::to_string(node_ports_[i]);
      nodes_[i] = testing::CellardProcess::Start(config_path_, {"--indexes", kIndexes}, listen);
      if (!nodes_[i]) {
        std::cerr << "history stack: " << ComponentName(c) << " did not start on " << listen
                  << "\n";
        return false;
      }
      node_ports_[i] = nodes_[i]->port();
      return true;
    }
  }
  child->reset();
  *child = std::make_unique<testing::ChildProcess>(args, LogPath(c));
  if (!(*child)->running()) {
    std::cerr << "history stack: " << ComponentName(c) << " did not start\n";
    return false;
  }
  return true;
}

bool Stack::Running(Component c) {
  testing::ChildProcess* child = nullptr;
  switch (c) {
    case Component::kRelay:
      child = relay_.get();
      break;
    case Component::kIndexer:
      child = indexer_.get();
      break;
    case Component::kTrigger:
      child = trigger_.get();
      break;
    case Component::kNode1:
      return nodes_[0] && nodes_[0]->pid() > 0;
    case Component::kNode2:
      return nodes_[1] && nodes_[1]->pid() > 0;
  }
  if (child == nullptr || !child->running()) return false;
  if (!child->Exited()) return true;
  std::cerr << "history stack: " << ComponentName(c) << " exited with " << child->exit_code()
            << "; its log:\n"
            << child->Log() << "\n";
  return false;
}

std::string Stack::LogTail(Component c) const { return Tail(LogPath(c)); }

uint64_t Stack::LostRecords(Component c) const {
  // The consumer's error line (changelog/keyed_consumer.cc, OnSkipped):
  //   ... msg="records were deleted by the topic's retention ..." ... records=N
  std::ifstream in(LogPath(c));
  uint64_t lost = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("deleted by the topic's retention") == std::string::npos) continue;
    const size_t at = line.find(" records=");
    if (at != std::string::npos) lost += std::strtoull(line.c_str() + at + 9, nullptr, 10);
  }
  return lost;
}

Stack::ToolRun Stack::RunTool(const std::vector<std::string>& args, const std::string& log_name,
                              std::chrono::seconds timeout) {
  const testing::RunResult r = testing::RunToExit(
      args, dir_.File(log_name + "-" + std::to_string(++tool_runs_) + ".log"), timeout);
  ToolRun out;
  out.exit_code = r.exit_code;
  out.log = r.log;
  out.report = r.report;
  return out;
}

Stack::ToolRun Stack::ReplayBilling(std::chrono::seconds timeout) {
  return RunTool(
      {CELLAR_BILLING_BIN, "--config", config_path_, "--replay", "billing", "--from", "beginning"},
      "billing-replay", timeout);
}

Stack::ToolRun Stack::CheckIndexWithCli(bool repair, std::chrono::seconds timeout) {
  std::vector<std::string> args = {CELLAR_CLI_BIN, "--config", config_path_, "index",
                                   "--indexes",    kIndexes,   "check",      index_.table};
  if (repair) args.push_back("--repair");
  return RunTool(args, repair ? "index-repair" : "index-check", timeout);
}

std::optional<uint64_t> Stack::CountOnHosts(const std::string& count_sql) const {
  uint64_t sum = 0;
  for (size_t h = 0; h < 2; ++h) {
    const std::string table = QualifiedTable(config_.HostDatabase(config_.mysql.hosts[h]),
                                             internal::CellsTableName(kDatastore));
    std::string sql = count_sql, out;
    for (size_t at; (at = sql.find("{cells}")) != std::string::npos;) sql.replace(at, 7, table);
    if (!Primary(h).Execute(sql, &out) || out.empty()) return std::nullopt;
    sum += std::strtoull(out.c_str(), nullptr, 10);
  }
  return sum;
}

bool Stack::RestartBroker() {
  for (Component c : {Component::kRelay, Component::kIndexer, Component::kTrigger}) Kill(c);
  try {
    // A crash of the real broker (no controlled shutdown), then a restart on
    // its ports and data: what it had acknowledged must survive.
    broker_->Kill();
    broker_->SetDown(false);
  } catch (const std::exception& e) {
    std::cerr << "history stack: broker restart: " << e.what() << "\n";
    return false;
  }
  if (!WriteConfig()) return false;
  for (Component c : {Component::kRelay, Component::kIndexer, Component::kTrigger})
    if (!Launch(c)) return false;
  return true;
}

testing::PrivateMariaDb& Stack::Primary(size_t host) const {
  return host == 0 ? *db1_[db1_primary_] : *db2_;
}

bool Stack::CrashAndRestartDatabase(size_t host) {
  if (host == 0) {
    std::cerr << "history stack: db1 has a replica: fail it over instead of a restart\n";
    return false;
  }
  db2_->Kill();
  try {
    db2_->Restart();
  } catch (const std::exception& e) {
    std::cerr << "history stack: restart of db2: " << e.what() << "\n";
    return false;
  }
  return true;
}

bool Stack::FailOverDatabase() {
  testing::PrivateMariaDb& dead = *db1_[db1_primary_];
  testing::PrivateMariaDb& next = *db1_[1 - db1_primary_];
  const std::string dead_label = dead.host() + ":" + std::to_string(dead.port());
  const std::string next_label = next.host() + ":" + std::to_string(next.port());
  dead.Kill();
  const ToolRun emergency =
      RunTool({CELLAR_CLI_BIN, "--config", config_path_, "host", "failover", "db1"}, "failover",
              std::chrono::seconds(60));
  const nlohmann::json& r = emergency.report;
  if (emergency.exit_code != 0 || !r.is_object() || r.value("kind", "") != "emergency" ||
      r.value("to", "") != next_label || !r.value("loss_ruled_out", false)) {
    std::cerr << "history stack: cellar host failover db1 after SIGKILL of " << dead_label
              << " exited with " << emergency.exit_code << ", expected an emergency failover to "
              << next_label << " that rules out loss:\n"
              << emergency.log << "\n";
    return false;
  }
  db1_primary_ = 1 - db1_primary_;
  // Restarted as a replica would be: its crash recovery rolls back the binlog
  // tail no replica acknowledged, and it starts read_only.
  dead.options().init_rpl_role = "SLAVE";
  try {
    dead.Restart();
  } catch (const std::exception& e) {
    std::cerr << "history stack: restart of " << dead_label << ": " << e.what() << "\n";
    return false;
  }
  const ToolRun rejoin = RunTool(
      {CELLAR_CLI_BIN, "--config", config_path_, "host", "failover", "db1", "--to", next_label},
      "rejoin", std::chrono::seconds(60));
  const nlohmann::json& j = rejoin.report;
  if (rejoin.exit_code != 0 || !j.is_object() || j.value("kind", "") != "none" ||
      j.value("repointed", nlohmann::json::array()) != nlohmann::json::array({dead_label})) {
    std::cerr << "history stack: cellar host failover db1 --to " << next_label << " did not rejoin "
              << dead_label << " as a replica (exit " << rejoin.exit_code << "):\n"
              << rejoin.log << "\n";
    return false;
  }
  return true;
}

std::chrono::seconds Stack::AllowingForHistory(std::chrono::seconds base) const {
  const std::optional<uint64_t> cells = CountOnHosts("SELECT COUNT(*) FROM {cells}");
  return base + std::chrono::seconds(cells.value_or(0) / 1000);
}

}  // namespace cellar::history
