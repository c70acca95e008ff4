// MemoryCellStore: the in-memory model of the store contract (CellService,
// cells/cell_service.h): idempotent puts, Conflict on a different body,
// per-row atomic batches, tombstones, per-shard logs; no TTL. For unit tests
// and fuzzers of the API without MySQL, and as the model the contract suite
// holds the MySQL store and the HTTP client against. SetUnavailable(true) makes every call fail
// with Unavailable, as a down shard host would. Threading: thread-safe (one mutex).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "cells/cell_service.h"
#include "config/cluster_config.h"

namespace cellar {

class MemoryCellStore : public CellService {
 public:
  explicit MemoryCellStore(const ClusterConfig& config) : config_(config) {}

  Result<PutResult> Put(const std::string& ds, const CellWrite& cell) override;
  std::vector<Result<PutResult>> PutBatch(const std::string& ds,
                                          const std::vector<CellWrite>& cells) override;
  // One copy: `read` is checked (a bad position token is InvalidArgument)
  // and otherwise changes nothing.
  Result<Cell> Get(const std::string& ds, const Uuid& row, const std::string& column,
                   int64_t ref_key, const ReadOptions& read = {}) override;
  Result<Cell> Latest(const std::string& ds, const Uuid& row, const std::string& column,
                      const ReadOptions& read = {}) override;
  Result<std::vector<Cell>> Row(const std::string& ds, const Uuid& row,
                                const ReadOptions& read = {}) override;
  Result<std::vector<Cell>> Versions(const std::string& ds, const Uuid& row,
                                     const std::string& column, const VersionQuery& q,
                                     const ReadOptions& read = {}) override;
  Result<PutResult> Erase(const std::string& ds, const Uuid& row, const std::string& column,
                          std::optional<int64_t> expected_ref_key) override;
  Result<ShardLogPage> ShardLog(const std::string& ds, uint32_t shard, uint64_t after,
                                int limit) override;
  Status CheckReady() override;

  void SetUnavailable(bool unavailable);
  // Cells stored so far (all datastores), for "nothing was written" checks.
  size_t size() const;

 private:
  // InvalidArgument for a position token that is not one of `ds`'s.
  Status CheckRead(const std::string& ds, const ReadOptions& read) const;
  using Key = std::tuple<std::string, Uuid, std::string, int64_t>;  // ds, row, column, ref
  Status CheckWrite(const std::string& ds, const CellWrite& cell) const REQUIRES(mu_);
  Status CheckColumnLocked(const std::string& ds, const std::string& column) const REQUIRES(mu_);
  // REQUIRES: mu_ held and the cell checked.
  PutResult AppendLocked(const std::string& ds, const Uuid& row, const std::string& column,
                         int64_t ref, const nlohmann::json& body, bool tombstone) REQUIRES(mu_);
  std::vector<Cell> VersionsLocked(const std::string& ds, const Uuid& row,
                                   const std::string& column) const REQUIRES(mu_);

  const ClusterConfig config_;
  mutable Mutex mu_;
  bool unavailable_ GUARDED_BY(mu_) = false;
  std::map<Key, Cell> cells_ GUARDED_BY(mu_);
  std::map<std::pair<std::string, uint32_t>, std::vector<Cell>> logs_ GUARDED_BY(mu_);
};

}  // namespace cellar
