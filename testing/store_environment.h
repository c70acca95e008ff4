// StoreEnvironment: private MariaDB servers and a CellStore over them, started
// once for every test of a binary (a ::testing::Environment).
//
// Usage, at namespace scope in the test file:
//   StoreEnvironment* const env = static_cast<StoreEnvironment*>(
//       ::testing::AddGlobalTestEnvironment(new StoreEnvironment({"store"}, 8)));
// Tests then use env->store, env->config and env->dbs. When a server cannot
// start, SetUp fails and env->store stays null: tests should ASSERT on it.
//
// Header-only: include it only from tests that link cellar_cells.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "gtest/gtest.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"

namespace cellar::testing {

class StoreEnvironment : public ::testing::Environment {
 public:
  // One server per label; the shards are split over them in order
  // (MakeClusterConfig).
  StoreEnvironment(std::vector<std::string> labels, uint32_t shards)
      : labels_(std::move(labels)), shards_(shards) {}

  void SetUp() override {
    try {
      for (const std::string& label : labels_) dbs.push_back(PrivateMariaDb::Start(label));
    } catch (const std::exception& e) {
      FAIL() << "cannot start MariaDB: " << e.what();
    }
    std::vector<const PrivateMariaDb*> servers;
    for (const auto& db : dbs) servers.push_back(db.get());
    config = MakeClusterConfig(servers, shards_);
    store = CellStore::Open(config);
    Status s = store->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    store.reset();  // before the servers it talks to
    while (!dbs.empty()) dbs.pop_back();
  }

  std::vector<std::unique_ptr<PrivateMariaDb>> dbs;
  ClusterConfig config;
  std::unique_ptr<CellStore> store;

 private:
  std::vector<std::string> labels_;
  uint32_t shards_;
};

}  // namespace cellar::testing
