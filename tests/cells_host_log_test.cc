// The host log against a real MariaDB: every shard of a host in one cells
// table, one group transaction per host, writers that never wait for each
// other, and log readers (HostLog, ShardLog) that never skip a cell that
// commits late (cells/internal/write_fence.h). The tests try to break the
// fence: a writer held open across many later commits, rolled-back and killed
// writers, two stores (two worker nodes) writing one host, a consistent-read
// backup left open.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "cells/body_codec.h"
#include "cells/cell_store.h"
#include "cells/internal/batch_transaction.h"
#include "cells/internal/write_fence.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"
#include "tests/host_log_test_support.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace host_log_test;  // NOLINT: the shared fixture and helpers

// Every shard on host 0 of one private MariaDB (host_log_test_support.h).
testing::StoreEnvironment* const env = Environment();

// A writer outside the store, as another process would be: it holds its
// fenced transaction open between Insert() and Commit()/Rollback().
class OpenWriter {
 public:
  OpenWriter() : conn_(Connect()) {
    EXPECT_TRUE(internal::RegisterWriter(*conn_, Database()).ok());
    EXPECT_TRUE(conn_->Begin().ok());
    Status st = internal::EnterWriteFence(*conn_, Database());
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  // Inserts one cell (not committed); returns its added_id.
  uint64_t Insert(const Uuid& row, int64_t ref_key) {
    auto rows =
        conn_->Query("INSERT INTO " + QualifiedTable(Database(), "cells_" + kDs) +
                         " (shard, row_key, column_name, ref_key, body, tombstone, created_at)"
                         " VALUES (?, ?, 'BASE', ?, ?, 0, ?) RETURNING added_id",
                     {uint64_t{ShardForRow(row, kShards)}, row.ToBytes(), ref_key,
                      EncodeBody({{"held", ref_key}}), NowMicros()});
    EXPECT_TRUE(rows.ok() && rows->size() == 1) << rows.status().ToString();
    return rows.ok() && !rows->empty() ? (*rows)[0].Uint(0) : 0;
  }
  uint64_t connection_id() {
    auto rows = conn_->Query("SELECT CONNECTION_ID()");
    return rows.ok() ? (*rows)[0].Uint(0) : 0;
  }
  Status Commit() { return conn_->Commit(); }
  void Rollback() { conn_->Rollback(); }

 private:
  std::unique_ptr<MysqlConnection> conn_;
};

// Reads the host log from `after` until it has returned `want` cells or
// `deadline` passes; returns what it read.
std::vector<Cell> ReadHostLog(uint64_t* after, size_t want, std::chrono::seconds deadline) {
  std::vector<Cell> out;
  const auto end = Clock::now() + deadline;
  while (out.size() < want && Clock::now() < end) {
    Result<HostLogPage> page = env->store->HostLog(kDs, 0, *after, 500);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    EXPECT_GE(page->next_after, *after);
    *after = page->next_after;
    for (auto& c : page->cells) out.push_back(std::move(c));
    if (page->cells.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return out;
}

// The group commit binds its cells' bytes as views (QueryBorrowed): binary
// bytes with NULs keep their length, and every kind of parameter binds as
// the owning Query binds it.
TEST(MysqlConnectionTest, BorrowedParametersBindAsOwnedOnesDo) {
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const std::string bytes("\0a\xff\0b", 5);
  const std::string sql = "SELECT ?, ?, ?, ?, ?, LENGTH(?)";
  auto borrowed = conn->QueryBorrowed(sql, {nullptr, int64_t{-5}, UINT64_MAX, 1.5,
                                            std::string_view(bytes), std::string_view(bytes)});
  auto owned = conn->Query(sql, {nullptr, int64_t{-5}, UINT64_MAX, 1.5, bytes, bytes});
  ASSERT_TRUE(borrowed.ok()) << borrowed.status().ToString();
  ASSERT_TRUE(owned.ok()) << owned.status().ToString();
  for (const auto* rows : {&*borrowed, &*owned}) {
    ASSERT_EQ(rows->size(), 1u);
    const SqlRow& r = (*rows)[0];
    EXPECT_TRUE(r.IsNull(0));
    EXPECT_EQ(r.Int(1), -5);
    EXPECT_EQ(r.Uint(2), UINT64_MAX);
    EXPECT_EQ(r.Double(3), 1.5);
    EXPECT_EQ(r.Bytes(4), bytes);
    EXPECT_EQ(r.Int(5), 5);
  }
}

TEST_F(HostLogTest, OneBatchOverEveryShardIsOneTransactionAndKeepsItsBytes) {
  std::mt19937 rng(3);
  std::vector<CellWrite> writes;
  for (int i = 0; i < 40; ++i) {
    std::string bytes(64 + rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    writes.push_back({RowOnShard(i % kShards), "BASE", i, {{"i", i}, {"bytes", bytes}}});
  }
  std::vector<Result<PutResult>> results = store().PutBatch(kDs, writes);
  std::set<uint64_t> ids;
  std::set<MicrosSinceEpoch> commits;
  for (size_t i = 0; i < writes.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_TRUE(results[i]->created);
    EXPECT_EQ(i % kShards, results[i]->shard);
    ids.insert(results[i]->added_id);
    commits.insert(results[i]->created_at);
    Result<Cell> back = store().Get(kDs, writes[i].row_key, "BASE", writes[i].ref_key);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(writes[i].body, back->body) << "cell " << i << " changed on the way";
    EXPECT_EQ(results[i]->added_id, back->added_id);
    EXPECT_EQ(i % kShards, back->shard);
  }
  EXPECT_EQ(writes.size(), ids.size()) << "every cell has its own added_id";
  EXPECT_EQ(1u, commits.size()) << "one transaction for every shard of the host";
  std::vector<Result<PutResult>> again = store().PutBatch(kDs, writes);
  for (size_t i = 0; i < writes.size(); ++i) {
    ASSERT_TRUE(again[i].ok()) << again[i].status().ToString();
    EXPECT_FALSE(again[i]->created);
    EXPECT_EQ(results[i]->added_id, again[i]->added_id);
  }
}

TEST_F(HostLogTest, HeldWriterHoldsTheLogButNoOtherWriter) {
  uint64_t after = Head();
  OpenWriter held;
  const Uuid held_row = RowOnShard(5);
  const uint64_t held_id = held.Insert(held_row, 0);
  ASSERT_GT(held_id, after);

  // Many later commits on every shard go through while it is open.
  const auto start = Clock::now();
  std::vector<std::future<Result<PutResult>>> puts;
  for (int i = 0; i < 64; ++i)
    puts.push_back(std::async(std::launch::async, [this, i] {
      return store().Put(kDs, {RowOnShard(i % kShards), "BASE", 0, {{"i", i}}});
    }));
  for (auto& p : puts) {
    Result<PutResult> r = p.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GT(r->added_id, held_id);
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "writers waited for the held one";

  // The log stops before the held id: the cells after it are not final.
  Result<HostLogPage> page = store().HostLog(kDs, 0, after, 500);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->held_by_open_writer);
  EXPECT_TRUE(page->cells.empty());
  EXPECT_EQ(after, page->next_after);
  Result<ShardLogPage> shard_page = store().ShardLog(kDs, 3, after, 500);
  ASSERT_TRUE(shard_page.ok()) << shard_page.status().ToString();
  EXPECT_TRUE(shard_page->cells.empty()) << "ShardLog must not pass the open writer either";

  // Committed: the log returns the held cell first, then the 64, each once.
  ASSERT_TRUE(held.Commit().ok());
  std::vector<Cell> cells = ReadHostLog(&after, 65, std::chrono::seconds(10));
  ASSERT_EQ(65u, cells.size());
  EXPECT_EQ(held_id, cells[0].added_id);
  EXPECT_EQ(held_row, cells[0].row_key);
  for (size_t i = 1; i < cells.size(); ++i) EXPECT_LT(cells[i - 1].added_id, cells[i].added_id);
}

// The relay reads bodies as JSON text (LogBodies::kJsonText): the same page
// as the documents, each body_texts[i] the dump of cells[i]'s body, also when
// the page is cut at a gap and re-read past it (the text list follows).
TEST_F(HostLogTest, BodiesAsJsonTextAreTheDocumentsDumpsAcrossAGap) {
  const uint64_t after = Head();
  auto put = [&](int i, json body) {
    Result<PutResult> r = store().Put(kDs, {RowOnShard(i % kShards), "BASE", i, std::move(body)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  put(1, {{"city", "S\u00e3o Paulo"}, {"fare", 12.5}, {"stops", {1, 2, 3}}});
  put(2, {{"quote\"back\\slash", "line\nbreak \x01"}, {"n", nullptr}});
  Result<PutResult> erased = store().Erase(kDs, RowOnShard(1), "BASE");
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  OpenWriter rolled_back;
  rolled_back.Insert(RowOnShard(3), 0);  // a gap: the page is cut here and read again
  put(4, {{"big", std::string(3000, 'x')}, {"i", -1}});  // stored compressed
  put(5, json::object());
  rolled_back.Rollback();

  Result<HostLogPage> text = store().HostLog(kDs, 0, after, 500, LogBodies::kJsonText);
  Result<HostLogPage> docs = store().HostLog(kDs, 0, after, 500);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(5u, docs->cells.size());
  ASSERT_EQ(docs->cells.size(), text->cells.size());
  ASSERT_EQ(text->cells.size(), text->body_texts.size());
  EXPECT_TRUE(docs->body_texts.empty());
  EXPECT_EQ(docs->next_after, text->next_after);
  for (size_t i = 0; i < docs->cells.size(); ++i) {
    const Cell& d = docs->cells[i];
    const Cell& t = text->cells[i];
    SCOPED_TRACE("cell " + std::to_string(i) + " added_id " + std::to_string(d.added_id));
    EXPECT_EQ(d.added_id, t.added_id);
    EXPECT_EQ(d.row_key, t.row_key);
    EXPECT_EQ(d.tombstone, t.tombstone);
    EXPECT_TRUE(t.body.is_null()) << "no document is built in text mode";
    EXPECT_EQ(text->body_texts[i],
              d.tombstone ? "" : d.body.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  EXPECT_TRUE(docs->cells[2].tombstone);
}

TEST_F(HostLogTest, RolledBackAndKilledWritersLeaveGapsThatDoNotStallTheLog) {
  uint64_t after = Head();
  OpenWriter rolled_back, killed;
  rolled_back.Insert(RowOnShard(1), 0);
  killed.Insert(RowOnShard(2), 0);
  const uint64_t killed_conn = killed.connection_id();
  std::vector<CellWrite> later;
  for (int i = 0; i < 10; ++i) later.push_back({RowOnShard(i % kShards), "BASE", 0, {{"i", i}}});
  for (const auto& r : store().PutBatch(kDs, later)) ASSERT_TRUE(r.ok()) << r.status().ToString();

  rolled_back.Rollback();
  auto admin = Connect();
  ASSERT_TRUE(admin->Execute("KILL ?", {killed_conn}).ok());
  std::vector<Cell> cells = ReadHostLog(&after, 10, std::chrono::seconds(10));
  ASSERT_EQ(10u, cells.size()) << "the log must pass the two permanent gaps";
  std::set<Uuid> rows;
  for (const auto& c : cells) rows.insert(c.row_key);
  for (const auto& w : later) EXPECT_TRUE(rows.count(w.row_key));
  Result<HostLogPage> rest = store().HostLog(kDs, 0, after, 500);
  ASSERT_TRUE(rest.ok());
  EXPECT_TRUE(rest->cells.empty()) << "the rolled-back and killed cells never appear";
}

TEST_F(HostLogTest, ConsistentSnapshotBackupDoesNotStallTheLog) {
  uint64_t after = Head();
  auto backup = Connect();
  ASSERT_TRUE(backup->ExecuteDdl("START TRANSACTION WITH CONSISTENT SNAPSHOT").ok());
  ASSERT_TRUE(
      backup->Query("SELECT COUNT(*) FROM " + QualifiedTable(Database(), "cells_" + kDs)).ok());
  OpenWriter rolled_back;  // makes a gap, so the read must consult the fence
  rolled_back.Insert(RowOnShard(4), 0);
  rolled_back.Rollback();
  ASSERT_TRUE(store().Put(kDs, {RowOnShard(6), "BASE", 0, {{"after", "gap"}}}).ok());
  const auto start = Clock::now();
  std::vector<Cell> cells = ReadHostLog(&after, 1, std::chrono::seconds(5));
  EXPECT_EQ(1u, cells.size());
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(900))
      << "the open read-only transaction held the log back";
  backup->Rollback();
}

TEST_F(HostLogTest, TwoStoresWritingOneHostWithHeldWritersAreLoggedOnceInOrder) {
  // Two worker nodes (two CellStores) write the host from 16 threads while
  // outside writers hold transactions open for random times and roll some
  // back; a reader tails the host log all along. Every committed cell must be
  // read exactly once, in added_id order, and nothing rolled back may appear.
  auto second = CellStore::Open(env->config);
  uint64_t after = Head();
  std::atomic<bool> writing{true};
  std::mutex mu;
  std::set<std::pair<Uuid, int64_t>> committed;
  std::vector<std::thread> writers;
  for (int t = 0; t < 16; ++t)
    writers.emplace_back([&, t] {
      CellStore& s = t % 2 ? *second : store();
      for (int i = 0; i < 150; ++i) {
        const Uuid row = Uuid::Random();
        Result<PutResult> r = s.Put(kDs, {row, "BASE", 0, {{"t", t}, {"i", i}}});
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        std::lock_guard<std::mutex> lock(mu);
        committed.insert({row, 0});
      }
    });
  std::thread holders([&] {
    std::mt19937 rng(7);
    for (int k = 0; k < 12; ++k) {
      OpenWriter w;
      const Uuid row = Uuid::Random();
      w.Insert(row, 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 200));
      if (k % 3 == 0) {
        w.Rollback();
      } else {
        ASSERT_TRUE(w.Commit().ok());
        std::lock_guard<std::mutex> lock(mu);
        committed.insert({row, 1});
      }
    }
  });
  std::vector<Cell> seen;
  std::thread reader([&] {
    while (writing) {
      auto more = ReadHostLog(&after, 1, std::chrono::seconds(1));
      for (auto& c : more) seen.push_back(std::move(c));
    }
  });
  for (auto& w : writers) w.join();
  holders.join();
  writing = false;
  reader.join();
  auto rest = ReadHostLog(&after, committed.size() - std::min(committed.size(), seen.size()),
                          std::chrono::seconds(10));
  for (auto& c : rest) seen.push_back(std::move(c));

  std::set<std::pair<Uuid, int64_t>> read;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (i) {
      EXPECT_LT(seen[i - 1].added_id, seen[i].added_id) << "log out of order at " << i;
    }
    EXPECT_TRUE(read.insert({seen[i].row_key, seen[i].ref_key}).second)
        << "cell read twice: " << seen[i].row_key.ToString();
  }
  EXPECT_EQ(committed, read) << "committed " << committed.size() << ", read " << read.size();
}

// A group transaction's INSERT locks its fence row itself (FencedCreatedAt).
// The lock must come before InnoDB hands out its added_ids: otherwise a reader
// could pass an id of a transaction it cannot see is still open.
class FusedFenceTest : public HostLogTest {
 protected:
  // One single-cell unit of `row` (BASE, ref_key 0), as the store queues it.
  static std::unique_ptr<internal::WriteUnit> Unit(const Uuid& row) {
    auto u = std::make_unique<internal::WriteUnit>();
    u->datastore = kDs;
    u->shard = ShardForRow(row, kShards);
    u->cells.push_back({row, "BASE", 0, EncodeBody({{"fused", true}}), false});
    return u;
  }
  static Status Run(MysqlConnection& conn, internal::WriteUnit* unit) {
    std::vector<internal::DatastoreBatch> batches{{kDs, {unit}}};
    return internal::RunGroupTransaction(conn, Database(), batches);
  }
  static Result<std::vector<SqlRow>> FenceRow(MysqlConnection& conn, uint64_t id) {
    return conn.Query(
        "SELECT conn_id FROM " + QualifiedTable(Database(), "write_fence") + " WHERE conn_id = ?",
        {id});
  }
};

TEST_F(FusedFenceTest, AnInsertWaitingForItsFenceRowGetsIdsAfterWritersThatCommitMeanwhile) {
  auto writer = Connect();
  ASSERT_TRUE(internal::RegisterWriter(*writer, Database()).ok());
  auto id_rows = writer->Query("SELECT CONNECTION_ID()");
  ASSERT_TRUE(id_rows.ok());
  const uint64_t writer_id = (*id_rows)[0].Uint(0);

  // Another session holds the writer's fence row.
  auto holder = Connect();
  ASSERT_TRUE(holder->Begin().ok());
  auto held = holder->Query("SELECT conn_id FROM " + QualifiedTable(Database(), "write_fence") +
                                " WHERE conn_id = ? FOR UPDATE",
                            {writer_id});
  ASSERT_TRUE(held.ok() && held->size() == 1) << held.status().ToString();

  const Uuid row = RowOnShard(4);
  std::unique_ptr<internal::WriteUnit> unit = Unit(row);
  auto blocked = std::async(std::launch::async, [&] { return Run(*writer, unit.get()); });
  // Wait until the writer's INSERT is running (it cannot finish while the
  // fence row is held), then commit another cell: if the writer had its
  // added_id already, it would be lower. PROCESSLIST is read live; the
  // INNODB_TRX / INNODB_LOCK_WAITS cache is refreshed only after 100 ms
  // without a read, so polling it never sees a new waiter.
  auto admin = Connect();
  bool waiting = false;
  for (int i = 0; i < 1000 && !waiting; ++i) {
    auto w = admin->Query(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE "
        "'INSERT%'",
        {writer_id});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    waiting = (*w)[0].Uint(0) > 0;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(waiting) << "the writer never waited for its fence row";
  Result<PutResult> meanwhile = store().Put(kDs, {RowOnShard(1), "BASE", 0, {{"m", 1}}});
  ASSERT_TRUE(meanwhile.ok()) << meanwhile.status().ToString();
  EXPECT_EQ(std::future_status::timeout, blocked.wait_for(std::chrono::milliseconds(0)));

  ASSERT_TRUE(holder->Commit().ok());
  Status st = blocked.get();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(1u, unit->results.size());
  ASSERT_TRUE(unit->results[0].ok()) << unit->results[0].status().ToString();
  EXPECT_GT(unit->results[0]->added_id, meanwhile->added_id);
}

// A writer whose fence row is gone (a failover fenced the server, or the
// table was recreated) writes nothing and says so: the group committer then
// reconnects, verifies the primary and registers again.
TEST_F(FusedFenceTest, AWriterWhoseFenceRowIsGoneWritesNothingUntilItRegistersAgain) {
  auto writer = Connect();
  // In a lax sql_mode a NULL created_at would be stored as 0 with a warning,
  // and the missing fence row would go unnoticed: RegisterWriter makes the
  // session strict.
  ASSERT_TRUE(writer->Execute("SET SESSION sql_mode = ''").ok());
  ASSERT_TRUE(internal::RegisterWriter(*writer, Database()).ok());
  auto mode = writer->Query("SELECT @@SESSION.sql_mode");
  ASSERT_TRUE(mode.ok());
  EXPECT_THAT((*mode)[0].Bytes(0), HasSubstr("STRICT_ALL_TABLES"));
  auto id_rows = writer->Query("SELECT CONNECTION_ID()");
  ASSERT_TRUE(id_rows.ok());
  const uint64_t writer_id = (*id_rows)[0].Uint(0);

  auto admin = Connect();
  ASSERT_TRUE(admin
                  ->Execute("DELETE FROM " + QualifiedTable(Database(), "write_fence") +
                                " WHERE conn_id = ?",
                            {writer_id})
                  .ok());
  ASSERT_TRUE(admin->Commit().ok());
  ASSERT_TRUE(FenceRow(*admin, writer_id)->empty());

  const Uuid row = RowOnShard(7);
  std::unique_ptr<internal::WriteUnit> unit = Unit(row);
  Status st = Run(*writer, unit.get());
  EXPECT_EQ(StatusCode::kFailedPrecondition, st.code()) << st.ToString();
  EXPECT_EQ(StatusCode::kNotFound, store().Get(kDs, row, "BASE", 0).status().code());
  ASSERT_TRUE(internal::RegisterWriter(*writer, Database()).ok());
  st = Run(*writer, unit.get());
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(unit->results[0].ok()) << unit->results[0].status().ToString();
  EXPECT_EQ(1u, FenceRow(*admin, writer_id)->size()) << "the writer did not register again";
  Result<Cell> cell = store().Get(kDs, row, "BASE", 0);
  ASSERT_TRUE(cell.ok()) << cell.status().ToString();
  EXPECT_EQ(unit->results[0]->created_at, cell->created_at);
  EXPECT_GT(cell->created_at, 0);
}

TEST_F(HostLogTest, MissingTablesNameCellarInitAndWriteNothing) {
  auto admin = Connect();
  ASSERT_TRUE(admin->ExecuteDdl("DROP TABLE " + QualifiedTable(Database(), "write_fence")).ok());
  // A fresh store: its writer connections register anew and find no table.
  auto fresh = CellStore::Open(env->config);
  const CellWrite single{RowOnShard(6), "BASE", 0, {{"n", 1}}};
  Result<PutResult> r = fresh->Put(kDs, single);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("run `cellar init`"));
  EXPECT_EQ(StatusCode::kNotFound, store().Get(kDs, single.row_key, "BASE", 0).status().code());
  ASSERT_TRUE(fresh->Init().ok());
  Result<PutResult> after = fresh->Put(kDs, single);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->created);
  // The first store's writers lost their fence rows with the table: they
  // register again on their own.
  Result<PutResult> old = store().Put(kDs, {RowOnShard(2), "BASE", 0, {{"n", 2}}});
  EXPECT_TRUE(old.ok()) << old.status().ToString();
}

TEST_F(HostLogTest, PerShardLayoutOfAnOlderCellarIsRefusedNamingMigrate) {
  ASSERT_TRUE(store().CheckLayout().ok());
  auto admin = Connect();
  const std::string legacy = env->config.LegacyShardDatabase(0);
  ASSERT_TRUE(admin->ExecuteDdl("CREATE DATABASE `" + legacy + "`").ok());
  ASSERT_TRUE(
      admin->ExecuteDdl("CREATE TABLE `" + legacy + "`.cells_trips (added_id BIGINT PRIMARY KEY)")
          .ok());
  Status layout = store().CheckLayout();
  EXPECT_EQ(StatusCode::kFailedPrecondition, layout.code()) << layout.ToString();
  EXPECT_THAT(layout.message(), HasSubstr("cellar migrate"));
  EXPECT_THAT(layout.message(), HasSubstr(legacy));
  ASSERT_TRUE(admin->ExecuteDdl("DROP DATABASE `" + legacy + "`").ok());
  EXPECT_TRUE(store().CheckLayout().ok());
}

}  // namespace
}  // namespace cellar
