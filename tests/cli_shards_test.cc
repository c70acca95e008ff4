// `cellar shards move` and `cellar shards` as an operator runs them, against
// the two private MariaDB servers of status_test (tests/cli_test_util.h): the
// move needs no config roll, and every later command finds the shard on its
// new host.
#include <string>
#include <vector>

#include "base/uuid.h"
#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "testing/test_cluster.h"
#include "tests/cli_test_util.h"

namespace cellar {
namespace {

constexpr uint32_t kShards = 8;

TEST(CliShardsTest, MoveAShardThenEveryCommandFindsItOnItsNewHost) {
  const std::string yaml = testing::MakeClusterYaml(CliServers(), kShards, "", "st_cli_move");
  const std::string config_path = testing::WriteTempFile(yaml, ".yaml");
  auto cfg = ParseClusterConfig(yaml, config_path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto store = CellStore::Open(*cfg);
  ASSERT_EQ(store->Init().ToString(), "OK");
  const std::string b = cfg->mysql.hosts[1].name;
  Uuid row = Uuid::Random();
  while (cfg->HostIndexForShard(ShardForRow(row, kShards)) != 0) row = Uuid::Random();
  const std::string shard = std::to_string(ShardForRow(row, kShards));
  ASSERT_TRUE(store->Put("trips", {row, "BASE", 1, {{"n", 1}}}).ok());

  // Refused: an unknown host, a shard out of range; nothing moves.
  CliResult unknown = RunCli(config_path, {"shards", "move", "--shard", shard, "--to", "nope"});
  EXPECT_NE(unknown.code, 0) << unknown.out;
  EXPECT_NE(unknown.err.find("unknown host 'nope'"), std::string::npos) << unknown.err;
  CliResult range = RunCli(config_path, {"shards", "move", "--shard", "8", "--to", b});
  EXPECT_NE(range.code, 0) << range.out;
  EXPECT_NE(range.err.find("out of range"), std::string::npos) << range.err;

  CliResult moved = RunCli(config_path, {"shards", "move", "--shard", shard, "--to", b});
  ASSERT_EQ(moved.code, 0) << moved.err;
  EXPECT_EQ(moved.json["to"], b) << moved.out;
  EXPECT_EQ(moved.json["cells_verified"], 1) << moved.out;
  EXPECT_NE(moved.err.find("placed: shard " + shard), std::string::npos) << moved.err;

  CliResult where = RunCli(config_path, {"shards", "--row", row.ToString()});
  ASSERT_EQ(where.code, 0) << where.err;
  EXPECT_EQ(where.json["row"]["host"], b) << where.out;
  EXPECT_EQ(where.json["hosts"][0]["config_shards"], "0-3") << where.out;
  EXPECT_EQ(where.json["hosts"][0]["shards"].get<std::string>().find(shard), std::string::npos)
      << where.out;
  // Reads and writes of the shard go to its new host, with the same config.
  CliResult get = RunCli(config_path, {"get", "-d", "trips", "-r", row.ToString(), "-c", "BASE",
                                       "--ref", "1"});
  ASSERT_EQ(get.code, 0) << get.err;
  EXPECT_EQ(get.json["body"]["n"], 1) << get.out;
  CliResult put = RunCli(config_path, {"put", "-d", "trips", "-r", row.ToString(), "-c", "BASE",
                                       "--ref", "2", "-b", "{\"n\":2}"});
  ASSERT_EQ(put.code, 0) << put.err;
  auto fresh = CellStore::Open(*cfg);
  auto latest = fresh->Latest("trips", row, "BASE");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->body["n"], 2);
  EXPECT_EQ(1u, fresh->HostOfShard(ShardForRow(row, kShards)));
}

}  // namespace
}  // namespace cellar
