// Helpers shared by the relay integration tests (relay_test.cc,
// relay_process_test.cc): the binary's MariaDB and local broker, a per-test
// cluster (own host databases and topics), a background change-log reader,
// writer threads, relay child processes and MySQL lock inspection.
//
// Every test cluster has kHosts hosts, both on the binary's one MariaDB server
// (two host entries, hence two host databases <prefix>_db1 and <prefix>_db2,
// two host logs and two relay threads): host 0 owns shards 0-7, host 1 shards
// 8-15. With the datastores trips and users that makes kHosts x 2 relay
// streams. Shards s and s + kPartitions share partition s, and lie on
// different hosts.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/time.h"
#include "cells/body_codec.h"
#include "cells/cell_store.h"
#include "cells/internal/write_fence.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "changelog/kafka/change_log_consumer.h"
#include "changelog/relay_checkpoint.h"
#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/kafka_broker.h"
#include "testing/private_mariadb.h"
#include "testing/wait_for.h"

namespace cellar::relaytest {

constexpr uint32_t kShards = 16;
constexpr int kPartitions = 8;
constexpr size_t kHosts = 2;
constexpr const char* kDatastore = "trips";

// The binary's MariaDB and broker (started once by a gtest Environment).
testing::PrivateMariaDb& Db();
testing::KafkaBroker& Broker();

// Polls a condition until it holds or a deadline passes (testing/wait_for.h).
using ::cellar::testing::WaitFor;

// One test's cluster: host databases <prefix>_db1, <prefix>_db2 on Db(), topics
// <prefix>.<datastore>.cells (kPartitions each) on `broker`, fast relay
// ownership rounds. The store is initialised.
struct Cluster {
  std::string prefix;
  std::string yaml;         // cluster YAML (for relay processes)
  std::string config_path;  // `yaml` written to a temp file
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
};
// Creates the topics on `broker` (unless create_topics is false) and the databases.
std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, testing::KafkaBroker& broker,
                                     bool create_topics = true);
// The YAML of `prefix`'s cluster pointing at `bootstrap`.
std::string ClusterYaml(const std::string& prefix, const std::string& bootstrap);
void CreateTopics(testing::KafkaBroker& broker, const std::string& prefix);

// A row key that lives on `shard`.
Uuid RowOnShard(uint32_t shard);
CellWrite MakeCell(const Uuid& row, int64_t ref_key, const std::string& tag);

// (shard, added_id) of one committed cell.
using CellId = std::pair<uint32_t, uint64_t>;

// Reads the change log of kDatastore from the beginning, without a group, in a
// background thread, and keeps every event in arrival order.
class Collector {
 public:
  explicit Collector(const ClusterConfig& config);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  std::vector<ConsumedEvent> Events() const;
  size_t total() const;
  size_t distinct() const;
  bool Has(const CellId& id) const;
  // Ids of `want` not received yet.
  std::vector<CellId> Missing(const std::vector<CellId>& want) const;
  // Highest added_id received for `shard` (0 when none).
  uint64_t MaxAddedId(uint32_t shard) const;
  // Highest added_id received from any shard of mysql.hosts[host] (a position
  // in that host's log; 0 when none).
  uint64_t HostMaxAddedId(size_t host) const;
  // Events of `shard` with added_id > after, in arrival order.
  std::vector<uint64_t> ShardSequence(uint32_t shard, uint64_t after) const;
  uint64_t poll_errors() const { return poll_errors_; }

 private:
  void Run();

  std::vector<size_t> host_of_shard_;
  std::unique_ptr<ChangeLogConsumer> consumer_;
  mutable std::mutex mu_;
  std::vector<ConsumedEvent> events_;
  std::set<CellId> seen_;
  std::map<uint32_t, uint64_t> max_id_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> poll_errors_{0};
  std::thread thread_;
};

// "3 cells, e.g. (shard 1, added_id 7) ..." for failure messages.
std::string Describe(const std::vector<CellId>& ids, size_t max = 10);

// Waits until `collector` has every id of `want`; on timeout returns the missing ones.
std::vector<CellId> WaitForAll(const Collector& collector, const std::vector<CellId>& want,
                               std::chrono::milliseconds timeout);

// Per row, versions (first occurrences) must arrive with increasing ref_key
// and added_id. Returns a description of each violation (empty when in order).
std::vector<std::string> OrderViolations(const std::vector<ConsumedEvent>& events);

// Writer threads putting kDatastore cells. Each thread writes rows_per_thread
// rows, `versions` versions each (version v of every row of the thread before
// v+1), or until Stop() when rows_per_thread is 0 (then new rows forever).
class Writers {
 public:
  Writers(CellStore* store, int threads, int rows_per_thread, int versions, const std::string& tag);
  ~Writers();  // stops and joins
  void Join();
  void Stop();  // asks unbounded writers to finish (then Join)
  std::vector<CellId> Written() const;
  size_t count() const;
  uint64_t failures() const { return failures_; }
  std::string first_error() const;

 private:
  void Run(int thread_index);
  CellStore* store_;
  int rows_per_thread_, versions_;
  std::string tag_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> failures_{0};
  mutable std::mutex mu_;
  std::vector<CellId> written_;
  std::string first_error_;
  std::vector<std::thread> threads_;
};

// A cellar-relay child process (testing::ChildProcess; stderr and stdout to
// `log_path`, CELLAR_LOG_LEVEL=info). The destructor SIGKILLs and reaps it if
// it still runs.
// Records of kDatastore's change log that a read_committed client reading the
// topic itself (no group, testing/plain_topic_reader.h) sees more than once:
// a cell published twice has the same value twice. Fails the test (and
// returns SIZE_MAX) when the topic cannot be read.
size_t TopicDuplicates(const ClusterConfig& config);

// What ExpectEveryWrittenCellOnce found.
struct OnceFigures {
  size_t written = 0;     // cells the writers wrote
  size_t dups = 0;        // duplicates the collector saw
  size_t topic_dups = 0;  // duplicates in the topic itself (TopicDuplicates)
};
// Stops and joins `writers`, then expects (gtest) that none of their writes
// failed, every cell they wrote reached `collector` within `timeout`, per row
// in order, and no cell arrived twice, neither for the collector nor in the
// topic itself (the exactly-once relay's contract for read_committed readers).
OnceFigures ExpectEveryWrittenCellOnce(Writers& writers, Collector& collector,
                                       const ClusterConfig& config,
                                       std::chrono::milliseconds timeout);

// Kills (KILL CONNECTION) every MySQL connection process `pid` has open to
// the cluster's hosts, found by matching its sockets' local ports
// (/proc/<pid>/fd, /proc/net/tcp) to PROCESSLIST's HOST column: what the
// server does on its own only after wait_timeout to the connections of a
// stopped (SIGSTOP) process. Returns how many were killed.
size_t KillMysqlConnectionsOf(pid_t pid, const ClusterConfig& config);

class RelayProcess {
 public:
  // `extra_args` go after --config and --id (e.g. --metrics-address).
  RelayProcess(const std::string& config_path, const std::string& id, const std::string& log_path,
               const std::vector<std::string>& extra_args = {});
  ~RelayProcess();
  RelayProcess(const RelayProcess&) = delete;
  RelayProcess& operator=(const RelayProcess&) = delete;

  pid_t pid() const;
  bool running() const;
  void Kill();  // SIGKILL + waitpid
  // SIGTERM, waits up to `timeout` for exit (then SIGKILL). Returns the exit
  // code, or -1 when it had to be killed or died from a signal.
  int Terminate(std::chrono::milliseconds timeout);
  std::string Log() const;
  // Streams ("<host name>/<datastore>", see StreamName) this process
  // currently owns according to its log ("owns stream", "released stream to
  // rebalance" naming the stream's lock, "lost stream locks" of one host).
  std::set<std::string> OwnedFromLog(const ClusterConfig& config) const;

 private:
  std::string log_path_;
  std::unique_ptr<testing::ChildProcess> child_;
};

// A relay stream's name as RelayStats::owned_streams spells it: "<host name>/<datastore>".
std::string StreamName(const ClusterConfig& config, size_t host, const std::string& datastore);
// Every stream of the cluster (hosts x datastores).
std::set<std::string> AllStreams(const ClusterConfig& config);

// For each stream: the MySQL connection id (on the stream's host) holding its
// relay lock RelayLockName(host database, datastore) (nullopt: unowned).
std::map<std::string, std::optional<uint64_t>> StreamLockHolders(const ClusterConfig& config);

// The relay checkpoint of the stream (mysql.hosts[host], datastore).
RelayCheckpoint Checkpoint(CellStore& store, size_t host,
                           const std::string& datastore = kDatastore);
// The checkpoint of every stream reached its host head (CellStore::HostHead).
bool AllCheckpointsAtHead(CellStore& store);

// A writer outside the store (as another worker process would be) that fences
// its transaction exactly like the store does (cells/internal/write_fence.h:
// RegisterWriter, Begin, EnterWriteFence) and inserts one cell into the log of
// the shard's host, leaving the transaction open until Commit()/Rollback().
class FencedWriter {
 public:
  FencedWriter(const ClusterConfig& config, uint32_t shard)
      : shard_(shard), db_(config.DatabaseForShard(shard)) {
    auto c = MysqlConnection::Connect(EndpointFor(config, config.HostForShard(shard)));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) conn_ = std::move(c).value();
  }

  // Returns the added_id (position in the host log) of the inserted cell (0 on failure).
  uint64_t BeginAndInsert(const CellWrite& w) {
    if (!conn_) return 0;
    EXPECT_EQ(ShardForRow(w.row_key, kShards), shard_);
    Status s = internal::RegisterWriter(*conn_, db_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    s = conn_->Begin();
    EXPECT_TRUE(s.ok()) << s.ToString();
    s = internal::EnterWriteFence(*conn_, db_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return 0;
    auto rows =
        conn_->Query("INSERT INTO " + QualifiedTable(db_, std::string("cells_") + kDatastore) +
                         " (shard, row_key, column_name, ref_key, body, tombstone, created_at)"
                         " VALUES (?,?,?,?,?,?,?) RETURNING added_id",
                     {uint64_t{shard_}, w.row_key.ToBytes(), w.column, w.ref_key,
                      EncodeBody(w.body), int64_t{0}, NowMicros()});
    EXPECT_TRUE(rows.ok() && rows->size() == 1) << rows.status().ToString();
    return rows.ok() && rows->size() == 1 ? (*rows)[0].Uint(0) : 0;
  }
  Status Commit() { return conn_->Commit(); }
  void Rollback() { conn_->Rollback(); }

 private:
  uint32_t shard_;
  std::string db_;
  std::unique_ptr<MysqlConnection> conn_;  // closing it rolls back an open transaction
};

}  // namespace cellar::relaytest
