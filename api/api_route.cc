#include "api/api_route.h"

#include <algorithm>

namespace cellar {
namespace {

// Splits "/a/b/c" into {"a","b","c"}. False for a path not starting with '/'
// or holding an empty segment ("//", trailing '/').
bool SplitPath(std::string_view path, std::vector<std::string_view>* out) {
  if (path.size() < 2 || path[0] != '/') return false;
  path.remove_prefix(1);
  while (true) {
    const size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    if (seg.empty()) return false;
    out->push_back(seg);
    if (slash == std::string_view::npos) return true;
    path.remove_prefix(slash + 1);
  }
}

bool IsParam(std::string_view seg) {
  return seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
}

// The number of literal segments of `tmpl` when it matches `segs`, else -1.
int Specificity(std::string_view tmpl, const std::vector<std::string_view>& segs) {
  std::vector<std::string_view> t;
  if (!SplitPath(tmpl, &t) || t.size() != segs.size()) return -1;
  int literals = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (IsParam(t[i])) continue;
    if (t[i] != segs[i]) return -1;
    ++literals;
  }
  return literals;
}

void Bind(std::string_view tmpl, const std::vector<std::string_view>& segs, RouteMatch* m) {
  std::vector<std::string_view> t;
  SplitPath(tmpl, &t);
  for (size_t i = 0; i < t.size(); ++i) {
    if (!IsParam(t[i])) continue;
    const std::string_view name = t[i].substr(1, t[i].size() - 2);
    std::string value(segs[i]);
    if (name == "datastore") m->datastore = std::move(value);
    if (name == "row_key") m->row = std::move(value);
    if (name == "column") m->column = std::move(value);
    if (name == "ref_key") m->ref_key = std::move(value);
    if (name == "shard") m->shard = std::move(value);
    if (name == "index") m->index = std::move(value);
  }
}

}  // namespace

const std::vector<RouteSpec>& Routes() {
  // Auth (401/403) applies to every /v1 datastore route; 404 covers an
  // unknown datastore; PUT/POST/DELETE bodies are read by the binding, which
  // answers 413 (over --max-request-bytes) and 415 (multipart).
  static const std::vector<RouteSpec> kRoutes = {
      {RouteKind::kHealthz, "GET", "/healthz", {200}},
      {RouteKind::kReadyz, "GET", "/readyz", {200, 503}},
      {RouteKind::kMetrics, "GET", "/metrics", {200}},
      {RouteKind::kOpenApi, "GET", "/v1/openapi.json", {200}},
      {RouteKind::kGetCell,
       "GET",
       "/v1/{datastore}/cells/{row_key}/{column}/{ref_key}",
       {200, 400, 401, 403, 404, 503}},
      {RouteKind::kPutCell,
       "PUT",
       "/v1/{datastore}/cells/{row_key}/{column}/{ref_key}",
       {200, 201, 400, 401, 403, 404, 409, 413, 415, 503}},
      {RouteKind::kVersions,
       "GET",
       "/v1/{datastore}/cells/{row_key}/{column}/versions",
       {200, 400, 401, 403, 404, 503}},
      {RouteKind::kLatest,
       "GET",
       "/v1/{datastore}/cells/{row_key}/{column}",
       {200, 400, 401, 403, 404, 503}},
      {RouteKind::kErase,
       "DELETE",
       "/v1/{datastore}/cells/{row_key}/{column}",
       {200, 400, 401, 403, 404, 409, 413, 415, 503}},
      {RouteKind::kRow, "GET", "/v1/{datastore}/cells/{row_key}", {200, 400, 401, 403, 404, 503}},
      {RouteKind::kBatch,
       "POST",
       "/v1/{datastore}/cells:batch",
       {200, 400, 401, 403, 404, 413, 415}},
      {RouteKind::kShardLog,
       "GET",
       "/v1/{datastore}/shards/{shard}/log",
       {200, 400, 401, 403, 404, 503}},
      {RouteKind::kIndexQuery,
       "GET",
       "/v1/{datastore}/indexes/{index}",
       {200, 400, 401, 403, 404, 503}},
  };
  return kRoutes;
}

const RouteSpec* FindRoute(RouteKind kind) {
  for (const RouteSpec& r : Routes())
    if (r.kind == kind) return &r;
  return nullptr;
}

RouteMatch MatchRoute(std::string_view method, std::string_view path) {
  std::vector<std::string_view> segs;
  RouteMatch none;
  if (!SplitPath(path, &segs)) return none;
  if (method == "HEAD") method = "GET";
  int best = -1;
  for (const RouteSpec& r : Routes()) best = std::max(best, Specificity(r.path, segs));
  if (best < 0) return none;
  RouteMatch m;
  m.status = 405;
  for (const RouteSpec& r : Routes()) {
    if (Specificity(r.path, segs) != best) continue;
    if (r.method == method) {
      RouteMatch found;
      found.kind = r.kind;
      Bind(r.path, segs, &found);
      return found;
    }
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += r.method;
  }
  return m;
}

const char* RouteLabel(RouteKind kind) {
  switch (kind) {
    case RouteKind::kUnmatched:
      return "unmatched";
    case RouteKind::kHealthz:
      return "healthz";
    case RouteKind::kReadyz:
      return "readyz";
    case RouteKind::kMetrics:
      return "metrics";
    case RouteKind::kOpenApi:
      return "openapi";
    case RouteKind::kPutCell:
      return "put_cell";
    case RouteKind::kGetCell:
      return "get_cell";
    case RouteKind::kVersions:
      return "versions";
    case RouteKind::kLatest:
      return "latest";
    case RouteKind::kErase:
      return "erase";
    case RouteKind::kRow:
      return "row";
    case RouteKind::kBatch:
      return "batch";
    case RouteKind::kShardLog:
      return "shard_log";
    case RouteKind::kIndexQuery:
      return "index_query";
  }
  return "unmatched";
}

bool IsWriteRoute(RouteKind kind) {
  return kind == RouteKind::kPutCell || kind == RouteKind::kErase || kind == RouteKind::kBatch;
}

bool IsDatastoreRoute(RouteKind kind) {
  switch (kind) {
    case RouteKind::kUnmatched:
    case RouteKind::kHealthz:
    case RouteKind::kReadyz:
    case RouteKind::kMetrics:
    case RouteKind::kOpenApi:
      return false;
    default:
      return true;
  }
}

}  // namespace cellar
