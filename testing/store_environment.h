// StoreEnvironment: a ClusterEnvironment without a broker plus a CellStore
// over its servers, started once for every test of a binary.
//
// Usage, at namespace scope in the test file:
//   StoreEnvironment* const env = static_cast<StoreEnvironment*>(
//       ::testing::AddGlobalTestEnvironment(new StoreEnvironment({"store"}, 8)));
// Tests then use env->store, env->config and env->dbs. When a server cannot
// start, SetUp fails and env->store stays null: tests should ASSERT on it.
//
// Header-only: include it only from tests that link cellar_cells.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "gtest/gtest.h"
#include "testing/cluster_environment.h"
#include "testing/test_cluster.h"

namespace cellar::testing {

class StoreEnvironment : public ClusterEnvironment {
 public:
  // One server per label; the shards are split over them in order
  // (MakeClusterConfig).
  StoreEnvironment(std::vector<std::string> labels, uint32_t shards)
      : ClusterEnvironment({.servers = std::move(labels), .broker = false}), shards_(shards) {}

  void SetUp() override {
    ClusterEnvironment::SetUp();
    if (!ready()) return;
    std::vector<const PrivateMariaDb*> servers;
    for (const auto& db : ClusterEnvironment::dbs()) servers.push_back(db.get());
    config = MakeClusterConfig(servers, shards_);
    store = CellStore::Open(config);
    Status s = store->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    store.reset();  // before the servers it talks to
    ClusterEnvironment::TearDown();
  }

  ClusterConfig config;
  std::unique_ptr<CellStore> store;
  // The servers, in the order of the labels.
  const std::vector<std::unique_ptr<PrivateMariaDb>>& dbs = ClusterEnvironment::dbs();

 private:
  uint32_t shards_;
};

}  // namespace cellar::testing
