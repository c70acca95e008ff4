// Routing of the HTTP API: which operation a (method, path) names.
//
// The one route table, Routes(), lists every operation the server answers
// with its OpenAPI path template and the HTTP status codes it can give. The
// dispatcher (MatchRoute) matches against it, and the OpenAPI test compares it
// with api/openapi.json, so a route added here without being documented there
// fails that test.
//
//   GET    /healthz  /readyz  /metrics  /v1/openapi.json
//   PUT    /v1/{datastore}/cells/{row_key}/{column}/{ref_key}   put_cell
//   GET    /v1/{datastore}/cells/{row_key}/{column}/{ref_key}   get_cell
//   GET    /v1/{datastore}/cells/{row_key}/{column}/versions    versions
//   GET    /v1/{datastore}/cells/{row_key}/{column}             latest
//   DELETE /v1/{datastore}/cells/{row_key}/{column}             erase
//   GET    /v1/{datastore}/cells/{row_key}                      row
//   POST   /v1/{datastore}/cells:batch                          batch
//   GET    /v1/{datastore}/shards/{shard}/log                   shard_log
//   GET    /v1/{datastore}/indexes/{index}                      index_query
//
// Matching is purely structural: segments are returned raw (already
// percent-decoded by the HTTP library) and validated by the handlers. An empty
// segment (a doubled or trailing '/') matches nothing. Among the templates
// matching a path, those with the most literal segments win ("versions" over
// {ref_key}); among them the method picks the route. HEAD is treated as GET.
// Threading: pure functions; Routes() is immutable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cellar {

enum class RouteKind {
  kUnmatched,
  kHealthz,
  kReadyz,
  kMetrics,
  kOpenApi,
  kPutCell,
  kGetCell,
  kVersions,
  kLatest,
  kErase,
  kRow,
  kBatch,
  kShardLog,
  kIndexQuery,
};

// One operation of the API.
struct RouteSpec {
  RouteKind kind;
  std::string_view method;  // "GET", "PUT", "POST", "DELETE"
  // OpenAPI path template: literal segments and {name} parameters, where name
  // is one of datastore, row_key, column, ref_key, shard, index.
  std::string_view path;
  // Every HTTP status the server can answer this operation with (besides 500,
  // a server bug, and transport errors of the HTTP binding: 414, 431).
  std::vector<int> statuses;
};

// The route table, in matching order.
const std::vector<RouteSpec>& Routes();

// The entry of `kind`; null for kUnmatched.
const RouteSpec* FindRoute(RouteKind kind);

struct RouteMatch {
  RouteKind kind = RouteKind::kUnmatched;
  // kUnmatched only: 404 when no route has this path, 405 when routes do but
  // not for this method (then `allow` lists the methods, e.g. "GET, PUT").
  int status = 404;
  std::string allow;
  // Raw path segments of the matched route (empty when not part of it).
  std::string datastore, row, column, ref_key, shard, index;
};

RouteMatch MatchRoute(std::string_view method, std::string_view path);

// Stable metrics label of a route: "put_cell", "latest", ..., "unmatched".
const char* RouteLabel(RouteKind kind);

// True for routes that change data (need the write scope).
bool IsWriteRoute(RouteKind kind);

// True for /v1 routes about a datastore (auth applies; {datastore} in the path).
bool IsDatastoreRoute(RouteKind kind);

}  // namespace cellar
