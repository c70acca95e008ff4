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
// A reader keeps the serving version it read from the registry (on the first
// host) for serving_version_cache_ms, so a query is one statement on its
// shard's host, not two on two hosts; once a newer version serves, a reader
// may read the one it retired for that long (entries at most that much staler
// than the worker's lag). A query with `after` reads the registry itself, and
// a read of a cached version that fails for any reason but an unreachable
// host reads the registry again and retries once (a newer version may serve:
// the cached one's tables dropped, which index_retirement.h makes rare by
// waiting longer than the default bound, or a field only the newer one has).
// Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"
#include "indexes/index_position_watcher.h"

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

// How long an IndexReader uses a serving version it read (milliseconds).
constexpr int kServingVersionCacheMs = 1000;

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
  // Where the entries are read (cells/cell.h): the primary of the host
  // holding the query's shard, or one of its replicas (the primary when none
  // answers), stale by at most the replica's lag. With `after`, a replica is
  // read only once it has applied everything that host's primary had
  // committed when the worker was seen past the position (MASTER_GTID_WAIT,
  // within what is left of limits.index_wait_ms), else the primary answers:
  // the query still sees that put. `verify` re-reads the cells with the same
  // preference and `after` (CellStore::Latest), so it agrees with the entries.
  ReadPreference read = ReadPreference::kPrimary;
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
  // serving_version_cache_ms: how long a serving version read from the
  // registry is used (0: read it for every query). A longer bound only
  // lengthens how long a retired version may still be read (its entries as
  // the worker left them when it stopped writing it). `metrics` (not owned,
  // may be null) gets the waits for `after` tokens (index_position_watcher.h).
  IndexReader(CellStore* store, std::vector<IndexDefinition> definitions,
              int serving_version_cache_ms = kServingVersionCacheMs,
              MetricsRegistry* metrics = nullptr)
      : store_(store),
        defs_(std::move(definitions)),
        catalog_(store),
        positions_(store, metrics),
        serving_cache_ms_(serving_version_cache_ms) {}
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
  struct ServingRead {
    IndexVersion version;
    bool cached = false;  // from the cache, not read just now
  };
  // The serving version of `index`: cached unless `fresh` or older than
  // serving_cache_ms_; a version read from the registry replaces the cached one.
  Result<ServingRead> ServingVersion(const std::string& index, bool fresh);
  void ForgetServingVersion(const std::string& index);
  // A query's fields resolved against one definition (index_query.cc).
  struct Resolved;
  // Resolves `q` against `d`; `note` ends each error message (which version
  // the query was resolved against, when not the caller's).
  static Result<Resolved> Resolve(const IndexQuery& q, const IndexDefinition& d,
                                  const std::string& note);
  using Clock = std::chrono::steady_clock;
  // The query against physical `version` (its own definition's fields);
  // `resolved` is `q` resolved against `current`, used as is when `version`
  // was built from `current`. With `catch_up_by`, a replica read waits until
  // then for the replica to catch up with its primary (ReadShardHost).
  Result<IndexQueryResult> QueryVersion(const IndexQuery& q, const IndexDefinition& current,
                                        const Resolved& resolved, const IndexVersion& version,
                                        std::optional<Clock::time_point> catch_up_by);

  CellStore* store_;
  std::vector<IndexDefinition> defs_;
  IndexCatalog catalog_;
  IndexPositionWatcher positions_;  // shared by the queries waiting for an `after` token
  Mutex mu_;
  std::map<std::pair<std::string, int>, IndexDefinition> version_defs_ GUARDED_BY(mu_);
  struct CachedServing {
    IndexVersion version;
    std::chrono::steady_clock::time_point read_at;
  };
  const int serving_cache_ms_;
  std::map<std::string, CachedServing> serving_ GUARDED_BY(mu_);  // by index table
};

}  // namespace cellar
