// Index queries: one shard (the shard-field value's), one index range scan
// over that shard's rows of its host's entry table.
//
//   IndexQuery q;
//   q.index = "driver_partner_index";
//   q.shard_value = "9b2c7a8e-...";                       // required
//   q.filters = {*ParseIndexFilter(def, "city_uuid = 5c4e...")};
//   q.limit = 50;                                         // then pass result.next_cursor
// Filters: = != < <= > >= on any indexed field, `in (a, b, c)`, and ranges as
// two conditions. Order: newest first (cell created_at) by default, or by one
// field (asc/desc); ties are broken by row key, so cursors are stable.
// `verify` re-reads each hit's latest cell and drops hits whose cell no longer
// matches the query (FriendFeed's read-time re-filter): use it when stale
// entries must never be returned.
// Queries read the serving version with the definition it was built from:
// while a changed definition's new version is building, the old version keeps
// answering with its own fields (asking for a field only the new one has is
// InvalidArgument until it serves).
// Thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"

namespace cellar {

struct IndexFilter {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kIn };
  std::string field;
  Op op = Op::kEq;
  std::vector<SqlParam> values;  // one, or several for kIn
};

// "city_uuid = 5c4e...", "trip_created_at >= 2026-01-01T00:00:00Z",
// "status in (a, b)". InvalidArgument names the unknown field or bad value.
Result<IndexFilter> ParseIndexFilter(const IndexDefinition& def, const std::string& text);

struct IndexQuery {
  std::string index;
  std::string shard_value;  // text form of the shard field's value
  std::vector<IndexFilter> filters;
  std::vector<std::string> fields;  // fields to return; empty = all
  std::string order_by;             // a field; empty = newest first
  bool descending = true;
  int limit = 100;     // 1..1000
  std::string cursor;  // from a previous result
  bool verify = false;
  // A put's position token (cells/log_position.h): answer only once the index
  // worker has applied everything of that put's shard up to it, waiting up to
  // limits.index_wait_ms. Empty: answer at once (eventually consistent).
  std::string after;
};

struct IndexHit {
  Uuid row_key;
  std::string column_key;
  int64_t ref_key = 0;
  nlohmann::json fields;  // field path -> value
};

struct IndexQueryResult {
  std::vector<IndexHit> hits;
  std::string next_cursor;  // empty when there is no further page
  int version = 0;          // the physical index version read
  int dropped_by_verify = 0;
};

class IndexReader {
 public:
  // `store` not owned. `definitions` are copied.
  IndexReader(CellStore* store, std::vector<IndexDefinition> definitions)
      : store_(store), defs_(std::move(definitions)), catalog_(store) {}
  // NotFound for an unknown or never-applied index; InvalidArgument for a bad
  // query (names what), including a malformed `after` token or one of another
  // datastore, cluster or host; Unavailable when the shard is down;
  // DeadlineExceeded when the worker has not applied `after` within
  // limits.index_wait_ms (says how far it is).
  Result<IndexQueryResult> Query(const IndexQuery& q);
  const IndexDefinition* Find(const std::string& index) const;

 private:
  // The definition of physical version `v` (the serving one may predate `current`).
  Result<IndexDefinition> VersionDefinition(const IndexDefinition& current, const IndexVersion& v);

  CellStore* store_;
  std::vector<IndexDefinition> defs_;
  IndexCatalog catalog_;
  Mutex mu_;
  std::map<std::pair<std::string, int>, IndexDefinition> version_defs_ GUARDED_BY(mu_);
};

}  // namespace cellar
