#include "tests/relay_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "cells/shard_map.h"
#include "changelog/relay.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/cluster_environment.h"
#include "testing/plain_topic_reader.h"
#include "testing/test_cluster.h"

namespace cellar::relaytest {
namespace {

// The binary's MariaDB and broker (testing/cluster_environment.h).
testing::ClusterEnvironment* const g_env =
    testing::ClusterEnvironment::Register({.servers = {"relaytest"}, .broker = true});

}  // namespace

testing::PrivateMariaDb& Db() { return g_env->db(); }
testing::KafkaBroker& Broker() { return g_env->broker(); }

std::string ClusterYaml(const std::string& prefix, const std::string& bootstrap) {
  // kHosts host entries on the one server: MakeClusterYaml names them db1, db2, ...
  std::vector<const testing::PrivateMariaDb*> hosts(kHosts, &Db());
  std::string yaml = testing::MakeKafkaClusterYaml(hosts, kShards, bootstrap, prefix, kPartitions);
  // Quick ownership rounds so that takeovers and rebalances happen within a test.
  yaml += "relay:\n  lock_retry_ms: 200\n";
  return yaml;
}

void CreateTopics(testing::KafkaBroker& broker, const std::string& prefix) {
  for (const char* ds : {"trips", "users"}) {
    Status s = broker.CreateTopic(prefix + "." + ds + ".cells", kPartitions);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, testing::KafkaBroker& broker,
                                     bool create_topics) {
  auto c = std::make_unique<Cluster>();
  // A fresh prefix when a test runs again in this process (--gtest_repeat):
  // new databases and topics, nothing left over from the previous run.
  static std::map<std::string, int> runs;
  const int run = ++runs[prefix];
  c->prefix = run == 1 ? prefix : prefix + "_r" + std::to_string(run);
  c->yaml = ClusterYaml(c->prefix, broker.bootstrap());
  c->config_path = testing::WriteTempFile(c->yaml, ".yaml");
  auto cfg = ParseClusterConfig(c->yaml, "<relay_test>");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << c->yaml;
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  EXPECT_EQ(c->config.mysql.hosts.size(), kHosts) << c->yaml;
  if (create_topics) CreateTopics(broker, c->prefix);
  c->store = CellStore::Open(c->config);
  Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  return c;
}

Uuid RowOnShard(uint32_t shard) {
  while (true) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) == shard) return u;
  }
}

CellWrite MakeCell(const Uuid& row, int64_t ref_key, const std::string& tag) {
  CellWrite w;
  w.row_key = row;
  w.column = "BASE";
  w.ref_key = ref_key;
  w.body = {{"tag", tag}, {"ref", ref_key}};
  return w;
}

// ---------------------------------------------------------------------------
// Collector

Collector::Collector(const ClusterConfig& config) {
  for (uint32_t s = 0; s < config.shards; ++s)
    host_of_shard_.push_back(config.HostIndexForShard(s));
  ConsumerOptions options;
  options.from_beginning = true;
  options.client_id = "relay-test-collector";
  auto c = ChangeLogConsumer::Create(config, {kDatastore}, options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return;
  consumer_ = std::move(c).value();
  thread_ = std::thread([this] { Run(); });
}

Collector::~Collector() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (consumer_) consumer_->Close();
}

void Collector::Run() {
  while (!stop_) {
    auto r = consumer_->Poll(100);
    if (!r.ok()) {
      poll_errors_++;  // e.g. the broker is down: keep polling
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (!r->has_value()) continue;
    ConsumedEvent e = std::move(**r);
    std::lock_guard<std::mutex> lock(mu_);
    const CellId id{e.event.cell.shard, e.event.cell.added_id};
    seen_.insert(id);
    uint64_t& m = max_id_[id.first];
    m = std::max(m, id.second);
    events_.push_back(std::move(e));
  }
}

std::vector<ConsumedEvent> Collector::Events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

size_t Collector::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

size_t Collector::distinct() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.size();
}

bool Collector::Has(const CellId& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.count(id) > 0;
}

std::vector<CellId> Collector::Missing(const std::vector<CellId>& want) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CellId> missing;
  for (const auto& id : want)
    if (!seen_.count(id)) missing.push_back(id);
  return missing;
}

uint64_t Collector::MaxAddedId(uint32_t shard) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = max_id_.find(shard);
  return it == max_id_.end() ? 0 : it->second;
}

uint64_t Collector::HostMaxAddedId(size_t host) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t m = 0;
  for (const auto& [shard, id] : max_id_)
    if (shard < host_of_shard_.size() && host_of_shard_[shard] == host) m = std::max(m, id);
  return m;
}

std::vector<uint64_t> Collector::ShardSequence(uint32_t shard, uint64_t after) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& e : events_)
    if (e.event.cell.shard == shard && e.event.cell.added_id > after)
      out.push_back(e.event.cell.added_id);
  return out;
}

std::string Describe(const std::vector<CellId>& ids, size_t max) {
  std::string out = std::to_string(ids.size()) + " cells, e.g.";
  for (size_t i = 0; i < ids.size() && i < max; ++i)
    out += " (shard " + std::to_string(ids[i].first) + ", added_id " +
           std::to_string(ids[i].second) + ")";
  return out;
}

std::vector<CellId> WaitForAll(const Collector& collector, const std::vector<CellId>& want,
                               std::chrono::milliseconds timeout) {
  std::vector<CellId> missing = want;
  WaitFor(
      [&] {
        missing = collector.Missing(missing);
        return missing.empty();
      },
      timeout, std::chrono::milliseconds(50));
  return missing;
}

std::vector<std::string> OrderViolations(const std::vector<ConsumedEvent>& events) {
  struct RowState {
    std::set<uint64_t> seen;
    uint64_t max_added_id = 0;
    int64_t max_ref_key = -1;
  };
  std::map<std::string, RowState> rows;  // row key + column
  std::vector<std::string> violations;
  for (const auto& e : events) {
    const Cell& c = e.event.cell;
    RowState& r = rows[c.row_key.ToString() + "/" + c.column];
    if (!r.seen.insert(c.added_id).second) continue;  // a duplicate of an earlier event
    if (c.added_id <= r.max_added_id || c.ref_key <= r.max_ref_key) {
      violations.push_back("row " + c.row_key.ToString() + " column " + c.column +
                           ": version ref_key=" + std::to_string(c.ref_key) +
                           " added_id=" + std::to_string(c.added_id) +
                           " arrived after ref_key=" + std::to_string(r.max_ref_key) +
                           " added_id=" + std::to_string(r.max_added_id));
    }
    r.max_added_id = std::max(r.max_added_id, c.added_id);
    r.max_ref_key = std::max(r.max_ref_key, c.ref_key);
  }
  return violations;
}

// ---------------------------------------------------------------------------
// Writers

Writers::Writers(CellStore* store, int threads, int rows_per_thread, int versions,
                 const std::string& tag)
    : store_(store), rows_per_thread_(rows_per_thread), versions_(versions), tag_(tag) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { Run(i); });
}

Writers::~Writers() {
  Stop();
  Join();
}

void Writers::Stop() { stop_ = true; }

void Writers::Join() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void Writers::Run(int thread_index) {
  const std::string tag = tag_ + "-" + std::to_string(thread_index);
  auto put = [&](const Uuid& row, int64_t ref) {
    auto r = store_->Put(kDatastore, MakeCell(row, ref, tag));
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.ok()) {
      if (failures_++ == 0) first_error_ = r.status().ToString();
      return;
    }
    if (r->created) written_.emplace_back(r->shard, r->added_id);
  };
  if (rows_per_thread_ > 0) {
    std::vector<Uuid> rows;
    for (int i = 0; i < rows_per_thread_; ++i) rows.push_back(Uuid::Random());
    for (int v = 0; v < versions_; ++v)
      for (const Uuid& row : rows) put(row, v);
    return;
  }
  while (!stop_) {
    const Uuid row = Uuid::Random();
    for (int v = 0; v < versions_ && !stop_; ++v) put(row, v);
  }
}

std::vector<CellId> Writers::Written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

size_t Writers::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_.size();
}

std::string Writers::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

// ---------------------------------------------------------------------------
// RelayProcess

namespace {

std::vector<std::string> RelayArgs(const std::string& config_path, const std::string& id,
                                   const std::vector<std::string>& extra_args) {
  std::vector<std::string> args{CELLAR_RELAY_BIN, "--config", config_path, "--id", id};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return args;
}

}  // namespace

RelayProcess::RelayProcess(const std::string& config_path, const std::string& id,
                           const std::string& log_path, const std::vector<std::string>& extra_args)
    : log_path_(log_path),
      child_(std::make_unique<testing::ChildProcess>(RelayArgs(config_path, id, extra_args),
                                                     log_path)) {
  EXPECT_TRUE(child_->running()) << "cannot start " << CELLAR_RELAY_BIN;
}

RelayProcess::~RelayProcess() = default;  // the child is SIGKILLed if it still runs

pid_t RelayProcess::pid() const { return child_->pid(); }
bool RelayProcess::running() const { return child_->running(); }
void RelayProcess::Kill() { child_->Kill(); }
int RelayProcess::Terminate(std::chrono::milliseconds timeout) {
  return child_->Terminate(timeout);
}

std::string RelayProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// The value of field `key` in a log line (key=value or key="quoted value"),
// nullopt when the line has no such field.
std::optional<std::string> LogField(const std::string& line, const std::string& key) {
  const std::string needle = " " + key + "=";
  const std::string::size_type p = line.find(needle);
  if (p == std::string::npos) return std::nullopt;
  std::string::size_type i = p + needle.size();
  std::string value;
  if (i < line.size() && line[i] == '"') {
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;
      value.push_back(line[i]);
    }
    return value;
  }
  const std::string::size_type end = line.find(' ', i);
  return line.substr(i, end == std::string::npos ? std::string::npos : end - i);
}

}  // namespace

std::set<std::string> RelayProcess::OwnedFromLog(const ClusterConfig& config) const {
  // "released stream to rebalance" names the stream by its lock.
  std::map<std::string, std::string> stream_of_lock;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h)
    for (const auto& ds : config.datastores)
      stream_of_lock[RelayLockName(config.HostDatabase(config.mysql.hosts[h]), ds.name)] =
          StreamName(config, h, ds.name);
  std::set<std::string> owned;
  std::istringstream lines(Log());
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("msg=\"owns stream\"") != std::string::npos) {
      const auto host = LogField(line, "host"), ds = LogField(line, "datastore");
      EXPECT_TRUE(host && ds) << "unparsable log line: " << line;
      if (host && ds) owned.insert(*host + "/" + *ds);
    } else if (line.find("msg=\"released stream to rebalance\"") != std::string::npos) {
      const auto lock = LogField(line, "stream");
      const auto it = lock ? stream_of_lock.find(*lock) : stream_of_lock.end();
      EXPECT_TRUE(it != stream_of_lock.end()) << "unknown stream in log line: " << line;
      if (it != stream_of_lock.end()) owned.erase(it->second);
    } else if (line.find("msg=\"lost stream locks\"") != std::string::npos) {
      // Every stream of that host was on the lost lock connection.
      const auto host = LogField(line, "host");
      EXPECT_TRUE(host) << "unparsable log line: " << line;
      if (!host) continue;
      for (auto it = owned.begin(); it != owned.end();)
        it = it->rfind(*host + "/", 0) == 0 ? owned.erase(it) : std::next(it);
    }
  }
  return owned;
}

// ---------------------------------------------------------------------------
// MySQL state

std::string StreamName(const ClusterConfig& config, size_t host, const std::string& datastore) {
  return config.mysql.hosts[host].name + "/" + datastore;
}

std::set<std::string> AllStreams(const ClusterConfig& config) {
  std::set<std::string> all;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h)
    for (const auto& ds : config.datastores) all.insert(StreamName(config, h, ds.name));
  return all;
}

std::map<std::string, std::optional<uint64_t>> StreamLockHolders(const ClusterConfig& config) {
  std::map<std::string, std::optional<uint64_t>> holders;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
    const MysqlHostConfig& host = config.mysql.hosts[h];
    auto conn = MysqlConnection::Connect(EndpointFor(config, host));
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    if (!conn.ok()) return {};
    std::string sql = "SELECT ";
    std::vector<SqlParam> params;
    for (size_t i = 0; i < config.datastores.size(); ++i) {
      sql += i ? ", IS_USED_LOCK(?)" : "IS_USED_LOCK(?)";
      params.emplace_back(RelayLockName(config.HostDatabase(host), config.datastores[i].name));
    }
    auto rows = (*conn)->Query(sql, params);
    EXPECT_TRUE(rows.ok() && rows->size() == 1) << rows.status().ToString();
    if (!rows.ok() || rows->size() != 1) return {};
    for (size_t i = 0; i < config.datastores.size(); ++i)
      holders[StreamName(config, h, config.datastores[i].name)] =
          (*rows)[0].IsNull(i) ? std::nullopt : std::optional<uint64_t>((*rows)[0].Uint(i));
  }
  return holders;
}

namespace {

// Local TCP ports of the sockets process `pid` has open.
std::set<int> LocalPortsOf(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<int> ports;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state, queues, timer, retrans, uid, timeout, inode;
    in >> slot >> local >> remote >> state >> queues >> timer >> retrans >> uid >> timeout >> inode;
    if (inodes.count(inode))
      ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
  }
  return ports;
}

}  // namespace

size_t TopicDuplicates(const ClusterConfig& config) {
  auto topic = testing::ReadTopic(config.kafka.brokers, ChangeLogTopic(config.kafka, kDatastore),
                                  config.kafka.partitions);
  EXPECT_TRUE(topic.ok()) << topic.status().ToString();
  if (!topic.ok()) return SIZE_MAX;
  std::set<std::string> values;
  for (const testing::TopicRecord& r : topic->records) values.insert(r.value);
  return topic->records.size() - values.size();
}

namespace {

// The first `max` positions (shard, added_id) received more than once, each
// with every copy's subject, created_at and topic offset: whether a cell was
// delivered twice or two cells were given one position.
std::string DescribeDuplicates(const std::vector<ConsumedEvent>& events, size_t max = 5) {
  std::map<CellId, std::vector<const ConsumedEvent*>> by_id;
  for (const ConsumedEvent& e : events)
    by_id[{e.event.cell.shard, e.event.cell.added_id}].push_back(&e);
  std::string out;
  size_t n = 0;
  for (const auto& [id, copies] : by_id) {
    if (copies.size() < 2 || n++ == max) continue;
    out += "\n  (shard " + std::to_string(id.first) + ", added_id " + std::to_string(id.second) +
           "):";
    for (const ConsumedEvent* e : copies)
      out += " [" + CellSubject(e->event.cell) + " created_at " +
             std::to_string(e->event.cell.created_at) + " at " + e->topic + "/" +
             std::to_string(e->partition) + "@" + std::to_string(e->offset) + "]";
  }
  return out;
}

}  // namespace

OnceFigures ExpectEveryWrittenCellOnce(Writers& writers, Collector& collector,
                                       const ClusterConfig& config,
                                       std::chrono::milliseconds timeout) {
  writers.Stop();
  writers.Join();
  EXPECT_EQ(writers.failures(), 0u) << writers.first_error();
  const std::vector<CellId> written = writers.Written();
  const std::vector<CellId> missing = WaitForAll(collector, written, timeout);
  EXPECT_TRUE(missing.empty()) << "never published: " << Describe(missing);
  const auto violations = OrderViolations(collector.Events());
  EXPECT_TRUE(violations.empty()) << violations.size() << " out-of-order versions, first: "
                                  << (violations.empty() ? "" : violations.front());
  OnceFigures f;
  f.written = written.size();
  f.dups = collector.total() - collector.distinct();
  f.topic_dups = TopicDuplicates(config);
  EXPECT_EQ(f.dups, 0u) << "a consumer saw cells twice: " << DescribeDuplicates(collector.Events());
  EXPECT_EQ(f.topic_dups, 0u) << "read_committed readers of the topic see cells twice";
  return f;
}

size_t KillMysqlConnectionsOf(pid_t pid, const ClusterConfig& config) {
  const std::set<int> ports = LocalPortsOf(pid);
  size_t killed = 0;
  std::set<std::string> servers;
  for (const MysqlHostConfig& host : config.mysql.hosts) {
    const MysqlEndpoint endpoint = EndpointFor(config, host);
    if (!servers.insert(endpoint.address + ":" + std::to_string(endpoint.port)).second) continue;
    auto conn = MysqlConnection::Connect(endpoint);
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    if (!conn.ok()) continue;
    auto rows = (*conn)->Query("SELECT ID, HOST FROM information_schema.PROCESSLIST", {});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (!rows.ok()) continue;
    for (const SqlRow& row : *rows) {
      const std::string& client = row.Bytes(1);
      const auto colon = client.rfind(':');
      if (colon == std::string::npos || !ports.count(std::atoi(client.c_str() + colon + 1)))
        continue;
      if ((*conn)->ExecuteDdl("KILL CONNECTION " + std::to_string(row.Uint(0))).ok()) ++killed;
    }
  }
  return killed;
}

RelayCheckpoint Checkpoint(CellStore& store, size_t host, const std::string& datastore) {
  auto lease = store.PoolForHost(host).Acquire();
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
  if (!lease.ok()) return {};
  const std::string db = store.config().HostDatabase(store.config().mysql.hosts[host]);
  Status s = EnsureCheckpointTable(**lease, db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto cp = LoadCheckpoint(**lease, db, datastore);
  EXPECT_TRUE(cp.ok()) << cp.status().ToString();
  return cp.ok() ? *cp : RelayCheckpoint{};
}

bool AllCheckpointsAtHead(CellStore& store) {
  for (size_t h = 0; h < store.config().mysql.hosts.size(); ++h) {
    for (const auto& ds : store.config().datastores) {
      auto head = store.HostHead(ds.name, h);
      if (!head.ok() || Checkpoint(store, h, ds.name).after_added_id < *head) return false;
    }
  }
  return true;
}

}  // namespace cellar::relaytest
