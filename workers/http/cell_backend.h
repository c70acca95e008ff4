// CellBackend: the store operations the HTTP API serves, as an interface, so
// that the request handling (cell_api.h) can run over the real CellStore in
// the server and over an in-memory store in unit tests and fuzzers.
//
// Every method has exactly the contract of the CellStore method of the same
// name (cells/cell_store.h): errors are Status values (InvalidArgument,
// NotFound, Conflict, Unavailable, Aborted, ...), nothing throws.
//
// Threading: implementations are thread-safe; the HTTP server calls them from
// many worker threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "cells/cell_store.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"

namespace cellar {

class CellBackend {
 public:
  virtual ~CellBackend() = default;

  virtual Result<PutResult> Put(const std::string& datastore, const CellWrite& cell) = 0;
  virtual std::vector<Result<PutResult>> PutBatch(const std::string& datastore,
                                                  const std::vector<CellWrite>& cells) = 0;
  virtual Result<Cell> Get(const std::string& datastore, const Uuid& row, const std::string& column,
                           int64_t ref_key) = 0;
  virtual Result<Cell> Latest(const std::string& datastore, const Uuid& row,
                              const std::string& column) = 0;
  virtual Result<std::vector<Cell>> Row(const std::string& datastore, const Uuid& row) = 0;
  virtual Result<std::vector<Cell>> Versions(const std::string& datastore, const Uuid& row,
                                             const std::string& column,
                                             const VersionQuery& query) = 0;
  // expected_ref_key: see CellStore::Erase (nullopt: erase whatever is latest).
  virtual Result<PutResult> Erase(const std::string& datastore, const Uuid& row,
                                  const std::string& column,
                                  std::optional<int64_t> expected_ref_key) = 0;
  virtual Result<ShardLogPage> ShardLog(const std::string& datastore, uint32_t shard,
                                        uint64_t after_added_id, int limit) = 0;

  // Index queries. The definition of index `name` over `datastore`, or null
  // when this backend serves no such index (the default: none).
  virtual const IndexDefinition* FindIndex(const std::string& datastore, const std::string& name) {
    (void)datastore;
    (void)name;
    return nullptr;
  }
  // The contract of IndexReader::Query (indexes/index_query.h). REQUIRES:
  // FindIndex(datastore, query.index) is not null. Default: NotFound.
  virtual Result<IndexQueryResult> QueryIndex(const IndexQuery& query) {
    return NotFound("index '" + query.index + "' is not served here");
  }

  // OK when every MySQL host (and so every shard) answers a trivial query;
  // otherwise Unavailable naming the hosts and shard ranges that did not.
  virtual Status CheckReady() = 0;
};

// A backend over `store`, which must outlive it (not owned), serving index
// queries for `indexes` (validated definitions, e.g. from LoadIndexDefinitions).
std::unique_ptr<CellBackend> NewStoreBackend(CellStore* store,
                                             std::vector<IndexDefinition> indexes = {});

}  // namespace cellar
