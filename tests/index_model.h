// A brute-force model of what a secondary index must hold and answer,
// computed from the latest cells (shard logs) with its own field extraction,
// independently of the index code (indexes/), and helpers to compare it with
// the index's answers. Used by the index suites and the history check.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cells/cell_store.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"

namespace cellar::idxtest {

// The latest version (highest ref_key, tombstones included) of every
// (row, column) of `datastore`, read from every shard's log.
std::map<std::pair<Uuid, std::string>, Cell> LatestCells(CellStore& store,
                                                         const std::string& datastore);

struct ModelHit {
  Uuid row_key;
  std::string column;
  int64_t ref_key = 0;
  nlohmann::json fields;  // path -> value, as queries return them
  bool operator==(const ModelHit&) const = default;
};
std::string Describe(const std::vector<ModelHit>& hits, size_t max = 8);

// What the index must hold: the entries the latest cells call for (its own
// field extraction, not ExtractEntry), keyed by (row, column).
class Model {
 public:
  Model(const IndexDefinition& def, const std::map<std::pair<Uuid, std::string>, Cell>& latest);
  // The full, ordered answer of `q` (cursor and limit ignored: every page).
  std::vector<ModelHit> Answer(const IndexQuery& q) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    ModelHit hit;
    MicrosSinceEpoch created_at = 0;
  };
  IndexDefinition def_;
  std::vector<Entry> entries_;
};

// Runs `q` page by page (q.limit per page) and returns every hit in order.
// Fails the test (and returns what it has) on an error, a repeated hit or a
// runaway cursor.
std::vector<ModelHit> QueryAll(IndexReader& reader, IndexQuery q, int* pages = nullptr);
// A single Query; the result converted to ModelHits.
std::vector<ModelHit> ToHits(const IndexQueryResult& r);

// "" when `got` equals `want`, else a description of the difference.
std::string Diff(const std::vector<ModelHit>& want, const std::vector<ModelHit>& got);

}  // namespace cellar::idxtest
