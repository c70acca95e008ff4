// CellStore against a real MariaDB under concurrent callers: many threads
// putting, one address from several threads, concurrent erases. One private
// server is shared by every test of this binary (tests/cells_store_fixture.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/metrics.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/free_port.h"
#include "testing/metric_value.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"
#include "testing/wait_for.h"
#include "tests/cells_store_fixture.h"

namespace cellar {

testing::StoreEnvironment* const store_env =
    static_cast<testing::StoreEnvironment*>(::testing::AddGlobalTestEnvironment(
        new testing::StoreEnvironment({"concurrency-a", "concurrency-b"}, kStoreTestShards)));

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using testing::MetricValue;
using namespace std::chrono_literals;

constexpr uint32_t kShards = kStoreTestShards;

TEST_F(StoreTest, ConcurrentPutsOfOneAddressCreateItOnce) {
  constexpr int kThreads = 8;
  for (bool same_body : {true, false}) {
    SCOPED_TRACE(same_body ? "same body" : "different bodies");
    const Uuid row = Uuid::Random();
    std::vector<Result<PutResult>> results(kThreads, Result<PutResult>(Internal("not run")));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        results[t] = store_->Put("trips", W(row, "BASE", 1, {{"v", same_body ? 0 : t}}));
      });
    for (auto& t : threads) t.join();
    int created = 0, retries = 0, conflicts = 0;
    std::set<uint64_t> ids;
    for (const auto& r : results) {
      if (r.ok()) {
        (r->created ? created : retries)++;
        ids.insert(r->added_id);
      } else {
        EXPECT_EQ(StatusCode::kConflict, r.status().code()) << r.status().ToString();
        ++conflicts;
      }
    }
    EXPECT_EQ(1, created);
    EXPECT_EQ(1u, ids.size());
    EXPECT_EQ(same_body ? kThreads - 1 : 0, retries);
    EXPECT_EQ(same_body ? 0 : kThreads - 1, conflicts);
    EXPECT_EQ(1u, RowInLog("trips", row, 0).size());
  }
}

TEST_F(StoreTest, SixteenThreadsOfPutsAreAllReadBackAndLoggedOnceInOrder) {
  constexpr int kThreads = 16, kPerThread = 2000, kRowsPerThread = 100;
  const std::vector<uint64_t> heads = Heads("trips");
  struct Written {
    CellWrite write;
    PutResult result;
  };
  std::vector<std::vector<Written>> written(kThreads);
  std::vector<std::vector<Uuid>> rows(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRowsPerThread; ++r) rows[t].push_back(Uuid::Random());

  std::atomic<int> failures{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        CellWrite w{rows[t][i % kRowsPerThread], (i / kRowsPerThread) % 2 ? "STATUS" : "BASE",
                    i / (2 * kRowsPerThread), json{{"thread", t}, {"i", i}, {"pad", "x"}}};
        Result<PutResult> r = store_->Put("trips", w);
        if (!r.ok() || !r->created) {
          if (failures++ < 10)
            ADD_FAILURE() << "put " << t << "/" << i << ": "
                          << (r.ok() ? "not created" : r.status().ToString());
          continue;
        }
        written[t].push_back({std::move(w), *r});
      }
    });
  }
  for (auto& th : threads) th.join();
  const double put_secs = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(0, failures.load());

  // Index by address.
  using Address = std::tuple<Uuid, std::string, int64_t>;
  std::map<Address, const Written*> by_address;
  for (const auto& v : written)
    for (const Written& w : v)
      ASSERT_TRUE(
          by_address.emplace(Address{w.write.row_key, w.write.column, w.write.ref_key}, &w).second);
  ASSERT_EQ(static_cast<size_t>(kThreads * kPerThread), by_address.size());

  // Each thread's own puts to one shard got increasing added_ids (commit order).
  for (const auto& v : written) {
    std::map<uint32_t, uint64_t> last;
    for (const Written& w : v) {
      EXPECT_GT(w.result.added_id, last[w.result.shard]);
      last[w.result.shard] = w.result.added_id;
    }
  }

  // Every cell reads back: all versions of every (row, column) from 4 reader
  // threads, and every 8th cell also by its address.
  const auto read_start = Clock::now();
  std::atomic<int> read_failures{0};
  std::atomic<size_t> read_cells{0};
  auto check = [&](const Cell& c, const Written& w) {
    if (c.body != w.write.body || c.added_id != w.result.added_id ||
        c.created_at != w.result.created_at || c.shard != w.result.shard || c.tombstone) {
      if (read_failures++ < 10)
        ADD_FAILURE() << "read back " << CellToJson(c).dump() << ", wrote " << w.write.body.dump()
                      << " added_id " << w.result.added_id;
    }
  };
  std::vector<std::thread> readers;
  for (int k = 0; k < 4; ++k) {
    readers.emplace_back([&, k] {
      for (int t = k; t < kThreads; t += 4) {
        for (const Uuid& row : rows[t]) {
          for (const char* column : {"BASE", "STATUS"}) {
            VersionQuery q;
            q.limit = 1000;
            Result<std::vector<Cell>> v = store_->Versions("trips", row, column, q);
            if (!v.ok() || Refs(*v) != std::vector<int64_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}) {
              if (read_failures++ < 10)
                ADD_FAILURE() << row.ToString() << "/" << column << ": "
                              << (v.ok() ? ::testing::PrintToString(Refs(*v))
                                         : v.status().ToString());
              continue;
            }
            for (const Cell& c : *v) {
              auto it = by_address.find(Address{row, column, c.ref_key});
              ASSERT_NE(by_address.end(), it);
              check(c, *it->second);
              ++read_cells;
            }
          }
        }
        for (size_t i = 0; i < written[t].size(); i += 8) {
          const Written& w = written[t][i];
          Result<Cell> c = store_->Get("trips", w.write.row_key, w.write.column, w.write.ref_key);
          if (!c.ok()) {
            if (read_failures++ < 10) ADD_FAILURE() << c.status().ToString();
            continue;
          }
          check(*c, w);
        }
      }
    });
  }
  for (auto& th : readers) th.join();
  EXPECT_EQ(0, read_failures.load());
  EXPECT_EQ(by_address.size(), read_cells.load());
  const double read_secs = std::chrono::duration<double>(Clock::now() - read_start).count();

  // Walk every shard log (small pages): each of our cells exactly once, in added_id order.
  const auto walk_start = Clock::now();
  std::map<Address, int> seen;
  std::map<std::pair<uint32_t, MicrosSinceEpoch>, int> transactions;  // (shard, created_at)
  for (uint32_t s = 0; s < kShards; ++s) {
    const std::vector<Cell> log = WalkLog("trips", s, heads[s], s % 2 ? 7 : 64);
    for (size_t i = 1; i < log.size(); ++i) ASSERT_LT(log[i - 1].added_id, log[i].added_id);
    for (const Cell& c : log) {
      auto it = by_address.find(Address{c.row_key, c.column, c.ref_key});
      if (it == by_address.end()) continue;  // not ours
      ++seen[it->first];
      EXPECT_EQ(it->second->result.added_id, c.added_id);
      EXPECT_EQ(it->second->write.body, c.body);
      EXPECT_EQ(s, ShardForRow(c.row_key, kShards));
      ++transactions[{s, c.created_at}];
    }
  }
  const double walk_secs = std::chrono::duration<double>(Clock::now() - walk_start).count();
  EXPECT_EQ(by_address.size(), seen.size());
  for (const auto& [addr, n] : seen) EXPECT_EQ(1, n) << std::get<0>(addr).ToString();

  // Group commit: cells of one transaction share created_at.
  int max_batch = 0, multi = 0;
  for (const auto& [key, n] : transactions) {
    max_batch = std::max(max_batch, n);
    if (n > 1) ++multi;
  }
  std::printf(
      "[group commit] %d puts from %d threads in %.2f s (%.0f puts/s); %zu transactions, %d of "
      "them with >1 cell, largest %d cells, %.1f cells/transaction; read back in %.2f s, logs "
      "walked in %.2f s\n",
      kThreads * kPerThread, kThreads, put_secs, kThreads * kPerThread / put_secs,
      transactions.size(), multi, max_batch,
      static_cast<double>(seen.size()) / static_cast<double>(transactions.size()), read_secs,
      walk_secs);
  EXPECT_GT(max_batch, 1) << "no two concurrent puts were ever committed together";
  EXPECT_LT(transactions.size(), by_address.size());
}

TEST_F(StoreTest, ConcurrentErasesOfOneColumnWriteOneTombstone) {
  const Uuid row = Uuid::Random();
  MustPut("trips", W(row, "BASE", 3, {{"v", 3}}));
  constexpr int kThreads = 6;
  std::vector<Result<PutResult>> results(kThreads, Result<PutResult>(Internal("not run")));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { results[t] = store_->Erase("trips", row, "BASE"); });
  for (auto& t : threads) t.join();
  std::set<int64_t> refs;
  int created = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    created += r->created ? 1 : 0;
    refs.insert(r->ref_key);
  }
  EXPECT_EQ(1, created) << "exactly one erase writes the tombstone; the others find it";
  EXPECT_EQ((std::set<int64_t>{4}), refs);
  Result<std::vector<Cell>> versions = store_->Versions("trips", row, "BASE", VersionQuery{});
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(2u, versions->size());
}

// A row key whose shard `host` of `config` owns.
Uuid RowOnHost(const ClusterConfig& config, size_t host) {
  for (;;) {
    Uuid row = Uuid::Random();
    if (config.mysql.hosts[host].Owns(ShardForRow(row, config.shards))) return row;
  }
}

TEST_F(StoreTest, GroupCommitMetricsCountTransactionsCellsAndWriterTime) {
  MetricsRegistry metrics;
  auto store = CellStore::Open(store_env->config, &metrics);
  const std::string host_a = store_env->config.mysql.hosts[0].name;
  const std::string host_b = store_env->config.mysql.hosts[1].name;
  // Registered at open: a scrape before any write shows each host at 0.
  for (const std::string& h : {host_a, host_b})
    EXPECT_EQ(
        0, MetricValue(metrics.Render(), "cellar_group_commit_transactions_total", {{"host", h}}));

  // 8 threads x 5 single puts, a put_batch of 3 rows x 2 cells, a repeated
  // put and a conflicting one: 48 cells, every one answered by a transaction.
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i)
        if (!store->Put("trips", W(Uuid::Random(), "BASE", i, {{"i", i}})).ok()) ++failures;
    });
  for (auto& t : threads) t.join();
  std::vector<CellWrite> batch;
  for (int r = 0; r < 3; ++r) {
    const Uuid row = Uuid::Random();
    for (int ref = 0; ref < 2; ++ref) batch.push_back(W(row, "BASE", ref, {{"ref", ref}}));
  }
  for (const auto& r : store->PutBatch("trips", batch))
    if (!r.ok()) ++failures;
  const Uuid row = Uuid::Random();
  ASSERT_TRUE(store->Put("trips", W(row, "BASE", 1, {{"v", 1}})).ok());
  EXPECT_TRUE(store->Put("trips", W(row, "BASE", 1, {{"v", 1}})).ok());  // a retry
  EXPECT_EQ(StatusCode::kConflict,
            store->Put("trips", W(row, "BASE", 1, {{"v", 2}})).status().code());
  EXPECT_EQ(0, failures.load());

  std::string text = metrics.Render();
  const double tx = MetricValue(text, "cellar_group_commit_transactions_total");
  EXPECT_EQ(49, MetricValue(text, "cellar_group_commit_cells_total"));
  // 44 calls; a put_batch spanning both hosts is one transaction on each.
  EXPECT_GE(tx, 3);
  EXPECT_LE(tx, 45);
  EXPECT_EQ(0, MetricValue(text, "cellar_group_commit_failed_transactions_total"));
  EXPECT_EQ(0, MetricValue(text, "cellar_group_commit_queued_cells"));
  // One observation per transaction and phase; "answering" is observed once
  // the answers were handed on, so a woken caller may return before it.
  EXPECT_TRUE(WaitFor(
      [&] {
        text = metrics.Render();
        return MetricValue(text, "cellar_group_commit_writer_seconds_count",
                           {{"phase", "answering"}}) == tx;
      },
      10s))
      << text;
  for (const char* phase : {"waiting", "committing", "answering"})
    EXPECT_EQ(tx, MetricValue(text, "cellar_group_commit_writer_seconds_count", {{"phase", phase}}))
        << phase;
  EXPECT_GT(MetricValue(text, "cellar_group_commit_writer_seconds_sum", {{"phase", "committing"}}),
            0);
}

TEST_F(StoreTest, GroupCommitMetricsCountAFailedTransactionOnTheDownHostOnly) {
  ClusterConfig config = store_env->config;
  config.mysql.hosts[1].port = testing::FreeLoopbackPort();  // nothing listens there
  MetricsRegistry metrics;
  auto store = CellStore::Open(config, &metrics);
  const std::string host_a = config.mysql.hosts[0].name, host_b = config.mysql.hosts[1].name;

  EXPECT_EQ(StatusCode::kUnavailable,
            store->Put("trips", W(RowOnHost(config, 1), "BASE", 0, {{"v", 0}})).status().code());
  ASSERT_TRUE(store->Put("trips", W(RowOnHost(config, 0), "BASE", 0, {{"v", 0}})).ok());

  const std::string text = metrics.Render();
  auto value = [&](const std::string& name, const std::string& host) {
    return MetricValue(text, name, {{"host", host}});
  };
  EXPECT_EQ(1, value("cellar_group_commit_failed_transactions_total", host_b)) << text;
  EXPECT_EQ(0, value("cellar_group_commit_transactions_total", host_b));
  EXPECT_EQ(0, value("cellar_group_commit_cells_total", host_b));
  EXPECT_EQ(0, value("cellar_group_commit_failed_transactions_total", host_a));
  EXPECT_EQ(1, value("cellar_group_commit_transactions_total", host_a));
  EXPECT_EQ(1, value("cellar_group_commit_cells_total", host_a));
}

TEST_F(StoreTest, GroupCommitQueuedCellsGaugeShowsTheBacklogOfAStalledHost) {
  const ClusterConfig& config = store_env->config;
  const MysqlHostConfig& host = config.mysql.hosts[0];
  MetricsRegistry metrics;
  auto store = CellStore::Open(config, &metrics);
  auto queued = [&] {
    return MetricValue(metrics.Render(), "cellar_group_commit_queued_cells", {{"host", host.name}});
  };
  // The host's cells table locked: its writers' INSERTs wait, puts pile up.
  auto locker = MysqlConnection::Connect(EndpointFor(config, host));
  ASSERT_TRUE(locker.ok()) << locker.status().ToString();
  ASSERT_TRUE((*locker)
                  ->Execute("LOCK TABLES " +
                            QualifiedTable(config.HostDatabase(host), "cells_trips") + " WRITE")
                  .ok());
  constexpr int kPuts = 1000;
  std::atomic<int> ok{0}, answered{0};
  for (int i = 0; i < kPuts; ++i)
    store->PutAsync("trips", W(RowOnHost(config, 0), "BASE", 0, {{"i", i}}),
                    [&](Result<PutResult> r) {
                      if (r.ok()) ++ok;
                      ++answered;
                    });
  // Each writer holds at most max_batch_cells in its stalled transaction.
  const int held =
      config.group_commit.writer_threads_per_host * config.group_commit.max_batch_cells;
  ASSERT_LT(held, kPuts);
  EXPECT_TRUE(WaitFor([&] { return queued() >= kPuts - held; }, 10s))
      << "queued cells " << queued() << ", answered " << answered.load();
  EXPECT_EQ(0, answered.load());
  ASSERT_TRUE((*locker)->Execute("UNLOCK TABLES").ok());
  EXPECT_TRUE(WaitFor([&] { return answered.load() == kPuts; }, 60s))
      << answered.load() << " of " << kPuts << " answered";
  EXPECT_EQ(kPuts, ok.load());
  EXPECT_TRUE(WaitFor([&] { return queued() == 0; }, 10s)) << queued();
}

}  // namespace
}  // namespace cellar
