// IndexBackend: the index queries the HTTP API serves, as an interface, so
// that request handling (cell_api.h) runs over the real indexes in the server
// and without any in unit tests and fuzzers.
//
// Threading: implementations are thread-safe; the HTTP server calls them from
// many worker threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "cells/cell_store.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"

namespace cellar {

class IndexBackend {
 public:
  virtual ~IndexBackend() = default;
  // The definition of index `name` over `datastore`, or null when this
  // backend serves no such index.
  virtual const IndexDefinition* FindIndex(const std::string& datastore,
                                           const std::string& name) const = 0;
  // The contract of IndexReader::Query (indexes/index_query.h).
  // REQUIRES: FindIndex(datastore, query.index) is not null.
  [[nodiscard]] virtual Result<IndexQueryResult> QueryIndex(const IndexQuery& query) = 0;
};

// Serves `indexes` (validated definitions, e.g. from LoadIndexDefinitions)
// from `store`, which must outlive the backend (not owned). `metrics` (not
// owned, may be null: none) gets the queries' waits for position tokens and
// must outlive the backend.
std::unique_ptr<IndexBackend> NewIndexBackend(CellStore* store,
                                              std::vector<IndexDefinition> indexes,
                                              MetricsRegistry* metrics = nullptr);

}  // namespace cellar
