// The JSON shapes of Cellar's HTTP API, shared by the server
// (api/) and cellar::Client so both sides agree by construction.
//
//   cell        CellToJson (cells/cell.h): {"row_key","column","ref_key","body",
//               "tombstone","created_at","shard","added_id"}
//   put result  {"address","shard","added_id","ref_key","created_at","created",
//                "position" (the cell's position token, cells/log_position.h; when known)}
//   error       {"error":{"code":"Conflict","message":"...", "address":"..."?}}
//               code is a StatusCodeName (base/status.h), or "Unauthenticated",
//               "PermissionDenied", "MethodNotAllowed" for HTTP-only errors.
//
// Status codes: InvalidArgument 400, NotFound 404, Conflict/AlreadyExists/
// Aborted 409, ResourceExhausted 413, Unavailable/DeadlineExceeded 503 (with
// Retry-After), FailedPrecondition 400, Internal 500 (a server bug only).
//
// Threading: pure functions. None throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"

namespace cellar {

// HTTP status for a non-OK Status code (200 for kOk).
int HttpStatusFor(StatusCode code);

// The Status code a client reports for an HTTP error answer: from the error
// JSON's "code" when it names a StatusCode, otherwise from the HTTP status.
// 401/403 map to FailedPrecondition (retrying will not help).
StatusCode StatusCodeForHttp(int http_status, std::string_view code_name);

// {"error":{"code":code,"message":message}} (+ "address" when not empty).
nlohmann::json ErrorJson(std::string_view code, std::string_view message,
                         std::string_view address = {});

// Compact JSON text; invalid UTF-8 in strings is replaced, never thrown on.
std::string DumpJson(const nlohmann::json& j);

// The put result; without "address" when `address` is empty (the CLI's shape).
nlohmann::json PutResultToJson(const PutResult& r, const std::string& address);
// A JSON array of CellToJson(cell), in order.
nlohmann::json CellsToJson(const std::vector<Cell>& cells);
// InvalidArgument when a field is missing or of the wrong type.
Result<PutResult> PutResultFromJson(const nlohmann::json& j);
// Inverse of CellToJson. InvalidArgument when a field is missing or malformed.
Result<Cell> CellFromJson(const nlohmann::json& j);

}  // namespace cellar
