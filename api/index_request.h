// The index query endpoint's wire format:
//
//   GET /v1/<ds>/indexes/<name>?shard_value=V[&where=F OP X]...[&field=F]...
//       [&order_by=F][&order=asc|desc][&limit=N][&cursor=C][&verify=true|false]
//       [&after=P]   (P: a put answer's "position"; IndexQuery::after)
//       [&read=primary|replica]   (IndexQuery::read)
//
// `where` and `field` may repeat; every other parameter appears at most once.
// `where` has the syntax of ParseIndexFilter ("city_uuid = 5c4e...",
// "trip_created_at >= 2026-01-01T00:00:00Z", "status in (a, b)").
// Answer 200:
//   {"index":..,"version":N,"hits":[{"row_key","column","ref_key","fields":{..}}],
//    "next_cursor":".." (only when there is a further page),
//    "dropped_by_verify":N (only with verify=true)}
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "indexes/index_definition.h"
#include "indexes/index_query.h"

namespace cellar {

// The query named by `params` (decoded name/value pairs) on index `def`.
// InvalidArgument naming the parameter for an unknown or repeated parameter,
// a missing shard_value, a malformed where, limit, order, verify or read. (Unknown fields
// are reported by IndexReader::Query, which checks them against the version
// that serves.)
Result<IndexQuery> ParseIndexQueryParams(
    const IndexDefinition& def, const std::vector<std::pair<std::string, std::string>>& params);

nlohmann::json IndexQueryResultToJson(const std::string& index, const IndexQueryResult& result,
                                      bool verify);

}  // namespace cellar
