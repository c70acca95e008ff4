#include "workers/http/cell_backend.h"

#include "cells/mysql_client.h"

namespace cellar {
namespace {

class StoreBackend : public CellBackend {
 public:
  StoreBackend(CellStore* store, std::vector<IndexDefinition> indexes)
      : store_(store), indexes_(std::move(indexes)), reader_(store, indexes_) {}

  Result<PutResult> Put(const std::string& ds, const CellWrite& cell) override {
    return store_->Put(ds, cell);
  }
  std::vector<Result<PutResult>> PutBatch(const std::string& ds,
                                          const std::vector<CellWrite>& cells) override {
    return store_->PutBatch(ds, cells);
  }
  Result<Cell> Get(const std::string& ds, const Uuid& row, const std::string& column,
                   int64_t ref_key) override {
    return store_->Get(ds, row, column, ref_key);
  }
  Result<Cell> Latest(const std::string& ds, const Uuid& row, const std::string& column) override {
    return store_->Latest(ds, row, column);
  }
  Result<std::vector<Cell>> Row(const std::string& ds, const Uuid& row) override {
    return store_->Row(ds, row);
  }
  Result<std::vector<Cell>> Versions(const std::string& ds, const Uuid& row,
                                     const std::string& column, const VersionQuery& q) override {
    return store_->Versions(ds, row, column, q);
  }
  Result<PutResult> Erase(const std::string& ds, const Uuid& row, const std::string& column,
                          std::optional<int64_t> expected_ref_key) override {
    return store_->Erase(ds, row, column, expected_ref_key);
  }
  Result<ShardLogPage> ShardLog(const std::string& ds, uint32_t shard, uint64_t after,
                                int limit) override {
    return store_->ShardLog(ds, shard, after, limit);
  }

  const IndexDefinition* FindIndex(const std::string& ds, const std::string& name) override {
    for (const IndexDefinition& d : indexes_)
      if (d.table == name && d.datastore == ds) return &d;
    return nullptr;
  }
  Result<IndexQueryResult> QueryIndex(const IndexQuery& query) override {
    return reader_.Query(query);
  }

  Status CheckReady() override {
    std::string down;
    const auto& hosts = store_->config().mysql.hosts;
    for (size_t h = 0; h < hosts.size(); ++h) {
      const MysqlHostConfig& host = hosts[h];
      auto lease = store_->PoolForHost(h).Acquire();
      Status s = lease.ok() ? (*lease)->Query("SELECT 1").status() : lease.status();
      if (s.ok()) continue;
      if (!down.empty()) down += "; ";
      down += "host " + host.name + " (shards " + host.ShardList() + "): " + s.message();
    }
    if (down.empty()) return Status::Ok();
    return Unavailable(down);
  }

 private:
  CellStore* store_;
  const std::vector<IndexDefinition> indexes_;
  IndexReader reader_;  // thread-safe
};

}  // namespace

std::unique_ptr<CellBackend> NewStoreBackend(CellStore* store,
                                             std::vector<IndexDefinition> indexes) {
  return std::make_unique<StoreBackend>(store, std::move(indexes));
}

}  // namespace cellar
