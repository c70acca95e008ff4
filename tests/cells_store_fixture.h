// StoreTest: the fixture of the CellStore integration tests (cells_store_test,
// cells_store_concurrency_test). Each binary defines `store_env`, its shared
// private MariaDB and store (testing/store_environment.h). Tests isolate
// themselves with fresh random row keys and, when they read shard logs, by
// starting at the shard heads taken when the test began.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "gtest/gtest.h"
#include "testing/store_environment.h"
#include "testing/wait_for.h"

namespace cellar {

inline constexpr uint32_t kStoreTestShards = 8;
// Defined by each test binary:
//   AddGlobalTestEnvironment(new testing::StoreEnvironment({...}, kStoreTestShards)).
extern testing::StoreEnvironment* const store_env;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(nullptr, store_env->store) << "the shared MariaDB did not start";
    store_ = store_env->store.get();
  }

  CellWrite W(const Uuid& row, const std::string& column, int64_t ref, nlohmann::json body) {
    return CellWrite{row, column, ref, std::move(body)};
  }

  PutResult MustPut(const std::string& ds, const CellWrite& w) {
    Result<PutResult> r = store_->Put(ds, w);
    EXPECT_TRUE(r.ok()) << CellAddress(ds, w.row_key, w.column, w.ref_key) << ": "
                        << r.status().ToString();
    return r.ok() ? *r : PutResult{};
  }

  std::vector<uint64_t> Heads(const std::string& ds) {
    std::vector<uint64_t> heads;
    for (uint32_t s = 0; s < kStoreTestShards; ++s) {
      Result<uint64_t> h = store_->ShardHead(ds, s);
      EXPECT_TRUE(h.ok()) << h.status().ToString();
      heads.push_back(h.ok() ? *h : 0);
    }
    return heads;
  }

  // Every cell of `shard` after `after`, read in pages of `limit`; checks the
  // paging contract on the way.
  std::vector<Cell> WalkLog(const std::string& ds, uint32_t shard, uint64_t after, int limit) {
    std::vector<Cell> out;
    for (int pages = 0;; ++pages) {
      Result<ShardLogPage> page = store_->ShardLog(ds, shard, after, limit);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      EXPECT_LE(page->cells.size(), static_cast<size_t>(limit));
      if (page->cells.empty()) {
        EXPECT_EQ(after, page->next_after);
        break;
      }
      EXPECT_EQ(page->cells.back().added_id, page->next_after);
      for (Cell& c : page->cells) {
        EXPECT_GT(c.added_id, after) << "log out of order in shard " << shard;
        EXPECT_EQ(shard, c.shard);
        after = c.added_id;
        out.push_back(std::move(c));
      }
      EXPECT_EQ(after, page->next_after);
      if (pages > 1000000) {
        ADD_FAILURE() << "shard log does not end";
        break;
      }
    }
    return out;
  }

  // Cells of `row` in the whole shard log after `after`.
  std::vector<Cell> RowInLog(const std::string& ds, const Uuid& row, uint64_t after) {
    std::vector<Cell> out;
    for (Cell& c : WalkLog(ds, ShardForRow(row, kStoreTestShards), after, 100))
      if (c.row_key == row) out.push_back(std::move(c));
    return out;
  }

  // A random row on `shard`.
  static Uuid RowOnShard(uint32_t shard) {
    for (;;) {
      Uuid u = Uuid::Random();
      if (ShardForRow(u, kStoreTestShards) == shard) return u;
    }
  }

  CellStore* store_ = nullptr;
};

inline std::vector<int64_t> Refs(const std::vector<Cell>& cells) {
  std::vector<int64_t> refs;
  for (const Cell& c : cells) refs.push_back(c.ref_key);
  return refs;
}

using ::cellar::testing::WaitFor;

}  // namespace cellar
