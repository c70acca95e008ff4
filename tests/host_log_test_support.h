// What the host-log tests share (cells_host_log_test.cc and
// cells_group_commit_test.cc, one binary): one private MariaDB with every
// shard on host 0, rows placed on a chosen shard, and plain connections to
// the host database for what a test holds or watches from outside the store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "gtest/gtest.h"
#include "testing/store_environment.h"

namespace cellar {
namespace host_log_test {

inline constexpr uint32_t kShards = 8;
inline const std::string kDs = "trips";

// The binary's one environment, registered by the first caller. Each source
// file calls it at namespace scope, so it is registered before main runs.
inline testing::StoreEnvironment* Environment() {
  static testing::StoreEnvironment* const env = static_cast<testing::StoreEnvironment*>(
      ::testing::AddGlobalTestEnvironment(new testing::StoreEnvironment({"hostlog"}, kShards)));
  return env;
}

// A random row whose cells go to `shard`. REQUIRES: shard < kShards (else
// the test fails and a row of shard % kShards is returned).
inline Uuid RowOnShard(uint32_t shard) {
  // A shard past kShards has no rows: the loop below would never end.
  EXPECT_LT(shard, kShards) << "no row hashes to shard " << shard;
  shard %= kShards;
  for (;;) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) == shard) return u;
  }
}

// A new connection to host 0; null (and a failed test) when it cannot connect.
inline std::unique_ptr<MysqlConnection> Connect() {
  const ClusterConfig& cfg = Environment()->config;
  auto c = MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts[0]));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

inline std::string Database() {
  const ClusterConfig& cfg = Environment()->config;
  return cfg.HostDatabase(cfg.mysql.hosts[0]);
}

// Puts whose INSERT waits for a table lock (LOCK TABLES ... WRITE held by
// another connection), as `observer` sees them; -1 when it cannot tell.
inline int InsertsWaitingForTheLock(MysqlConnection& observer) {
  auto rows = observer.Query(
      "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = "
      "'Waiting for table metadata lock' AND INFO LIKE 'INSERT INTO %cells_" +
      kDs + "%'");
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  return rows.ok() ? static_cast<int>((*rows)[0].Uint(0)) : -1;
}

class HostLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(nullptr, Environment()->store) << "the shared MariaDB did not start";
  }
  CellStore& store() { return *Environment()->store; }
  uint64_t Head() {
    Result<uint64_t> h = store().HostHead(kDs, 0);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? *h : 0;
  }
};

}  // namespace host_log_test
}  // namespace cellar
