#include "api/index_backend.h"

#include <utility>

namespace cellar {
namespace {

class StoreIndexBackend : public IndexBackend {
 public:
  StoreIndexBackend(CellStore* store, std::vector<IndexDefinition> indexes,
                    MetricsRegistry* metrics)
      : indexes_(std::move(indexes)), reader_(store, indexes_, kServingVersionCacheMs, metrics) {}

  const IndexDefinition* FindIndex(const std::string& datastore,
                                   const std::string& name) const override {
    for (const IndexDefinition& d : indexes_)
      if (d.table == name && d.datastore == datastore) return &d;
    return nullptr;
  }
  Result<IndexQueryResult> QueryIndex(const IndexQuery& query) override {
    return reader_.Query(query);
  }

 private:
  const std::vector<IndexDefinition> indexes_;
  IndexReader reader_;  // thread-safe
};

}  // namespace

std::unique_ptr<IndexBackend> NewIndexBackend(CellStore* store,
                                              std::vector<IndexDefinition> indexes,
                                              MetricsRegistry* metrics) {
  return std::make_unique<StoreIndexBackend>(store, std::move(indexes), metrics);
}

}  // namespace cellar
