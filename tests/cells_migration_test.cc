// `cellar migrate` against a real MariaDB: a cluster written in the per-shard
// layout of an older Cellar (one database per shard, made here with that
// version's DDL) is refused by the new store, copied into the host log in its
// old order, verified cell by cell, and then accepted.
#include <map>
#include <string>
#include <vector>

#include "base/time.h"
#include "cells/body_codec.h"
#include "cells/cell_store.h"
#include "cells/internal/cells_table.h"
#include "cells/layout_migration.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/private_mariadb.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
constexpr uint32_t kShards = 4;

struct LegacyCell {
  Uuid row;
  std::string column;
  int64_t ref_key;
  nlohmann::json body;  // null: tombstone
  MicrosSinceEpoch created_at;
};

// The cells table of the per-shard layout, as Cellar wrote it before the host log.
void CreateLegacyShard(MysqlConnection& c, uint32_t shard, const std::vector<LegacyCell>& cells) {
  const std::string db = "cellar_s" + std::to_string(shard);
  ASSERT_TRUE(c.ExecuteDdl("CREATE DATABASE `" + db + "`").ok());
  ASSERT_TRUE(c.ExecuteDdl("CREATE TABLE `" + db +
                           "`.cells_trips (added_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,"
                           " row_key BINARY(16) NOT NULL, column_name VARCHAR(64) CHARACTER SET"
                           " ascii COLLATE ascii_bin NOT NULL, ref_key BIGINT NOT NULL,"
                           " body LONGBLOB NOT NULL, tombstone TINYINT NOT NULL DEFAULT 0,"
                           " created_at BIGINT NOT NULL, PRIMARY KEY (added_id),"
                           " UNIQUE KEY cell_address (row_key, column_name, ref_key))")
                  .ok());
  ASSERT_TRUE(
      c.ExecuteDdl("CREATE TABLE `" + db + "`.commit_order (datastore VARCHAR(64) PRIMARY KEY)")
          .ok());
  for (const auto& cell : cells) {
    const bool tomb = cell.body.is_null();
    ASSERT_TRUE(c.Execute("INSERT INTO `" + db +
                              "`.cells_trips (row_key, column_name, ref_key, body, tombstone,"
                              " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                          {cell.row.ToBytes(), cell.column, cell.ref_key,
                           tomb ? std::string() : EncodeBody(cell.body), int64_t{tomb ? 1 : 0},
                           cell.created_at})
                    .ok());
  }
}

Uuid RowOnShard(uint32_t shard) {
  for (;;) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) == shard) return u;
  }
}

TEST(MigrationTest, OldLayoutIsRefusedThenCopiedInOrderVerifiedAndAccepted) {
  auto db = testing::PrivateMariaDb::Start("migrate");
  const ClusterConfig config = testing::MakeClusterConfig({db.get()}, kShards);
  auto conn = MysqlConnection::Connect(EndpointFor(config, config.mysql.hosts[0]));
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  std::map<uint32_t, std::vector<LegacyCell>> legacy;
  MicrosSinceEpoch t = NowMicros() - 1000000;
  for (uint32_t s = 0; s < kShards; ++s)
    for (int i = 0; i < 1050 + static_cast<int>(s); ++i) {  // > one copy chunk per shard
      const Uuid row = RowOnShard(s);
      legacy[s].push_back({row, "BASE", 0, {{"s", s}, {"i", i}}, t++});
      if (i % 100 == 0) legacy[s].push_back({row, "BASE", 1, nullptr, t++});  // an erase
    }
  for (const auto& [s, cells] : legacy) {
    CreateLegacyShard(**conn, s, cells);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
  }

  auto store = CellStore::Open(config);
  Status refused = store->Init();
  EXPECT_EQ(StatusCode::kFailedPrecondition, refused.code()) << refused.ToString();
  EXPECT_THAT(refused.message(), HasSubstr("cellar migrate"));

  // A cell already in the host log at a legacy address with another body (a
  // write through a new Cellar before migrating) fails verification.
  const std::string host_db = config.HostDatabase(config.mysql.hosts[0]);
  ASSERT_TRUE((*conn)->ExecuteDdl("CREATE DATABASE `" + host_db + "`").ok());
  ASSERT_TRUE((*conn)->ExecuteDdl(internal::CreateCellsTableSql(host_db + ".cells_trips")).ok());
  const LegacyCell& clash = legacy[2][7];
  ASSERT_TRUE((*conn)
                  ->Execute("INSERT INTO `" + host_db +
                                "`.cells_trips (shard, row_key, column_name, ref_key, body,"
                                " tombstone, created_at) VALUES (2, ?, ?, ?, ?, 0, ?)",
                            {clash.row.ToBytes(), clash.column, clash.ref_key,
                             EncodeBody({{"other", true}}), clash.created_at})
                  .ok());
  Result<MigrationStats> first = MigrateShardLayout(*store);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, first.status().code());
  EXPECT_THAT(first.status().message(), HasSubstr("shard 2 trips: 1 of"));
  EXPECT_EQ(StatusCode::kFailedPrecondition, store->CheckLayout().code())
      << "shards 2 and 3 are still in the old layout";

  // Resolved by hand (shard 2's partial copy and the clashing cell removed, so
  // the shard is copied again from its start): the next run finishes shards 2
  // and 3 only.
  ASSERT_TRUE((*conn)->Execute("DELETE FROM `" + host_db + "`.cells_trips WHERE shard = 2").ok());
  ASSERT_TRUE(
      (*conn)->Execute("DELETE FROM `" + host_db + "`.layout_migration WHERE shard = 2").ok());
  std::vector<std::string> lines;
  Result<MigrationStats> second =
      MigrateShardLayout(*store, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(2u, second->tables_migrated);
  EXPECT_EQ(legacy[2].size() + legacy[3].size(), second->cells_verified);
  EXPECT_EQ(2u, lines.size());

  ASSERT_TRUE(store->CheckLayout().ok());
  ASSERT_TRUE(store->Init().ok());
  // Every legacy cell is in the host log with its body and created_at, each
  // shard in its old order.
  for (uint32_t s = 0; s < kShards; ++s) {
    std::vector<Cell> log;
    uint64_t after = 0;
    while (true) {
      Result<ShardLogPage> page = store->ShardLog("trips", s, after, 1000);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      if (page->cells.empty()) break;
      after = page->next_after;
      for (auto& c : page->cells) log.push_back(std::move(c));
    }
    ASSERT_EQ(legacy[s].size(), log.size()) << "shard " << s;
    for (size_t i = 0; i < log.size(); ++i) {
      const LegacyCell& want = legacy[s][i];
      ASSERT_EQ(want.row, log[i].row_key) << "shard " << s << " out of order at " << i;
      EXPECT_EQ(want.ref_key, log[i].ref_key);
      EXPECT_EQ(want.created_at, log[i].created_at);
      EXPECT_EQ(want.body.is_null(), log[i].tombstone);
      if (!want.body.is_null()) {
        EXPECT_EQ(want.body, log[i].body);
      }
    }
  }
  Result<Cell> latest = store->Latest("trips", legacy[1][5].row, "BASE");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(legacy[1][5].body, latest->body);

  // Nothing left to migrate: a third run changes nothing.
  Result<MigrationStats> third = MigrateShardLayout(*store);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(0u, third->tables_migrated);
  store.reset();
}

}  // namespace
}  // namespace cellar
