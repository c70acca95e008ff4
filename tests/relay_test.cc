// Integration tests of the change-log relay (changelog/relay.h) running in this
// process, against a private MariaDB, the local Kafka-protocol broker and a
// real librdkafka consumer. Relay processes: relay_process_test.cc.
#include "changelog/relay.h"

#include <algorithm>
#include <future>
#include <iostream>

#include "cells/body_codec.h"
#include "cells/mysql_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/relay_test_util.h"

namespace cellar::relaytest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

// The first occurrence of each id, in arrival order.
std::vector<uint64_t> FirstOccurrences(const std::vector<uint64_t>& seq) {
  std::set<uint64_t> seen;
  std::vector<uint64_t> out;
  for (uint64_t id : seq)
    if (seen.insert(id).second) out.push_back(id);
  return out;
}

void ReportDuplicates(const std::string& test, const Collector& c) {
  const size_t dups = c.total() - c.distinct();
  std::cout << "[ relay ] " << test << ": " << c.distinct() << " distinct events, " << dups
            << " duplicates\n";
  ::testing::Test::RecordProperty("duplicates", std::to_string(dups));
}

// A raw transaction that takes the shard's commit lock exactly like the store
// (cells/internal/batch_transaction.cc) and inserts one cell, left open.
class RawTransaction {
 public:
  RawTransaction(const ClusterConfig& config, uint32_t shard) : config_(config), shard_(shard) {
    auto c = MysqlConnection::Connect(EndpointFor(config, config.HostForShard(shard)));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) conn_ = std::move(c).value();
  }

  // Returns the added_id of the inserted cell (0 on failure).
  uint64_t BeginAndInsert(const CellWrite& w) {
    if (!conn_) return 0;
    const std::string db = config_.ShardDatabase(shard_);
    Status s = conn_->Begin();
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto locked = conn_->Query(
        "SELECT datastore FROM `" + db + "`.`commit_order` WHERE datastore = ? FOR UPDATE",
        {std::string(kDatastore)});
    EXPECT_TRUE(locked.ok() && locked->size() == 1) << locked.status().ToString();
    auto inserted = conn_->Execute(
        "INSERT INTO " + QualifiedTable(db, std::string("cells_") + kDatastore) +
            " (row_key, column_name, ref_key, body, tombstone, created_at)"
            " VALUES (?,?,?,?,?,?)",
        {w.row_key.ToBytes(), w.column, w.ref_key, EncodeBody(w.body), int64_t{0}, NowMicros()});
    EXPECT_TRUE(inserted.ok()) << inserted.status().ToString();
    auto id = conn_->LastInsertId();
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  Status Commit() { return conn_->Commit(); }
  void Rollback() { conn_->Rollback(); }

 private:
  const ClusterConfig& config_;
  uint32_t shard_;
  std::unique_ptr<MysqlConnection> conn_;  // closing it rolls back an open transaction
};

// Puts `n` cells on `shard` and returns their ids.
std::vector<CellId> PutOnShard(CellStore& store, uint32_t shard, int n, const std::string& tag) {
  std::vector<CellId> ids;
  for (int i = 0; i < n; ++i) {
    auto r = store.Put(kDatastore, MakeCell(RowOnShard(shard), 0, tag));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) ids.emplace_back(r->shard, r->added_id);
  }
  return ids;
}

// ---------------------------------------------------------------------------

TEST(RelayTest, ConcurrentWritersEveryCellArrivesAndRowsStayInOrder) {
  auto c = MakeCluster("rt_load", Broker());
  ASSERT_TRUE(c);
  Relay relay(c->store.get(), "load");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(c->config);

  // 8 threads x 500 rows x 5 versions = 8 x 2,500 cells.
  const auto start = std::chrono::steady_clock::now();
  Writers writers(c->store.get(), 8, 500, 5, "load");
  writers.Join();
  const auto wrote = std::chrono::steady_clock::now();
  EXPECT_EQ(writers.failures(), 0u) << writers.first_error();
  const std::vector<CellId> written = writers.Written();
  EXPECT_EQ(written.size(), 20000u);
  std::set<uint32_t> shards;
  for (const auto& id : written) shards.insert(id.first);
  EXPECT_EQ(shards.size(), kShards);

  const std::vector<CellId> missing = WaitForAll(collector, written, 60s);
  EXPECT_THAT(missing, IsEmpty()) << "never published: " << Describe(missing);
  std::cout << "[ relay ] 20,000 cells written in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(wrote - start).count()
            << " ms, all consumed after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count()
            << " ms\n";
  const auto violations = OrderViolations(collector.Events());
  EXPECT_THAT(violations, IsEmpty())
      << violations.size()
      << " out-of-order versions, first: " << (violations.empty() ? "" : violations.front());
  EXPECT_TRUE(WaitFor([&] { return AllCheckpointsAtHead(*c->store); }, 10s))
      << "checkpoints did not reach the shard heads";
  ReportDuplicates("ConcurrentWriters", collector);
  relay.Stop();
}

TEST(RelayTest, UncommittedTransactionHoldsItsShardBackUntilCommit) {
  auto c = MakeCluster("rt_gap", Broker());
  ASSERT_TRUE(c);
  CellStore& store = *c->store;
  Relay relay(&store, "gap");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(c->config);
  constexpr uint32_t kShard = 5, kOtherShard = 6;

  // The shard's published head before the held transaction.
  const std::vector<CellId> before = PutOnShard(store, kShard, 3, "before");
  ASSERT_THAT(WaitForAll(collector, before, 20s), IsEmpty());
  auto head = store.ShardHead(kDatastore, kShard);
  ASSERT_TRUE(head.ok());
  const uint64_t head0 = *head;
  ASSERT_TRUE(WaitFor([&] { return Checkpoint(store, kShard).after_added_id >= head0; }, 10s));

  // Declared before the transaction: on an early exit the connection closes
  // (rolling back) before these futures wait for their blocked puts.
  std::vector<std::future<Result<PutResult>>> blocked;
  RawTransaction held(c->config, kShard);
  const uint64_t held_id = held.BeginAndInsert(MakeCell(RowOnShard(kShard), 0, "held"));
  ASSERT_GT(held_id, head0);

  // Later writers of the same shard queue behind the held commit lock.
  for (int i = 0; i < 3; ++i)
    blocked.push_back(std::async(std::launch::async, [&store] {
      return store.Put(kDatastore, MakeCell(RowOnShard(kShard), 0, "later"));
    }));
  // Another shard keeps flowing meanwhile, also when the group committer put
  // its first write in one transaction with the held shard's (regression: the
  // other shard stayed marked busy until the held shard's lock wait gave up,
  // ~36 s, and its later writes queued behind it).
  const auto other_start = std::chrono::steady_clock::now();
  const std::vector<CellId> other = PutOnShard(store, kOtherShard, 5, "other");
  EXPECT_LT(std::chrono::steady_clock::now() - other_start, 3s)
      << "writes to another shard waited for the held shard";

  // For 1.5 s nothing of the shard beyond head0 may be published or checkpointed.
  uint64_t max_published = 0, max_checkpoint = 0;
  const auto until = std::chrono::steady_clock::now() + 1500ms;
  while (std::chrono::steady_clock::now() < until) {
    max_published = std::max(max_published, collector.MaxAddedId(kShard));
    max_checkpoint = std::max(max_checkpoint, Checkpoint(store, kShard).after_added_id);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(max_published, head0) << "the relay published past the open transaction";
  EXPECT_EQ(max_checkpoint, head0) << "the checkpoint moved past the open transaction";
  EXPECT_THAT(WaitForAll(collector, other, 10s), IsEmpty()) << "another shard was stalled";
  for (auto& f : blocked)
    EXPECT_EQ(f.wait_for(0ms), std::future_status::timeout)
        << "a put committed while the shard's commit lock was held";

  ASSERT_TRUE(held.Commit().ok());
  std::vector<CellId> want = {{kShard, held_id}};
  for (auto& f : blocked) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GT(r->added_id, held_id);
    want.emplace_back(r->shard, r->added_id);
  }
  const std::vector<CellId> missing = WaitForAll(collector, want, 20s);
  EXPECT_THAT(missing, IsEmpty()) << "never published: " << Describe(missing);
  // The shard's events after head0 arrive in added_id order, the held one first.
  const std::vector<uint64_t> seq = FirstOccurrences(collector.ShardSequence(kShard, head0));
  EXPECT_TRUE(std::is_sorted(seq.begin(), seq.end())) << ::testing::PrintToString(seq);
  ASSERT_FALSE(seq.empty());
  EXPECT_EQ(seq.front(), held_id);
  EXPECT_EQ(seq.size(), want.size()) << ::testing::PrintToString(seq);
  relay.Stop();
}

TEST(RelayTest, RolledBackTransactionDoesNotStallItsShard) {
  auto c = MakeCluster("rt_rollback", Broker());
  ASSERT_TRUE(c);
  CellStore& store = *c->store;
  Relay relay(&store, "rollback");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(c->config);
  constexpr uint32_t kShard = 9;

  ASSERT_THAT(WaitForAll(collector, PutOnShard(store, kShard, 2, "before"), 20s), IsEmpty());
  RawTransaction aborted(c->config, kShard);
  const uint64_t gap_id = aborted.BeginAndInsert(MakeCell(RowOnShard(kShard), 0, "aborted"));
  ASSERT_GT(gap_id, 0u);
  aborted.Rollback();  // added_id gap_id stays a hole forever

  const std::vector<CellId> after = PutOnShard(store, kShard, 3, "after");
  ASSERT_EQ(after.size(), 3u);
  EXPECT_GT(after.front().second, gap_id);
  EXPECT_THAT(WaitForAll(collector, after, 10s), IsEmpty()) << "shard stalled at the gap";
  EXPECT_FALSE(collector.Has({kShard, gap_id})) << "a rolled-back cell was published";
  EXPECT_TRUE(
      WaitFor([&] { return Checkpoint(store, kShard).after_added_id >= after.back().second; }, 10s))
      << "the checkpoint did not move past the gap";
  relay.Stop();
}

TEST(RelayTest, BrokerDownForFiveSecondsWritesSucceedAndEventsArriveAfterwards) {
  auto c = MakeCluster("rt_down", Broker());
  ASSERT_TRUE(c);
  Relay relay(c->store.get(), "down");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(c->config);
  std::vector<CellId> warm;
  for (uint32_t s = 0; s < kShards; ++s)
    for (const auto& id : PutOnShard(*c->store, s, 1, "warm")) warm.push_back(id);
  ASSERT_THAT(WaitForAll(collector, warm, 20s), IsEmpty());

  struct BrokerUp {  // brings the broker back even if an assertion fails
    ~BrokerUp() { Broker().SetDown(false); }
  } broker_up;
  Broker().SetDown(true);
  const auto down_at = std::chrono::steady_clock::now();
  std::vector<CellId> written;
  uint64_t failures = 0;
  {
    Writers writers(c->store.get(), 4, 0, 3, "down");
    // The outage lasts 5 s, with the writers running through all of it.
    std::this_thread::sleep_until(down_at + 5s);
    writers.Stop();
    writers.Join();
    written = writers.Written();
    failures = writers.failures();
    EXPECT_EQ(failures, 0u) << writers.first_error();
  }
  Broker().SetDown(false);
  const auto up_at = std::chrono::steady_clock::now();
  ASSERT_GT(written.size(), 100u) << "writes did not proceed while Kafka was down";

  const std::vector<CellId> missing = WaitForAll(collector, written, 60s);
  EXPECT_THAT(missing, IsEmpty()) << "never published: " << Describe(missing);
  std::cout << "[ relay ] " << written.size() << " cells written during a 5 s outage; caught up "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - up_at)
                   .count()
            << " ms after the broker returned\n";
  const auto violations = OrderViolations(collector.Events());
  EXPECT_THAT(violations, IsEmpty()) << violations.size() << " out-of-order versions";
  ReportDuplicates("BrokerDown", collector);
  relay.Stop();
}

// Publishes `cells` through a relay on `cluster`'s broker and waits until they
// are consumed and checkpointed.
void PublishAndCheckpoint(Cluster& cluster, const std::vector<CellId>& cells) {
  Relay relay(cluster.store.get(), "before-restart");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(cluster.config);
  ASSERT_THAT(WaitForAll(collector, cells, 30s), IsEmpty());
  ASSERT_TRUE(WaitFor([&] { return AllCheckpointsAtHead(*cluster.store); }, 10s));
  relay.Stop();
}

TEST(RelayTest, BrokerRestartLosingEverythingIsDetectedAndRepublished) {
  auto broker = testing::LocalBroker::Start();
  auto c = MakeCluster("rt_restart", *broker);
  ASSERT_TRUE(c);
  std::vector<CellId> written;
  {
    Writers writers(c->store.get(), 4, 50, 2, "restart");
    writers.Join();
    ASSERT_EQ(writers.failures(), 0u) << writers.first_error();
    written = writers.Written();
  }
  PublishAndCheckpoint(*c, written);
  ASSERT_FALSE(HasFatalFailure());

  // A new in-memory broker: new address, the topics recreated empty.
  broker->Restart();
  auto cfg = ParseClusterConfig(ClusterYaml(c->prefix, broker->bootstrap()), "<restarted>");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto store = CellStore::Open(*cfg);
  Relay relay(store.get(), "after-restart");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(*cfg);
  const std::vector<CellId> missing = WaitForAll(collector, written, 30s);
  EXPECT_THAT(missing, IsEmpty()) << "not republished to the new broker: " << Describe(missing);
  EXPECT_GT(relay.stats().republished_after_broker_loss, 0u);
  relay.Stop();
}

// Shards s and s + kPartitions share a partition. After a broker restart, a
// relay republishes shard 0 into partition 0 before shard 8 is adopted (here:
// its lock is held elsewhere for a while, as by a relay that is just stopping).
// By the time shard 8 is adopted, partition 0 is longer than shard 8's
// checkpointed offset, yet none of shard 8's events are on the new broker: a
// check of the partition end at adoption time alone misses the loss (the relay
// of 7e49621 failed this test; b025a68 checks every checkpoint at start-up).
TEST(RelayTest, BrokerRestartDetectedForShardAdoptedAfterItsPartitionWasRefilled) {
  constexpr uint32_t kLate = 8, kBusy = 0;  // both on partition 0
  static_assert(kLate % kPartitions == kBusy % kPartitions);
  auto broker = testing::LocalBroker::Start();
  auto c = MakeCluster("rt_refill", *broker);
  ASSERT_TRUE(c);
  // Shard 8's cells come first, so its checkpointed offset is small.
  std::vector<CellId> late = PutOnShard(*c->store, kLate, 5, "late");
  PublishAndCheckpoint(*c, late);
  ASSERT_FALSE(HasFatalFailure());
  // Then many more on shard 0 (same partition; no more on shard 8).
  const std::vector<CellId> busy = PutOnShard(*c->store, kBusy, 150, "busy");
  std::vector<CellId> all = late;
  all.insert(all.end(), busy.begin(), busy.end());
  PublishAndCheckpoint(*c, all);
  ASSERT_FALSE(HasFatalFailure());
  const int64_t late_offset = Checkpoint(*c->store, kLate).kafka_offset;
  ASSERT_GE(late_offset, 0);

  broker->Restart();
  auto cfg = ParseClusterConfig(ClusterYaml(c->prefix, broker->bootstrap()), "<restarted>");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto store = CellStore::Open(*cfg);
  // Keep shard 8 from being adopted until partition 0 holds more records than its checkpoint
  // offset.
  auto lock_conn = MysqlConnection::Connect(EndpointFor(*cfg, cfg->HostForShard(kLate)));
  ASSERT_TRUE(lock_conn.ok());
  auto got =
      (*lock_conn)->Query("SELECT GET_LOCK(?, 0)", {RelayLockName(cfg->ShardDatabase(kLate))});
  ASSERT_TRUE(got.ok() && (*got)[0].Int(0) == 1);

  Relay relay(store.get(), "after-restart");
  ASSERT_TRUE(relay.Start().ok());
  Collector collector(*cfg);
  ASSERT_GT(static_cast<int64_t>(busy.size()), late_offset + 1);
  ASSERT_THAT(WaitForAll(collector, busy, 30s), IsEmpty());
  ASSERT_TRUE((*lock_conn)
                  ->Query("SELECT RELEASE_LOCK(?)", {RelayLockName(cfg->ShardDatabase(kLate))})
                  .ok());

  const std::vector<CellId> missing = WaitForAll(collector, all, 20s);
  EXPECT_THAT(missing, IsEmpty()) << "not republished to the new broker: " << Describe(missing);
  relay.Stop();
}

}  // namespace
}  // namespace cellar::relaytest
