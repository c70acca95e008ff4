// Shard placement (cells/shard_placement.h) and the position tokens that name
// the host a cell was committed on (cells/log_position.h): pure functions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cells/log_position.h"
#include "cells/shard_placement.h"

namespace cellar {
namespace {

ClusterConfig FourShards() {
  ClusterConfig cfg;
  cfg.shards = 4;
  cfg.mysql.database_prefix = "cellar";
  cfg.mysql.hosts.resize(2);
  cfg.mysql.hosts[0].name = "a";
  cfg.mysql.hosts[0].shards = {0, 1};
  cfg.mysql.hosts[1].name = "b";
  cfg.mysql.hosts[1].shards = {2, 3};
  return cfg;
}

TEST(ShardPlacementTest, TheHighestMoveOfEachShardWinsOverTheConfig) {
  const ClusterConfig cfg = FourShards();
  EXPECT_EQ((std::vector<uint32_t>{0, 0, 1, 1}), ResolveShardHosts(cfg, {}));
  // Shard 1 moved to b and back to a (rows in any order, from both hosts);
  // shard 2 moved to a; rows naming an unknown host or shard change nothing.
  const std::vector<ShardPlacementRow> rows = {{1, "a", 2}, {1, "b", 1},  {2, "a", 1},
                                               {1, "b", 1}, {3, "zz", 9}, {7, "a", 1}};
  EXPECT_EQ((std::vector<uint32_t>{0, 0, 0, 1}), ResolveShardHosts(cfg, rows));
  EXPECT_EQ((std::vector<uint32_t>{0, 1, 1, 1}), ResolveShardHosts(cfg, {{1, "b", 1}}));
}

TEST(ShardPlacementTest, APositionTokenNamesTheHostItWasCommittedOn) {
  const ClusterConfig cfg = FourShards();
  const std::string on_a = EncodeLogPosition(cfg.HostDatabase(cfg.mysql.hosts[0]), "trips", 1, 42);
  EXPECT_EQ(on_a, EncodeLogPosition(cfg, "trips", 1, 42));  // the config puts 1 on a
  auto where_a = [&](uint32_t) { return cfg.HostDatabase(cfg.mysql.hosts[0]); };
  auto where_b = [&](uint32_t) { return cfg.HostDatabase(cfg.mysql.hosts[1]); };
  auto back = DecodeLogPosition(cfg, "trips", on_a, where_a);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(42u, back->added_id);
  // Shard 1 moved to b since: the token's log is not the shard's any more.
  auto moved = DecodeLogPosition(cfg, "trips", on_a, where_b);
  EXPECT_EQ(StatusCode::kInvalidArgument, moved.status().code());
  EXPECT_THAT(moved.status().message(), ::testing::HasSubstr("moved"));
  // A token committed on b after the move is good there.
  const std::string on_b = EncodeLogPosition(cfg.HostDatabase(cfg.mysql.hosts[1]), "trips", 1, 7);
  EXPECT_TRUE(DecodeLogPosition(cfg, "trips", on_b, where_b).ok());
  EXPECT_FALSE(DecodeLogPosition(cfg, "trips", on_b).ok()) << "the config alone says a";
}

}  // namespace
}  // namespace cellar
