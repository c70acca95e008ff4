// Failover of a MySQL host on real MariaDB servers replicating with GTIDs and
// lossless semi-synchronous replication (cells/host_failover.h): bootstrap,
// bad input, a planned switch under load, a planned switch whose fence
// interrupts a commit, an emergency switch after SIGKILL,
// a refusal when semi-sync had fallen back to async, an old primary that
// comes back writable by mistake, and reads (cells and index queries) from
// the replica.
#include "cells/host_failover.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "base/uuid.h"
#include "cells/cell_store.h"
#include "cells/host_topology.h"
#include "cells/log_position.h"
#include "gtest/gtest.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"
#include "indexes/index_writer.h"
#include "testing/private_mariadb.h"
#include "testing/put_load.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"

namespace cellar {
namespace {

using testing::PrivateMariaDb;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr uint32_t kShards = 4;

// One host: a primary and a replica, fresh for every test (each test changes
// which server is primary).
class HostFailoverTest : public ::testing::Test {
 protected:
  void StartServers(int semi_sync_timeout_ms = 10000) {
    testing::PrivateMariaDbOptions options;
    options.semi_sync_timeout_ms = semi_sync_timeout_ms;
    options.server_id = 1;
    primary_ = PrivateMariaDb::Start("fo_p", options);
    options.server_id = 2;
    replica_ = PrivateMariaDb::Start("fo_r", options);
    yaml_ = testing::MakeReplicatedClusterYaml({{primary_.get(), replica_.get()}}, kShards, "",
                                               "cellar", "  topology_refresh: 100ms\n");
    auto cfg = ParseClusterConfig(yaml_, "<test>");
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    config_ = *cfg;
    store_ = CellStore::Open(config_, &metrics_);
    ASSERT_OK(store_->Init());
  }

  std::string Label(const PrivateMariaDb& db) const {
    return db.host() + ":" + std::to_string(db.port());
  }

  // A scalar query's text on `db` ("" when it fails).
  static std::string Ask(const PrivateMariaDb& db, const std::string& sql) {
    std::string out;
    if (!db.Execute(sql, &out)) return "";
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  // "<epoch>\t<semi_sync_on>" of the semi-sync heartbeat `db` holds ("" when none).
  static std::string Heartbeat(const PrivateMariaDb& db) {
    return Ask(db, "SELECT epoch, semi_sync_on FROM cellar_fo_p.semi_sync_heartbeat");
  }

  // A planned failover to the replica (epoch 2), after which the former
  // primary stops replicating before any heartbeat of epoch 2 reached it, as
  // when the new primary dies first: it holds its own last heartbeat as the
  // primary of epoch 1, fresh and with semi-sync ON, and the epoch-2
  // topology row or (`stale_row`) still its own epoch-1 row. Then the new
  // primary is killed.
  void StrandTheFormerPrimary(bool stale_row) {
    ASSERT_OK(store_->Put("trips", Write(0)).status());
    ASSERT_OK(FailoverHost(config_, "fo_p", FailoverOptions{}).status());
    ASSERT_TRUE(WaitFor(
        [&] { return Ask(*primary_, "SELECT epoch FROM cellar_fo_p.topology") == "2"; }, 10s));
    std::string sql =
        "STOP SLAVE; SET sql_log_bin = 0;"
        " REPLACE INTO cellar_fo_p.semi_sync_heartbeat (id, at_us, semi_sync_on, timeout_ms, epoch)"
        " VALUES (1, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED), 1, 10000, 1);";
    if (stale_row)
      sql += " UPDATE cellar_fo_p.topology SET epoch = 1, primary_server = '" + Label(*primary_) +
             "';";
    ASSERT_TRUE(primary_->Execute(sql));
    replica_->Kill();
  }

  static int64_t Cells(const PrivateMariaDb& db) {
    std::string n = Ask(db, "SELECT COUNT(*) FROM cellar_fo_p.cells_trips");
    return n.empty() ? -1 : std::stoll(n);
  }

  CellWrite Write(int i) { return CellWrite{Uuid::Random(), "BASE", 1, nlohmann::json{{"i", i}}}; }

  // Every acknowledged write reads back with its body from the store.
  void ExpectReadable(const std::vector<CellWrite>& acked) {
    size_t missing = 0;
    for (const CellWrite& w : acked) {
      Result<Cell> c = store_->Get("trips", w.row_key, "BASE", 1);
      if (!c.ok() || c->body != w.body) ++missing;
    }
    EXPECT_EQ(0u, missing) << "of " << acked.size() << " acknowledged writes";
  }

  // The replica's lag gauge and the replica-read counter of store_.
  double ReplicaLag() {
    return metrics_
        .GetGauge("cellar_mysql_replica_lag_seconds", "",
                  {{"host", "fo_p"}, {"server", Label(*replica_)}})
        .value();
  }
  uint64_t ReplicaReads() { return metrics_.GetCounter("cellar_replica_reads_total", "").value(); }

  MetricsRegistry metrics_;
  std::unique_ptr<PrivateMariaDb> primary_, replica_;
  std::string yaml_;
  ClusterConfig config_;
  std::unique_ptr<CellStore> store_;
};

TEST_F(HostFailoverTest, InitMakesAReplicatingLosslessHost) {
  StartServers();
  EXPECT_EQ("0", Ask(*primary_, "SELECT @@read_only"));
  EXPECT_EQ("1", Ask(*replica_, "SELECT @@read_only"));
  EXPECT_EQ("AFTER_SYNC", Ask(*primary_, "SELECT @@rpl_semi_sync_master_wait_point"));
  ASSERT_OK(store_->Put("trips", Write(1)).status());
  // The put was answered after the replica acknowledged it (AFTER_SYNC).
  EXPECT_EQ("ON", Ask(*primary_,
                      "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
                      " WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS'"));
  EXPECT_TRUE(WaitFor([&] { return Cells(*replica_) == 1; }, 10s));
  EXPECT_EQ("1\t" + Label(*primary_),
            Ask(*replica_, "SELECT epoch, primary_server FROM cellar_fo_p.topology"));
  EXPECT_EQ(1u, store_->topology().Current(0).epoch);
}

TEST_F(HostFailoverTest, BadInputIsRefusedAndChangesNothing) {
  StartServers();
  // A second host without replicas, never started: refused before any server is asked.
  ClusterConfig two = config_;
  MysqlHostConfig other;
  other.name = "lonely";
  other.port = 1;  // nothing listens there
  two.mysql.hosts.push_back(other);
  struct Case {
    std::string host, to, says;
    int64_t catch_up_timeout_ms = 30000;
  } cases[] = {
      {"nope", "", "no host 'nope'"},
      {"fo_p", "127.0.0.1:1", "belongs to host lonely"},
      {"fo_p", "10.9.9.9:3306", "is not a server of host fo_p"},
      {"lonely", "", "host lonely has no replicas"},
      {"fo_p", "", "catch_up_timeout_ms must be positive (got 0)", 0},
      {"fo_p", "", "catch_up_timeout_ms must be positive (got -5)", -5},
  };
  for (const Case& c : cases) {
    Result<FailoverReport> r =
        FailoverHost(two, c.host, FailoverOptions{c.to, false, c.catch_up_timeout_ms});
    ASSERT_FALSE(r.ok()) << c.host << " --to " << c.to;
    EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code()) << r.status().ToString();
    EXPECT_NE(std::string::npos, r.status().message().find(c.says)) << r.status().ToString();
  }
  EXPECT_EQ("0", Ask(*primary_, "SELECT @@read_only"));
  EXPECT_EQ("1", Ask(*primary_, "SELECT epoch FROM cellar_fo_p.topology"));
  ASSERT_OK(store_->Put("trips", Write(2)).status());
  // The target already is the primary: nothing to do.
  Result<FailoverReport> same = FailoverHost(config_, "fo_p", FailoverOptions{Label(*primary_)});
  ASSERT_OK(same.status());
  EXPECT_EQ("none", same->kind);
  EXPECT_EQ(1u, same->epoch_after);
}

TEST_F(HostFailoverTest, PlannedFailoverUnderLoadFailsNoWrite) {
  StartServers();
  // A position token issued before the failover.
  const CellWrite before = Write(-1);
  Result<PutResult> put = store_->Put("trips", before);
  ASSERT_OK(put.status());
  const std::string token = EncodeLogPosition(config_, "trips", put->shard, put->added_id);
  testing::PutLoad load(store_.get(), 8);
  ASSERT_TRUE(WaitFor([&] { return load.acked() > 200; }, 30s));
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", FailoverOptions{});
  ASSERT_OK(r.status());
  EXPECT_EQ("planned", r->kind);
  EXPECT_EQ(Label(*replica_), r->to);
  EXPECT_EQ(2u, r->epoch_after);
  const size_t at_switch = load.acked();
  ASSERT_TRUE(WaitFor([&] { return load.acked() > at_switch + 200; }, 30s));
  load.Stop();
  std::cerr << "planned failover: " << load.acked_.size() << " writes, longest " << load.max_ms_
            << " ms, writes stopped " << r->writes_stopped_ms << " ms\n";
  EXPECT_TRUE(load.failed_.empty())
      << load.failed_.size() << " failed, first " << load.failed_.front().ToString();
  ExpectReadable(load.acked_);
  // The old primary is read-only and replicates from the new one.
  EXPECT_EQ("1", Ask(*primary_, "SELECT @@read_only"));
  EXPECT_EQ("0", Ask(*replica_, "SELECT @@read_only"));
  EXPECT_TRUE(WaitFor([&] { return Cells(*primary_) == Cells(*replica_); }, 10s));
  EXPECT_EQ(2u, store_->topology().Current(0).epoch);
  // The token still names its write: a replica read (now the old primary)
  // given it reads the cell.
  const uint64_t replica_reads = ReplicaReads();
  Result<Cell> read =
      store_->Get("trips", before.row_key, "BASE", 1, ReadOptions{ReadPreference::kReplica, token});
  ASSERT_OK(read.status());
  EXPECT_EQ(before.body, read->body);
  EXPECT_EQ(replica_reads + 1, ReplicaReads());
  // Running it again with the same target changes nothing.
  Result<FailoverReport> again = FailoverHost(config_, "fo_p", FailoverOptions{Label(*replica_)});
  ASSERT_OK(again.status());
  EXPECT_EQ("none", again->kind);
}

// KILL CONNECTION returns before a killed connection that is committing has
// ended: its commit can still reach the binlog afterwards (its client sees
// "Lost connection"). Found in CI: a semi-sync heartbeat, which Cellar's user
// may write through read_only, committed on the old primary after the fence
// had read its GTID position, so the new primary lacked it and the old one
// could no longer replicate from it. These tests make the primary read_only
// already (so the fence's own read_only does not wait for the commit) and
// every commit wait `commit_wait_ms` in the binlog group commit: the fence
// kills one mid-commit. The INSERT's client is killed; the test reads its
// outcome from the servers.
class FenceInterruptsACommitTest : public HostFailoverTest {
 protected:
  void StartCommit(int commit_wait_ms) {
    StartServers();
    ASSERT_TRUE(primary_->Execute("CREATE TABLE cellar_fo_p.late_commit (id INT PRIMARY KEY)"));
    ASSERT_TRUE(WaitFor([&] { return LateRows(*replica_) == "0"; }, 10s));
    ASSERT_TRUE(
        primary_->Execute("SET GLOBAL read_only = ON, GLOBAL binlog_commit_wait_count = 1000,"
                          " GLOBAL binlog_commit_wait_usec = " +
                          std::to_string(commit_wait_ms * 1000)));
    late_ = std::thread(
        [&] { (void)primary_->Execute("INSERT INTO cellar_fo_p.late_commit VALUES (1)"); });
    ASSERT_TRUE(WaitFor(
        [&] {
          return Ask(*primary_,
                     "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Commit'"
                     " AND INFO LIKE 'INSERT INTO cellar_fo_p.late_commit%'") == "1";
        },
        10s))
        << "the INSERT never reached its commit";
  }
  void TearDown() override {
    if (late_.joinable()) late_.join();
  }
  static std::string LateRows(const PrivateMariaDb& db) {
    return Ask(db, "SELECT COUNT(*) FROM cellar_fo_p.late_commit");
  }
  std::thread late_;
};

TEST_F(FenceInterruptsACommitTest, PlannedFailoverKeepsIt) {
  ASSERT_NO_FATAL_FAILURE(StartCommit(2000));
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", FailoverOptions{});
  ASSERT_OK(r.status());
  EXPECT_EQ("planned", r->kind);
  ASSERT_TRUE(primary_->Execute("SET GLOBAL binlog_commit_wait_count = 0"));
  // Committed on the old primary, so the new one holds it too.
  EXPECT_EQ("1", LateRows(*primary_));
  EXPECT_EQ("1", LateRows(*replica_));
  // And the old primary replicates from the new one.
  ASSERT_OK(store_->Put("trips", Write(1)).status());
  EXPECT_TRUE(WaitFor([&] { return Cells(*primary_) == 1 && Cells(*replica_) == 1; }, 10s))
      << Ask(*primary_, "SHOW SLAVE STATUS");
}

TEST_F(FenceInterruptsACommitTest, OneOutlastingTheCatchUpTimeoutRefusesTheFailover) {
  ASSERT_NO_FATAL_FAILURE(StartCommit(4000));
  FailoverOptions options;
  options.catch_up_timeout_ms = 1000;
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(StatusCode::kDeadlineExceeded, r.status().code()) << r.status().ToString();
  EXPECT_NE(std::string::npos,
            r.status().message().find("still run 1000 ms after they were killed"))
      << r.status().ToString();
  EXPECT_NE(std::string::npos, r.status().message().find("nothing changed"))
      << r.status().ToString();
  // The commit lands on the primary, which still is the primary.
  EXPECT_TRUE(WaitFor([&] { return LateRows(*replica_) == "1"; }, 10s));
  ASSERT_TRUE(primary_->Execute("SET GLOBAL binlog_commit_wait_count = 0"));
  EXPECT_EQ("0", Ask(*primary_, "SELECT @@read_only"));
  ASSERT_OK(store_->Put("trips", Write(1)).status());
}

TEST_F(HostFailoverTest, EmergencyFailoverKeepsEveryAcknowledgedWrite) {
  StartServers();
  testing::PutLoad load(store_.get(), 8);
  ASSERT_TRUE(WaitFor([&] { return load.acked() > 200; }, 30s));
  // The heartbeat that proves no loss: the store's first one waits for the
  // topology `Init` wrote, and 200 puts can be acknowledged before it (CI).
  ASSERT_TRUE(WaitFor([&] { return Heartbeat(*replica_) == "1\t1"; }, 30s));
  primary_->Kill();
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", FailoverOptions{});
  ASSERT_OK(r.status());
  EXPECT_EQ("emergency", r->kind);
  EXPECT_TRUE(r->loss_ruled_out);
  const size_t at_switch = load.acked();
  ASSERT_TRUE(WaitFor([&] { return load.acked() > at_switch + 200; }, 30s));
  load.Stop();
  std::cerr << "emergency failover: " << load.acked_.size() << " writes, longest " << load.max_ms_
            << " ms, " << load.failed_.size() << " failed\n";
  for (const Status& st : load.failed_)
    EXPECT_EQ(StatusCode::kUnavailable, st.code()) << st.ToString();
  ExpectReadable(load.acked_);

  // The old primary comes back writable by mistake: nothing reaches it.
  primary_->options().init_rpl_role = "SLAVE";
  primary_->Restart();
  ASSERT_TRUE(primary_->Execute("SET GLOBAL read_only = OFF"));
  const int64_t before = Cells(*primary_);
  auto fresh = CellStore::Open(config_);  // a process started after the failover
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK(store_->Put("trips", Write(i)).status());
    ASSERT_OK(fresh->Put("trips", Write(i)).status());
  }
  EXPECT_EQ(before, Cells(*primary_));
  EXPECT_EQ(2u, fresh->topology().Current(0).epoch);

  // It rejoins as a replica: made read-only again and pointed at the primary.
  Result<FailoverReport> rejoin = FailoverHost(config_, "fo_p", FailoverOptions{Label(*replica_)});
  ASSERT_OK(rejoin.status());
  EXPECT_EQ("none", rejoin->kind);
  EXPECT_EQ(std::vector<std::string>{Label(*primary_)}, rejoin->repointed);
  EXPECT_EQ(std::vector<std::string>{Label(*primary_)}, rejoin->fenced);
  EXPECT_TRUE(rejoin->diverged.empty());
  EXPECT_EQ("1", Ask(*primary_, "SELECT @@read_only"));
  ASSERT_OK(store_->Put("trips", Write(1000)).status());
  EXPECT_TRUE(WaitFor([&] { return Cells(*primary_) == Cells(*replica_); }, 10s));

  // A commit made on it by hand (root passes read_only) is one the primary
  // lacks: such a server is not pointed at the primary again.
  ASSERT_TRUE(primary_->Execute("STOP SLAVE; RESET SLAVE ALL; CREATE DATABASE stray_by_hand"));
  Result<FailoverReport> refused = FailoverHost(config_, "fo_p", FailoverOptions{Label(*replica_)});
  ASSERT_OK(refused.status());
  EXPECT_TRUE(refused->repointed.empty());
  EXPECT_EQ(std::vector<std::string>{Label(*primary_)}, refused->diverged);
}

TEST_F(HostFailoverTest, EmergencyIsRefusedWhenSemiSyncHadFallenBack) {
  StartServers(/*semi_sync_timeout_ms=*/300);
  ASSERT_OK(store_->Put("trips", Write(0)).status());
  ASSERT_TRUE(WaitFor([&] { return Cells(*replica_) == 1; }, 10s));
  // The replica stops receiving: the primary falls back to asynchronous
  // commits and keeps acknowledging writes the replica never gets.
  ASSERT_TRUE(replica_->Execute("STOP SLAVE"));
  for (int i = 1; i <= 5; ++i) ASSERT_OK(store_->Put("trips", Write(i)).status());
  primary_->Kill();
  ASSERT_TRUE(replica_->Execute("START SLAVE"));
  Result<FailoverReport> refused = FailoverHost(config_, "fo_p", FailoverOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, refused.status().code())
      << refused.status().ToString();
  EXPECT_NE(std::string::npos, refused.status().message().find("--accept-loss"))
      << refused.status().ToString();
  // Nothing changed: still a read-only replica at epoch 1.
  EXPECT_EQ("1", Ask(*replica_, "SELECT @@read_only"));
  EXPECT_EQ("1", Ask(*replica_, "SELECT epoch FROM cellar_fo_p.topology"));

  FailoverOptions accept;
  accept.accept_loss = true;
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", accept);
  ASSERT_OK(r.status());
  EXPECT_FALSE(r->loss_ruled_out);
  EXPECT_FALSE(r->may_be_lost.empty());
  std::cerr << "accepted loss: " << r->may_be_lost << "\n";
  EXPECT_EQ(1, Cells(*replica_));  // the five async commits are the loss
  ASSERT_OK(store_->Put("trips", Write(9)).status());
}

// Only a heartbeat of the failed primary's own epoch speaks for the commits
// it acknowledged: one its predecessor wrote is no proof.
TEST_F(HostFailoverTest, EmergencyRefusesAHeartbeatOfAnEarlierPrimary) {
  StartServers();
  ASSERT_NO_FATAL_FAILURE(StrandTheFormerPrimary(/*stale_row=*/false));
  Result<FailoverReport> refused = FailoverHost(config_, "fo_p", FailoverOptions{});
  ASSERT_FALSE(refused.ok()) << "loss ruled out on the heartbeat of epoch 1";
  EXPECT_EQ(StatusCode::kFailedPrecondition, refused.status().code())
      << refused.status().ToString();
  EXPECT_NE(std::string::npos, refused.status().message().find("primary of epoch 1"))
      << refused.status().ToString();

  FailoverOptions accept;
  accept.accept_loss = true;
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", accept);
  ASSERT_OK(r.status());
  EXPECT_EQ("emergency", r->kind);
  EXPECT_FALSE(r->loss_ruled_out);
  EXPECT_EQ(3u, r->epoch_after);
  EXPECT_EQ("3\t" + Label(*primary_),
            Ask(*primary_, "SELECT epoch, primary_server FROM cellar_fo_p.topology"));
}

// A server replicating from another than the primary its topology row names
// missed the failover's row: the host's primary is the server it replicates
// from, and the new epoch is past that failover's.
TEST_F(HostFailoverTest, EmergencyFollowsWhereAServerReplicatesFromPastAStaleTopologyRow) {
  StartServers();
  ASSERT_NO_FATAL_FAILURE(StrandTheFormerPrimary(/*stale_row=*/true));
  Result<FailoverReport> refused = FailoverHost(config_, "fo_p", FailoverOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, refused.status().code())
      << refused.status().ToString();
  EXPECT_NE(std::string::npos, refused.status().message().find("--accept-loss"))
      << refused.status().ToString();

  FailoverOptions accept;
  accept.accept_loss = true;
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", accept);
  ASSERT_OK(r.status());
  EXPECT_EQ("emergency", r->kind);
  EXPECT_EQ(Label(*replica_), r->from);
  EXPECT_EQ(3u, r->epoch_after);
  EXPECT_EQ("3\t" + Label(*primary_),
            Ask(*primary_, "SELECT epoch, primary_server FROM cellar_fo_p.topology"));
  ASSERT_OK(store_->Put("trips", Write(9)).status());
}

// A replica whose SQL thread was stopped (by an operator) holds acknowledged
// transactions it received but did not apply: the emergency failover starts
// its SQL thread to apply them instead of waiting for a position it cannot reach.
TEST_F(HostFailoverTest, EmergencyAppliesWhatAStoppedSqlThreadLeftInTheRelayLog) {
  StartServers();
  ASSERT_TRUE(replica_->Execute("STOP SLAVE SQL_THREAD"));
  std::vector<CellWrite> acked;
  for (int i = 0; i < 20; ++i) {
    acked.push_back(Write(i));
    ASSERT_OK(store_->Put("trips", acked.back()).status());
  }
  EXPECT_EQ(0, Cells(*replica_)) << "the replica applied with its SQL thread stopped";
  // The heartbeat that proves no loss (here in the replica's relay log).
  ASSERT_TRUE(WaitFor([&] { return Heartbeat(*primary_) == "1\t1"; }, 10s));
  primary_->Kill();
  Result<FailoverReport> r = FailoverHost(config_, "fo_p", FailoverOptions{});
  ASSERT_OK(r.status());
  EXPECT_EQ("emergency", r->kind);
  EXPECT_TRUE(r->loss_ruled_out);
  EXPECT_EQ(20, Cells(*replica_));
  ExpectReadable(acked);
}

// A catch-up longer than a statement's io timeout is waited for in slices:
// it ends DeadlineExceeded after catch_up_timeout_ms, not in a dropped
// connection after io_timeout, and the primary is reopened.
TEST_F(HostFailoverTest, PlannedCatchUpPastItsTimeoutIsRefusedAndChangesNothing) {
  StartServers();
  ASSERT_TRUE(replica_->Execute("STOP SLAVE SQL_THREAD"));
  ASSERT_OK(store_->Put("trips", Write(0)).status());
  ClusterConfig short_io = config_;
  short_io.mysql.io_timeout_ms = 1000;
  FailoverOptions options;
  options.catch_up_timeout_ms = 2500;
  Result<FailoverReport> r = FailoverHost(short_io, "fo_p", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(StatusCode::kDeadlineExceeded, r.status().code()) << r.status().ToString();
  EXPECT_NE(std::string::npos, r.status().message().find("within 2500 ms"))
      << r.status().ToString();
  EXPECT_NE(std::string::npos, r.status().message().find("nothing changed"))
      << r.status().ToString();
  EXPECT_EQ("0", Ask(*primary_, "SELECT @@read_only"));
  ASSERT_TRUE(replica_->Execute("START SLAVE SQL_THREAD"));
  ASSERT_OK(store_->Put("trips", Write(1)).status());
}

// Reads from a replica: stale while it does not apply, its lag gauge growing;
// with a write's position the read waits until the replica holds the write.
TEST_F(HostFailoverTest, ReplicaReadsAreBoundedByLagAndReadYourWritesWithAPosition) {
  StartServers();
  ReadOptions replica;
  replica.preference = ReadPreference::kReplica;
  const CellWrite first = Write(1);
  ASSERT_OK(store_->Put("trips", first).status());
  ASSERT_TRUE(
      WaitFor([&] { return store_->Get("trips", first.row_key, "BASE", 1, replica).ok(); }, 10s));
  ASSERT_TRUE(WaitFor([&] { return ReplicaLag() >= 0 && ReplicaLag() < 1; }, 10s))
      << "lag " << ReplicaLag();

  // The replica still receives (and acknowledges) but stops applying.
  ASSERT_TRUE(replica_->Execute("STOP SLAVE SQL_THREAD"));
  const CellWrite second = Write(2);
  Result<PutResult> put = store_->Put("trips", second);
  ASSERT_OK(put.status());
  EXPECT_EQ(StatusCode::kNotFound,
            store_->Get("trips", second.row_key, "BASE", 1, replica).status().code());
  ASSERT_OK(store_->Get("trips", second.row_key, "BASE", 1).status());  // the primary has it
  ASSERT_TRUE(WaitFor([&] { return ReplicaLag() > 1.5; }, 10s)) << "lag " << ReplicaLag();

  ReadOptions after = replica;
  after.after = EncodeLogPosition(config_, "trips", put->shard, put->added_id);
  const uint64_t served = ReplicaReads();
  // Applying resumes while the read waits for the write's position.
  std::thread resume([&] {
    std::this_thread::sleep_for(300ms);  // let the read start waiting first
    replica_->Execute("START SLAVE SQL_THREAD");
  });
  const auto start = std::chrono::steady_clock::now();
  Result<Cell> got = store_->Get("trips", second.row_key, "BASE", 1, after);
  const auto waited = std::chrono::steady_clock::now() - start;
  resume.join();
  ASSERT_OK(got.status());
  EXPECT_EQ(second.body, got->body);
  EXPECT_EQ(served + 1, ReplicaReads()) << "served by the primary, not the replica";
  EXPECT_GE(waited, 250ms);
  ASSERT_TRUE(WaitFor([&] { return ReplicaLag() >= 0 && ReplicaLag() < 1; }, 10s))
      << "lag " << ReplicaLag();

  // A token of another datastore is refused.
  ReadOptions wrong = replica;
  wrong.after = EncodeLogPosition(config_, "users", put->shard, put->added_id);
  EXPECT_EQ(StatusCode::kInvalidArgument,
            store_->Get("trips", second.row_key, "BASE", 1, wrong).status().code());
}

// Index queries with read preference replica (IndexQuery::read): stale
// while the replica does not apply; with a put's position they wait until
// the replica caught up with its primary, or read the primary when it does
// not in time; verify re-reads the cells where the entries were read.
TEST_F(HostFailoverTest, IndexQueriesReadTheReplicaAndTheirWritesWithAPosition) {
  StartServers();
  Result<std::vector<IndexDefinition>> defs = ParseIndexDefinitions(
      "table: trips_by_driver\n"
      "datastore: trips\n"
      "column_defs:\n"
      "  - column_key: BASE\n"
      "    fields:\n"
      "      - { field: driver, type: UUID }\n"
      "      - { field: status, type: string }\n",
      "<test>", config_);
  ASSERT_OK(defs.status());
  const IndexDefinition def = defs->front();
  IndexCatalog catalog(store_.get());
  Result<ApplyOutcome> applied = catalog.Apply(def);
  ASSERT_OK(applied.status());
  IndexWriter writer(store_.get(), /*probe=*/nullptr);
  const std::vector<IndexVersionRef> versions{{&def, applied->version.version}};
  // Puts (row, BASE, ref_key) as a trip of `driver` and applies it to the
  // index as the index worker does (entries and the applied position in one
  // transaction on the primary); returns the put's position token.
  auto put_indexed = [&](const Uuid& row, int64_t ref_key,
                         const Uuid& driver) -> Result<std::string> {
    const CellWrite w{row, "BASE", ref_key, {{"driver", driver.ToString()}, {"status", "open"}}};
    CELLAR_ASSIGN_OR_RETURN(PutResult put, store_->Put("trips", w));
    CELLAR_ASSIGN_OR_RETURN(Cell cell, store_->Get("trips", row, "BASE", ref_key));
    CELLAR_RETURN_IF_ERROR(
        writer.ApplyBatch("trips", versions, {&cell}, /*record_positions=*/true).status());
    return EncodeLogPosition(config_, "trips", put.shard, put.added_id);
  };
  const Uuid driver = Uuid::Random(), other = Uuid::Random();
  IndexReader reader(store_.get(), {def});
  // The rows of `driver`'s hits (with `dropped`, the count verify dropped).
  auto rows_of = [&](IndexReader& r, ReadPreference read, const std::string& after,
                     bool verify = false, int* dropped = nullptr) -> Result<std::set<Uuid>> {
    IndexQuery q;
    q.index = def.table;
    q.shard_value = driver.ToString();
    q.read = read;
    q.after = after;
    q.verify = verify;
    CELLAR_ASSIGN_OR_RETURN(IndexQueryResult result, r.Query(q));
    if (dropped) *dropped = result.dropped_by_verify;
    std::set<Uuid> rows;
    for (const IndexHit& h : result.hits) rows.insert(h.row_key);
    return rows;
  };
  auto replica_rows = [&](IndexReader& r, const std::string& after = "") {
    return rows_of(r, ReadPreference::kReplica, after);
  };
  // How many MASTER_GTID_WAIT()s are waiting on the replica now.
  auto gtid_waits = [&] {
    return Ask(*replica_,
               "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
               " WHERE INFO LIKE 'SELECT MASTER_GTID_WAIT%'");
  };

  const Uuid first = Uuid::Random();
  ASSERT_OK(put_indexed(first, 1, driver).status());
  // Served by the replica once it answered a topology refresh and applied the entry.
  const uint64_t before = ReplicaReads();
  ASSERT_TRUE(WaitFor(
      [&] {
        Result<std::set<Uuid>> rows = replica_rows(reader);
        return rows.ok() && rows->count(first) == 1;
      },
      10s));
  EXPECT_GT(ReplicaReads(), before);

  // The replica still receives (and acknowledges) but stops applying.
  ASSERT_TRUE(replica_->Execute("STOP SLAVE SQL_THREAD"));
  const Uuid second = Uuid::Random();
  Result<std::string> second_at = put_indexed(second, 1, driver);
  ASSERT_OK(second_at.status());
  uint64_t served = ReplicaReads();
  Result<std::set<Uuid>> stale = replica_rows(reader);
  ASSERT_OK(stale.status());
  EXPECT_EQ(std::set<Uuid>{first}, *stale) << "the replica's entries are not stale";
  EXPECT_EQ(served + 1, ReplicaReads()) << "not served by the replica";
  Result<std::set<Uuid>> fresh = rows_of(reader, ReadPreference::kPrimary, "");
  ASSERT_OK(fresh.status());
  EXPECT_EQ((std::set<Uuid>{first, second}), *fresh);
  EXPECT_EQ(served + 1, ReplicaReads()) << "a primary read counted as a replica read";

  // `first` moves to another driver: its entry and cell change on the primary
  // only. verify re-reads the cell on the replica, which agrees with the
  // replica's entry (read on the primary, the cell would drop the hit).
  ASSERT_OK(put_indexed(first, 2, other).status());
  int dropped = -1;
  Result<std::set<Uuid>> verified = rows_of(reader, ReadPreference::kReplica, "", true, &dropped);
  ASSERT_OK(verified.status());
  EXPECT_EQ(std::set<Uuid>{first}, *verified);
  EXPECT_EQ(0, dropped);
  Result<std::set<Uuid>> verified_primary =
      rows_of(reader, ReadPreference::kPrimary, "", true, &dropped);
  ASSERT_OK(verified_primary.status());
  EXPECT_EQ(std::set<Uuid>{second}, *verified_primary);

  // With the put's position, a replica that does not catch up within
  // limits.index_wait leaves the query to the primary, which has the put.
  ClusterConfig short_wait = config_;
  short_wait.limits.index_wait_ms = 300;
  MetricsRegistry short_metrics;
  auto short_store = CellStore::Open(short_wait, &short_metrics);
  IndexReader short_reader(short_store.get(), {def});
  auto short_replica_reads = [&] {
    return short_metrics.GetCounter("cellar_replica_reads_total", "").value();
  };
  // This store knows the replica (it serves a read without a position) ...
  ASSERT_TRUE(
      WaitFor([&] { return replica_rows(short_reader).ok() && short_replica_reads() > 0; }, 10s));
  const uint64_t short_served = short_replica_reads();
  const auto start = std::chrono::steady_clock::now();
  Result<std::set<Uuid>> fallback = replica_rows(short_reader, *second_at);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_OK(fallback.status());
  // ... and read the primary: the moved `first` is gone, `second` is there.
  EXPECT_EQ(std::set<Uuid>{second}, *fallback);
  EXPECT_EQ(short_served, short_replica_reads()) << "the stale replica answered";
  EXPECT_GE(waited, 250ms) << "did not wait for the replica to catch up";
  short_store.reset();

  // Applying resumes while the query waits for the replica to catch up: the
  // replica answers, with the put and the move.
  served = ReplicaReads();
  Result<std::set<Uuid>> caught_up = Internal("not run");
  std::thread query([&] { caught_up = replica_rows(reader, *second_at); });
  const bool waiting = WaitFor([&] { return gtid_waits() == "1"; }, 10s);
  const bool resumed = replica_->Execute("START SLAVE SQL_THREAD");
  query.join();
  ASSERT_TRUE(resumed);
  EXPECT_TRUE(waiting) << "the query did not wait on the replica (MASTER_GTID_WAIT)";
  ASSERT_OK(caught_up.status());
  EXPECT_EQ(std::set<Uuid>{second}, *caught_up);
  EXPECT_EQ(served + 1, ReplicaReads()) << "served by the primary, not the replica";
}

}  // namespace
}  // namespace cellar
