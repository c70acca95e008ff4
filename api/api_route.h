// Routing of the HTTP API: which operation a (method, path) names.
//
//   GET    /healthz  /readyz  /metrics
//   PUT    /v1/<ds>/cells/<row>/<column>/<ref_key>    put_cell
//   GET    /v1/<ds>/cells/<row>/<column>/<ref_key>    get_cell
//   GET    /v1/<ds>/cells/<row>/<column>/versions     versions
//   GET    /v1/<ds>/cells/<row>/<column>              latest
//   DELETE /v1/<ds>/cells/<row>/<column>              erase
//   GET    /v1/<ds>/cells/<row>                       row
//   POST   /v1/<ds>/cells:batch                       batch
//   GET    /v1/<ds>/shards/<n>/log                    shard_log
//   GET    /v1/<ds>/indexes/<name>                    index_query
//
// Matching is purely structural: segments are returned raw (already
// percent-decoded by the HTTP library) and validated by the handlers. An empty
// segment (a doubled or trailing '/') matches nothing. HEAD is treated as GET.
// Threading: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace cellar {

enum class RouteKind {
  kUnmatched,
  kHealthz,
  kReadyz,
  kMetrics,
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

}  // namespace cellar
