// CellApi: the HTTP API of a worker node as a pure function from a request
// to a response, over a CellService. No sockets: the HTTP binding
// (http_server.h) translates httplib requests into ApiRequest, and unit tests
// and the fuzzer call Handle() directly.
//
// Endpoints (api_route.h) and their answers:
//   PUT    /v1/<ds>/cells/<row>/<column>/<ref_key>  body = the cell's JSON object
//          201 created | 200 identical retry (created:false) | 409 Conflict with "address";
//          a put result carries "position" (see the index query's after=)
//   POST   /v1/<ds>/cells:batch   {"cells":[{row_key,column,ref_key,body}...]}
//          200 {"results":[{"status":201|200|409|503,...put result or "error"}]}; the
//          cells of one row commit atomically (the others of a failed row: 409 Aborted)
//   GET    /v1/<ds>/cells/<row>/<column>/<ref_key>  200 cell | 404
//   GET    /v1/<ds>/cells/<row>/<column>            200 latest cell | 404 (none or erased)
//   GET    /v1/<ds>/cells/<row>                     200 {"row_key","cells":[latest per column]}
//   GET    /v1/<ds>/cells/<row>/<column>/versions?max_ref=&min_ref=&as_of=&since=&limit=
//          200 {"cells":[newest first, tombstones included]}
//   DELETE /v1/<ds>/cells/<row>/<column>[?expected_ref_key=K]
//          200 put result of the tombstone: created:true when written, created:false
//          when the latest version already was a tombstone (a retried erase; with K:
//          K itself, or a tombstone directly above K); 409 Conflict when K is not the
//          latest version (the message names the latest); 400 for a K that is not
//          an integer >= 0. The contract is CellStore::Erase's (cells/cell_store.h).
//   GET    /v1/<ds>/shards/<n>/log?after=&limit=    200 {"shard","cells","next_after"}
//   GET    /v1/<ds>/indexes/<name>?shard_value=&where=...  200 {"hits":[...]} (index_request.h);
//          404 for an index the server was not started with (--indexes); with
//          after=<a put answer's "position">: answers once the index worker has
//          applied that put (400 for a malformed or foreign token, 503 with
//          Retry-After past limits.index_wait); read=replica reads the entries
//          (and verify's cells) from a replica, as the cell reads' read=
//   GET    /healthz 200 | /readyz 200 or 503
//   GET    /v1/openapi.json  200: the OpenAPI 3 document of all of this
//          (api/openapi.json, openapi_document.h); no auth, like /healthz
// (/metrics is answered by the HTTP binding, which owns the registry.)
//
// Errors are {"error":{"code","message"}} (api/api_wire.h): 400 malformed
// input (bad JSON, non-object body, bad UUID, bad integer, unknown query
// parameter, JSON nested over max_json_depth), 401 missing/unknown token
// (WWW-Authenticate: Bearer), 403 token lacks the scope, 404 unknown
// datastore, column, cell, shard or path, 405 wrong method (Allow), 409
// conflict, 413 request body, cell body or batch over its limit, 503 a shard
// unavailable (Retry-After). The error code is the one CellStore gives the
// same input (cells/cell_service.h): bad input is "InvalidArgument" whether
// the HTTP status is 400, 404 (unknown datastore or column) or 413 (a cell body
// or batch over its limit); only an oversized request body is
// "ResourceExhausted". Client input never yields a 5xx other than 503;
// 500 means a server bug. Anything rejected with a 4xx wrote nothing.
//
// Threading: Handle() is const and thread-safe (given a thread-safe backend).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/api_route.h"
#include "api/index_backend.h"
#include "api/token_auth.h"
#include "cells/body_codec.h"
#include "cells/cell_service.h"
#include "config/cluster_config.h"

namespace cellar {

struct ApiRequest {
  std::string method;  // "GET", "PUT", "POST", "DELETE", "HEAD", ...
  std::string path;    // percent-decoded, without the query string
  std::vector<std::pair<std::string, std::string>> params;  // decoded query parameters
  std::string body;
  std::string authorization;  // the Authorization header value, "" when absent
};

struct ApiResponse {
  int status = 200;
  std::string body;                                          // JSON text
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Retry-After, Allow
  // For metrics and logs:
  RouteKind route = RouteKind::kUnmatched;
  std::string principal;                // token name when auth recognised one
  std::vector<uint32_t> failed_shards;  // shards whose storage failed (5xx causes)
  size_t batch_cells = 0;               // cells in an accepted batch request
};

struct CellApiOptions {
  int64_t max_request_bytes = 2 << 20;  // request body; larger: 413
  int max_batch_cells = 0;              // 0: the config's limits.max_batch_cells
  int max_json_depth = kMaxBodyDepth;   // nesting of a cell body; deeper: 400
  int retry_after_seconds = 1;          // Retry-After of 503 answers
};

class CellApi {
 public:
  // `cells` (required), `tokens` (null: no auth) and `indexes` (null: no
  // index is served, queries answer NotFound) must outlive the API.
  CellApi(const ClusterConfig& config, CellService* cells, const TokenTable* tokens,
          CellApiOptions options = {}, IndexBackend* indexes = nullptr);

  // Answers one request. Never throws.
  ApiResponse Handle(const ApiRequest& request) const;

  const CellApiOptions& options() const { return options_; }

 private:
  ApiResponse Dispatch(const RouteMatch& route, const ApiRequest& request) const;
  ApiResponse HandleCells(const RouteMatch& route, const DatastoreConfig& ds,
                          const ApiRequest& request) const;
  ApiResponse HandleBatch(const DatastoreConfig& ds, const ApiRequest& request) const;
  ApiResponse HandleIndexQuery(const RouteMatch& route, const DatastoreConfig& ds,
                               const ApiRequest& request) const;
  ApiResponse HandleShardLog(const RouteMatch& route, const DatastoreConfig& ds,
                             const ApiRequest& request) const;
  // The answer to bad input found by the API itself (unknown column, cell
  // body over its limit, a malformed batch): the HTTP status `status` calls
  // for (404, 413, 400), with the error code the store gives the same input,
  // InvalidArgument, so the client maps it back to the same Status.
  ApiResponse InputError(const Status& status) const;
  // The error answer for `status`; records `shard` as failed for server-side errors.
  ApiResponse Error(const Status& status, int64_t shard = -1) const;
  // `put` with its position token, which the answer carries.
  PutResult WithPosition(const DatastoreConfig& ds, PutResult put) const;

  ClusterConfig config_;
  CellService* cells_;
  const TokenTable* tokens_;
  CellApiOptions options_;
  IndexBackend* indexes_;
};

}  // namespace cellar
