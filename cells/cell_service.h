// CellService: the store contract. The operations a user of Cellar calls on
// cells, implemented alike by the MySQL store (CellStore, cells/cell_store.h),
// the HTTP client of the worker nodes (Client, client/cellar_client.h) and the
// in-memory model (MemoryCellStore, cells/testing/memory_cell_store.h). The
// same input gives the same Status code from every implementation; one typed
// test suite (tests/store_contract_test.cc) runs the contract against all
// three.
//
// The contract of each method (datastore and column names checked against the
// cluster config; bodies must be JSON objects within limits.max_body_bytes and
// limits.max_body_depth):
//   Put       InvalidArgument for bad input (unknown datastore or column,
//             negative ref_key, non-object, oversized or too deep body), and
//             nothing is written; Conflict when (row, column, ref_key) holds a
//             different body; created=false when it holds the identical one (a
//             retry); Unavailable when the shard's host cannot be reached.
//   PutBatch  one result per input cell, in order; the cells of one row commit
//             or fail together; InvalidArgument for every cell of a batch with
//             any bad cell, or over limits.max_batch_cells.
//   Get       the version ref_key; NotFound when absent or expired.
//   Latest    the highest ref_key (a tombstone hides the column: NotFound).
//   Row       the latest live version of every column of the row.
//   Versions  newest first within the query's bounds (limit 1..10000, else
//             InvalidArgument).
//   Erase     writes a tombstone above the latest version (idempotent: a
//             column whose latest version is already a tombstone answers
//             created=false with it); with expected_ref_key, Conflict unless
//             that is the latest version.
//   ShardLog  cells of one shard in added_id order after after_added_id.
//   CheckReady OK when every shard's host answers; Unavailable naming those
//             that do not.
//
// Threading: every implementation is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/uuid.h"
#include "cells/cell.h"

namespace cellar {

class CellService {
 public:
  virtual ~CellService() = default;

  [[nodiscard]] virtual Result<PutResult> Put(const std::string& datastore,
                                              const CellWrite& cell) = 0;
  [[nodiscard]] virtual std::vector<Result<PutResult>> PutBatch(
      const std::string& datastore, const std::vector<CellWrite>& cells) = 0;
  // Reads take ReadOptions (cell.h): primary (default) or replica, and a
  // position to read after. Every override declares the same default.
  [[nodiscard]] virtual Result<Cell> Get(const std::string& datastore, const Uuid& row,
                                         const std::string& column, int64_t ref_key,
                                         const ReadOptions& read = {}) = 0;
  [[nodiscard]] virtual Result<Cell> Latest(const std::string& datastore, const Uuid& row,
                                            const std::string& column,
                                            const ReadOptions& read = {}) = 0;
  // Get, Latest, Row and Versions with each body as compact JSON text
  // (CellText): the same cells and errors, for callers that pass bodies on as
  // text (the HTTP API). These defaults read the documents and print them;
  // CellStore prints the stored bytes without building a document.
  [[nodiscard]] virtual Result<CellText> GetText(const std::string& datastore, const Uuid& row,
                                                 const std::string& column, int64_t ref_key,
                                                 const ReadOptions& read = {}) {
    CELLAR_ASSIGN_OR_RETURN(Cell cell, Get(datastore, row, column, ref_key, read));
    return ToCellText(std::move(cell));
  }
  [[nodiscard]] virtual Result<CellText> LatestText(const std::string& datastore, const Uuid& row,
                                                    const std::string& column,
                                                    const ReadOptions& read = {}) {
    CELLAR_ASSIGN_OR_RETURN(Cell cell, Latest(datastore, row, column, read));
    return ToCellText(std::move(cell));
  }
  [[nodiscard]] virtual Result<std::vector<Cell>> Row(const std::string& datastore, const Uuid& row,
                                                      const ReadOptions& read = {}) = 0;
  [[nodiscard]] virtual Result<std::vector<Cell>> Versions(const std::string& datastore,
                                                           const Uuid& row,
                                                           const std::string& column,
                                                           const VersionQuery& query,
                                                           const ReadOptions& read = {}) = 0;
  [[nodiscard]] virtual Result<std::vector<CellText>> RowText(const std::string& datastore,
                                                              const Uuid& row,
                                                              const ReadOptions& read = {}) {
    CELLAR_ASSIGN_OR_RETURN(std::vector<Cell> cells, Row(datastore, row, read));
    return ToCellTexts(std::move(cells));
  }
  [[nodiscard]] virtual Result<std::vector<CellText>> VersionsText(const std::string& datastore,
                                                                   const Uuid& row,
                                                                   const std::string& column,
                                                                   const VersionQuery& query,
                                                                   const ReadOptions& read = {}) {
    CELLAR_ASSIGN_OR_RETURN(std::vector<Cell> cells, Versions(datastore, row, column, query, read));
    return ToCellTexts(std::move(cells));
  }
  [[nodiscard]] virtual Result<PutResult> Erase(
      const std::string& datastore, const Uuid& row, const std::string& column,
      std::optional<int64_t> expected_ref_key = std::nullopt) = 0;
  [[nodiscard]] virtual Result<ShardLogPage> ShardLog(const std::string& datastore, uint32_t shard,
                                                      uint64_t after_added_id, int limit) = 0;
  [[nodiscard]] virtual Status CheckReady() = 0;
};

}  // namespace cellar
