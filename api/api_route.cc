#include "api/api_route.h"

#include <vector>

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

struct Choice {
  std::string_view method;
  RouteKind kind;
};

// Picks the route for `method` among those sharing one path shape.
RouteMatch Pick(std::string_view method, std::initializer_list<Choice> choices) {
  RouteMatch m;
  if (method == "HEAD") method = "GET";
  for (const Choice& c : choices) {
    if (c.method == method) {
      m.kind = c.kind;
      return m;
    }
  }
  m.status = 405;
  for (const Choice& c : choices) {
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += c.method;
  }
  return m;
}

}  // namespace

RouteMatch MatchRoute(std::string_view method, std::string_view path) {
  std::vector<std::string_view> s;
  RouteMatch none;
  if (!SplitPath(path, &s) || s.size() > 6) return none;
  if (s.size() == 1) {
    if (s[0] == "healthz") return Pick(method, {{"GET", RouteKind::kHealthz}});
    if (s[0] == "readyz") return Pick(method, {{"GET", RouteKind::kReadyz}});
    if (s[0] == "metrics") return Pick(method, {{"GET", RouteKind::kMetrics}});
    return none;
  }
  if (s[0] != "v1" || s.size() < 3) return none;
  RouteMatch m;
  const std::string_view what = s[2];
  if (what == "cells:batch" && s.size() == 3) {
    m = Pick(method, {{"POST", RouteKind::kBatch}});
  } else if (what == "cells" && s.size() == 4) {
    m = Pick(method, {{"GET", RouteKind::kRow}});
    m.row = s[3];
  } else if (what == "cells" && s.size() == 5) {
    m = Pick(method, {{"GET", RouteKind::kLatest}, {"DELETE", RouteKind::kErase}});
    m.row = s[3];
    m.column = s[4];
  } else if (what == "cells" && s.size() == 6 && s[5] == "versions") {
    m = Pick(method, {{"GET", RouteKind::kVersions}});
    m.row = s[3];
    m.column = s[4];
  } else if (what == "cells" && s.size() == 6) {
    m = Pick(method, {{"GET", RouteKind::kGetCell}, {"PUT", RouteKind::kPutCell}});
    m.row = s[3];
    m.column = s[4];
    m.ref_key = s[5];
  } else if (what == "shards" && s.size() == 5 && s[4] == "log") {
    m = Pick(method, {{"GET", RouteKind::kShardLog}});
    m.shard = s[3];
  } else if (what == "indexes" && s.size() == 4) {
    m = Pick(method, {{"GET", RouteKind::kIndexQuery}});
    m.index = s[3];
  } else {
    return none;
  }
  m.datastore = s[1];
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

}  // namespace cellar
