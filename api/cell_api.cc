#include "api/cell_api.h"

#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "api/api_wire.h"
#include "api/batch_request.h"
#include "api/index_request.h"
#include "api/json_body.h"
#include "api/openapi_document.h"
#include "api/request_fields.h"
#include "base/time.h"
#include "cells/log_position.h"
#include "cells/shard_map.h"

namespace cellar {
namespace {

using json = nlohmann::json;

ApiResponse Json(int status, const json& body) {
  ApiResponse r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

// 200 with JSON text built from cells read as text (CellJsonText): their
// bodies' stored bytes printed straight to JSON, no document built and
// printed again.
ApiResponse Text200(std::string json_text) {
  ApiResponse r;
  r.status = 200;
  r.body = std::move(json_text);
  return r;
}

ApiResponse HttpError(int status, std::string_view code, std::string_view message) {
  return Json(status, ErrorJson(code, message));
}

bool IsServerSide(StatusCode c) {
  return c == StatusCode::kUnavailable || c == StatusCode::kDeadlineExceeded ||
         c == StatusCode::kInternal;
}

// The query parameters, checked against `allowed`; duplicates and unknown
// names are InvalidArgument.
Result<std::map<std::string, std::string>> QueryParams(
    const ApiRequest& req, std::initializer_list<std::string_view> allowed) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : req.params) {
    bool known = false;
    for (auto a : allowed) known |= (a == name);
    if (!known) {
      std::string list;
      for (auto a : allowed) list += " " + std::string(a);
      return InvalidArgument("unknown query parameter '" + Shown(name) +
                             "' (allowed:" + (list.empty() ? " none" : list) + ")");
    }
    if (!out.emplace(name, value).second)
      return InvalidArgument("query parameter '" + name + "' is given more than once");
  }
  return out;
}

// `read` (primary | replica) and `after` (a position token) of a read.
Result<ReadOptions> ParseReadOptions(const std::map<std::string, std::string>& p) {
  ReadOptions read;
  if (auto it = p.find("read"); it != p.end()) {
    CELLAR_ASSIGN_OR_RETURN(read.preference, ParseReadPreference(it->second));
  }
  if (auto it = p.find("after"); it != p.end()) read.after = it->second;
  return read;
}

Result<VersionQuery> ParseVersionQuery(const std::map<std::string, std::string>& p) {
  VersionQuery q;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (auto it = p.find("max_ref"); it != p.end()) {
    CELLAR_ASSIGN_OR_RETURN(q.max_ref, ParseDecimal("max_ref", it->second, 0, kMax));
  }
  if (auto it = p.find("min_ref"); it != p.end()) {
    CELLAR_ASSIGN_OR_RETURN(q.min_ref, ParseDecimal("min_ref", it->second, 0, kMax));
  }
  for (auto [name, bound] : {std::pair{"as_of", &q.as_of}, std::pair{"since", &q.since}}) {
    auto it = p.find(name);
    if (it == p.end()) continue;
    auto t = ParseRfc3339(it->second);
    if (!t.ok())
      return InvalidArgument(std::string(name) +
                             " must be an RFC 3339 time like 2026-01-01T00:00:00Z, got '" +
                             Shown(it->second) + "'");
    *bound = *t;
  }
  if (auto it = p.find("limit"); it != p.end()) {
    CELLAR_ASSIGN_OR_RETURN(int64_t limit, ParseDecimal("limit", it->second, 1, 10000));
    q.limit = static_cast<int>(limit);
  }
  CELLAR_RETURN_IF_ERROR(ValidateVersionQuery(q));
  return q;
}

}  // namespace

CellApi::CellApi(const ClusterConfig& config, CellService* cells, const TokenTable* tokens,
                 CellApiOptions options, IndexBackend* indexes)
    : config_(config), cells_(cells), tokens_(tokens), options_(options), indexes_(indexes) {
  if (options_.max_batch_cells <= 0) options_.max_batch_cells = config_.limits.max_batch_cells;
}

ApiResponse CellApi::InputError(const Status& status) const {
  return HttpError(HttpStatusFor(status.code()), StatusCodeName(StatusCode::kInvalidArgument),
                   status.message());
}

ApiResponse CellApi::Error(const Status& status, int64_t shard) const {
  const int http = HttpStatusFor(status.code());
  ApiResponse r = HttpError(http, StatusCodeName(status.code()), status.message());
  if (http == 503)
    r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_seconds));
  if (shard >= 0 && IsServerSide(status.code()))
    r.failed_shards.push_back(static_cast<uint32_t>(shard));
  return r;
}

ApiResponse CellApi::Handle(const ApiRequest& request) const {
  const RouteMatch route = MatchRoute(request.method, request.path);
  ApiResponse r;
  try {
    r = Dispatch(route, request);
  } catch (const std::exception& e) {  // a bug: never let it cross the boundary
    r = HttpError(500, "Internal", std::string("internal error: ") + e.what());
  } catch (...) {
    r = HttpError(500, "Internal", "internal error");
  }
  r.route = route.kind;
  return r;
}

ApiResponse CellApi::Dispatch(const RouteMatch& route, const ApiRequest& req) const {
  switch (route.kind) {
    case RouteKind::kUnmatched: {
      if (route.status == 405) {
        ApiResponse r = HttpError(
            405, "MethodNotAllowed",
            "method " + Shown(req.method) + " is not allowed here (allowed: " + route.allow + ")");
        r.headers.emplace_back("Allow", route.allow);
        return r;
      }
      return HttpError(404, "NotFound", "no such endpoint: " + Shown(req.path));
    }
    case RouteKind::kHealthz:
      return Json(200, {{"status", "ok"}});
    case RouteKind::kReadyz: {
      Status s = cells_->CheckReady();
      if (!s.ok()) return Error(Unavailable("not ready: " + s.message()));
      return Json(200, {{"status", "ready"}, {"shards", config_.shards}});
    }
    case RouteKind::kOpenApi: {
      ApiResponse r;
      r.body = std::string(OpenApiDocument());
      return r;
    }
    case RouteKind::kMetrics:  // answered by the HTTP binding, which owns the registry
      return HttpError(404, "NotFound", "metrics are served by the HTTP server");
    default:
      break;
  }
  // Every /v1 route: auth first, so that an unauthorised caller learns nothing
  // about which datastores exist.
  ApiResponse denied;
  std::string principal;
  if (tokens_ != nullptr) {
    const AccessScope scope = IsWriteRoute(route.kind) ? AccessScope::kWrite : AccessScope::kRead;
    const AuthDecision d = tokens_->Check(req.authorization, route.datastore, scope);
    principal = d.principal;
    switch (d.outcome) {
      case AuthOutcome::kAllowed:
        break;
      case AuthOutcome::kMissingToken:
      case AuthOutcome::kUnknownToken: {
        ApiResponse r = HttpError(401, "Unauthenticated",
                                  d.outcome == AuthOutcome::kMissingToken
                                      ? "missing \"Authorization: Bearer <token>\""
                                      : "unknown token");
        r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"cellar\"");
        return r;
      }
      case AuthOutcome::kForbidden: {
        ApiResponse r = HttpError(403, "PermissionDenied",
                                  "token '" + d.principal + "' may not " +
                                      (scope == AccessScope::kWrite ? "write" : "read") +
                                      " datastore '" + Shown(route.datastore) + "'");
        r.principal = principal;
        return r;
      }
    }
  }
  ApiResponse r;
  if (static_cast<int64_t>(req.body.size()) > options_.max_request_bytes) {
    r = Error(ResourceExhausted("the request body is " + std::to_string(req.body.size()) +
                                " bytes, over the limit of " +
                                std::to_string(options_.max_request_bytes)));
  } else if (const DatastoreConfig* ds = config_.FindDatastore(route.datastore); ds == nullptr) {
    // Bad input, as the store calls it (InvalidArgument); the HTTP status stays 404.
    r = HttpError(404, "InvalidArgument", "unknown datastore '" + Shown(route.datastore) + "'");
  } else if (route.kind == RouteKind::kBatch) {
    r = HandleBatch(*ds, req);
  } else if (route.kind == RouteKind::kShardLog) {
    r = HandleShardLog(route, *ds, req);
  } else if (route.kind == RouteKind::kIndexQuery) {
    r = HandleIndexQuery(route, *ds, req);
  } else {
    r = HandleCells(route, *ds, req);
  }
  r.principal = principal;
  return r;
}

ApiResponse CellApi::HandleCells(const RouteMatch& route, const DatastoreConfig& ds,
                                 const ApiRequest& req) const {
  auto row = ParseRowKey(route.row);
  if (!row.ok()) return Error(row.status());
  const int64_t shard = ShardForRow(*row, config_.shards);
  if (route.kind == RouteKind::kRow) {
    auto params = QueryParams(req, {"read", "after"});
    if (!params.ok()) return Error(params.status());
    auto read = ParseReadOptions(*params);
    if (!read.ok()) return Error(read.status());
    auto cells = cells_->RowText(ds.name, *row, *read);
    if (!cells.ok()) return Error(cells.status(), shard);
    // {"cells":[...],"row_key":"..."}: the keys in nlohmann's order, as Json() prints them.
    return Text200("{\"cells\":" + CellsJsonText(*cells) + ",\"row_key\":\"" + row->ToString() +
                   "\"}");
  }
  if (Status s = CheckColumn(ds, route.column); !s.ok()) return InputError(s);
  const std::string& column = route.column;
  switch (route.kind) {
    case RouteKind::kVersions: {
      auto params =
          QueryParams(req, {"max_ref", "min_ref", "as_of", "since", "limit", "read", "after"});
      if (!params.ok()) return Error(params.status());
      auto q = ParseVersionQuery(*params);
      if (!q.ok()) return Error(q.status());
      auto read = ParseReadOptions(*params);
      if (!read.ok()) return Error(read.status());
      auto cells = cells_->VersionsText(ds.name, *row, column, *q, *read);
      if (!cells.ok()) return Error(cells.status(), shard);
      return Text200("{\"cells\":" + CellsJsonText(*cells) + "}");
    }
    case RouteKind::kLatest: {
      auto params = QueryParams(req, {"read", "after"});
      if (!params.ok()) return Error(params.status());
      auto read = ParseReadOptions(*params);
      if (!read.ok()) return Error(read.status());
      auto cell = cells_->LatestText(ds.name, *row, column, *read);
      if (!cell.ok()) return Error(cell.status(), shard);
      return Text200(CellJsonText(cell->cell, cell->body_json));
    }
    case RouteKind::kErase: {
      auto params = QueryParams(req, {"expected_ref_key"});
      if (!params.ok()) return Error(params.status());
      std::optional<int64_t> expected;
      if (auto it = params->find("expected_ref_key"); it != params->end()) {
        auto k =
            ParseDecimal("expected_ref_key", it->second, 0, std::numeric_limits<int64_t>::max());
        if (!k.ok()) return Error(k.status());
        expected = *k;
      }
      auto put = cells_->Erase(ds.name, *row, column, expected);
      if (!put.ok()) return Error(put.status(), shard);
      return Json(200, PutResultToJson(WithPosition(ds, *put),
                                       CellAddress(ds.name, *row, column, put->ref_key)));
    }
    default:
      break;
  }
  auto ref = ParseRefKey(route.ref_key);
  if (!ref.ok()) return Error(ref.status());
  const std::string address = CellAddress(ds.name, *row, column, *ref);
  auto params = QueryParams(req, route.kind == RouteKind::kGetCell
                                     ? std::initializer_list<std::string_view>{"read", "after"}
                                     : std::initializer_list<std::string_view>{});
  if (!params.ok()) return Error(params.status());
  if (route.kind == RouteKind::kGetCell) {
    auto read = ParseReadOptions(*params);
    if (!read.ok()) return Error(read.status());
    auto cell = cells_->GetText(ds.name, *row, column, *ref, *read);
    if (!cell.ok()) return Error(cell.status(), shard);
    return Text200(CellJsonText(cell->cell, cell->body_json));
  }
  // kPutCell
  auto body = ParseJsonBody(req.body, options_.max_json_depth);
  if (!body.ok()) return Error(body.status());
  if (Status s = CheckCellBody(*body, config_.limits, "cell " + address, req.body.size()); !s.ok())
    return InputError(s);
  auto put = cells_->Put(ds.name, CellWrite{*row, column, *ref, std::move(body).value()});
  if (!put.ok()) {
    ApiResponse r = Error(put.status(), shard);
    if (put.status().code() == StatusCode::kConflict)
      r.body = DumpJson(ErrorJson("Conflict", put.status().message(), address));
    return r;
  }
  return Json(put->created ? 201 : 200, PutResultToJson(WithPosition(ds, *put), address));
}

ApiResponse CellApi::HandleBatch(const DatastoreConfig& ds, const ApiRequest& req) const {
  auto params = QueryParams(req, {});
  if (!params.ok()) return Error(params.status());
  auto doc = ParseJsonBody(req.body, options_.max_json_depth + 3);  // {"cells":[{"body":
  if (!doc.ok()) return Error(doc.status());
  auto cells =
      ParseBatchRequest(*doc, ds, config_.limits, options_.max_batch_cells, req.body.size());
  if (!cells.ok()) return InputError(cells.status());
  std::vector<Result<PutResult>> results = cells_->PutBatch(ds.name, *cells);
  ApiResponse r;
  json out = json::array();
  std::set<uint32_t> failed;
  for (size_t i = 0; i < cells->size(); ++i) {
    const CellWrite& w = (*cells)[i];
    const std::string address = CellAddress(ds.name, w.row_key, w.column, w.ref_key);
    if (i >= results.size()) {  // a backend bug; report rather than crash
      out.push_back({{"status", 500}, {"error", ErrorJson("Internal", "no result")["error"]}});
      continue;
    }
    const Result<PutResult>& res = results[i];
    if (res.ok()) {
      json item = PutResultToJson(WithPosition(ds, *res), address);
      item["status"] = res->created ? 201 : 200;
      out.push_back(std::move(item));
      continue;
    }
    const StatusCode code = res.status().code();
    json item = ErrorJson(StatusCodeName(code), res.status().message(), address);
    item["status"] = HttpStatusFor(code);
    out.push_back(std::move(item));
    if (IsServerSide(code)) failed.insert(ShardForRow(w.row_key, config_.shards));
  }
  r = Json(200, {{"results", std::move(out)}});
  r.failed_shards.assign(failed.begin(), failed.end());
  r.batch_cells = cells->size();
  return r;
}

ApiResponse CellApi::HandleShardLog(const RouteMatch& route, const DatastoreConfig& ds,
                                    const ApiRequest& req) const {
  auto params = QueryParams(req, {"after", "limit"});
  if (!params.ok()) return Error(params.status());
  auto shard = ParseDecimal("shard", route.shard, 0, std::numeric_limits<int64_t>::max());
  if (!shard.ok()) return Error(shard.status());
  if (*shard >= static_cast<int64_t>(config_.shards))
    return Error(NotFound("no shard " + std::to_string(*shard) + ": the cluster has " +
                          std::to_string(config_.shards) + " shards (0-" +
                          std::to_string(config_.shards - 1) + ")"));
  int64_t after = 0, limit = 100;
  if (auto it = params->find("after"); it != params->end()) {
    auto a = ParseDecimal("after", it->second, 0, std::numeric_limits<int64_t>::max());
    if (!a.ok()) return Error(a.status());
    after = *a;
  }
  if (auto it = params->find("limit"); it != params->end()) {
    auto l = ParseDecimal("limit", it->second, 1, config_.limits.max_log_limit);
    if (!l.ok()) return Error(l.status());
    limit = *l;
  }
  limit = std::min<int64_t>(limit, config_.limits.max_log_limit);
  auto page = cells_->ShardLog(ds.name, static_cast<uint32_t>(*shard), static_cast<uint64_t>(after),
                               static_cast<int>(limit));
  if (!page.ok()) return Error(page.status(), *shard);
  return Json(
      200,
      {{"shard", *shard}, {"cells", CellsToJson(page->cells)}, {"next_after", page->next_after}});
}

PutResult CellApi::WithPosition(const DatastoreConfig& ds, PutResult put) const {
  if (put.position.empty() && put.shard < config_.shards)
    put.position = EncodeLogPosition(config_, ds.name, put.shard, put.added_id);
  return put;
}

ApiResponse CellApi::HandleIndexQuery(const RouteMatch& route, const DatastoreConfig& ds,
                                      const ApiRequest& req) const {
  const IndexDefinition* def =
      indexes_ == nullptr ? nullptr : indexes_->FindIndex(ds.name, route.index);
  if (def == nullptr)
    return HttpError(404, "NotFound",
                     "datastore '" + ds.name + "' has no index '" + Shown(route.index) + "'");
  auto query = ParseIndexQueryParams(*def, req.params);
  if (!query.ok()) return Error(query.status());
  auto result = indexes_->QueryIndex(*query);
  if (!result.ok()) return Error(result.status());
  return Json(200, IndexQueryResultToJson(def->table, *result, query->verify));
}

}  // namespace cellar
