// The HTTP API without sockets or MySQL: CellApi over MemoryCellStore,
// routing, token files, the JSON body guard, and the inputs the fuzzers found
// (regressions at the end).
#include <nlohmann/json.hpp>
#include <string>

#include "api/api_route.h"
#include "api/api_wire.h"
#include "api/cell_api.h"
#include "api/json_body.h"
#include "api/request_fields.h"
#include "api/token_auth.h"
#include "cells/testing/memory_cell_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

ClusterConfig TestConfig() {
  auto c = ParseClusterConfig(
      "shards: 4\n"
      "mysql: { hosts: [ { address: 127.0.0.1, port: 1, shards: 0-3 } ] }\n"
      "limits: { max_body_bytes: 100, max_batch_cells: 3 }\n"
      "datastores:\n"
      "  - { name: trips, columns: { BASE: {}, STATUS: {} } }\n"
      "  - { name: users, columns: { PROFILE: {} } }\n",
      "<unit>");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

class CellApiTest : public ::testing::Test {
 protected:
  CellApiTest() : config_(TestConfig()), backend_(config_), api_(config_, &backend_, nullptr) {}

  ApiResponse Call(const std::string& method, const std::string& path, const std::string& body = "",
                   std::vector<std::pair<std::string, std::string>> params = {}) {
    ApiRequest r{method, path, std::move(params), body, ""};
    ApiResponse res = api_.Handle(r);
    json j = json::parse(res.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << res.body;
    if (res.status >= 400) {
      EXPECT_TRUE(j["error"]["code"].is_string()) << res.body;
    }
    return res;
  }
  static json J(const ApiResponse& r) { return json::parse(r.body); }

  const std::string row_ = "6b82bf47-eed5-4707-991b-3cf64b41a40d";
  ClusterConfig config_;
  MemoryCellStore backend_;
  CellApi api_;
};

TEST_F(CellApiTest, PutRetryConflictAndReads) {
  const std::string cell = "/v1/trips/cells/" + row_ + "/BASE";
  EXPECT_EQ(201, Call("PUT", cell + "/1", R"({"a":1})").status);
  EXPECT_EQ(200, Call("PUT", cell + "/1", R"({"a":1})").status);
  ApiResponse conflict = Call("PUT", cell + "/1", R"({"a":2})");
  EXPECT_EQ(409, conflict.status);
  EXPECT_EQ("trips/" + row_ + "/BASE/1", J(conflict)["error"]["address"]);
  EXPECT_EQ(200, Call("GET", cell + "/1").status);
  EXPECT_EQ(404, Call("GET", cell + "/2").status);
  EXPECT_EQ(1, J(Call("GET", cell))["ref_key"]);
  EXPECT_EQ(1u, J(Call("GET", "/v1/trips/cells/" + row_))["cells"].size());
  EXPECT_EQ(1u, J(Call("GET", cell + "/versions", "", {{"limit", "5"}}))["cells"].size());
  EXPECT_EQ(200, Call("DELETE", cell).status);
  EXPECT_EQ(404, Call("GET", cell).status);
  EXPECT_EQ(2u, J(Call("GET", "/v1/trips/shards/" +
                                  std::to_string(J(Call("GET", cell + "/1"))["shard"].get<int>()) +
                                  "/log"))["cells"]
                    .size());
}

TEST_F(CellApiTest, BatchIsValidatedWholeAndAnsweredPerCell) {
  const std::string ok =
      json{{"cells",
            {{{"row_key", row_}, {"column", "BASE"}, {"ref_key", 0}, {"body", {{"x", 1}}}},
             {{"row_key", row_}, {"column", "STATUS"}, {"ref_key", 0}, {"body", json::object()}}}}}
          .dump();
  ApiResponse r = Call("POST", "/v1/trips/cells:batch", ok);
  ASSERT_EQ(200, r.status) << r.body;
  EXPECT_EQ(201, J(r)["results"][0]["status"]);
  EXPECT_EQ(2u, r.batch_cells);
  EXPECT_EQ(200, J(Call("POST", "/v1/trips/cells:batch", ok))["results"][1]["status"]);
  const size_t before = backend_.size();
  std::string four = json{{"cells", json::array()}}.dump();
  json many = json::parse(four);
  for (int i = 0; i < 4; ++i)
    many["cells"].push_back(
        {{"row_key", row_}, {"column", "BASE"}, {"ref_key", 10 + i}, {"body", json::object()}});
  EXPECT_EQ(413, Call("POST", "/v1/trips/cells:batch", many.dump()).status);
  many["cells"].erase(3);
  many["cells"][2]["ref_key"] = -1;
  ApiResponse bad = Call("POST", "/v1/trips/cells:batch", many.dump());
  EXPECT_EQ(400, bad.status);
  EXPECT_THAT(J(bad)["error"]["message"].get<std::string>(), HasSubstr("cells[2].ref_key"));
  EXPECT_EQ(before, backend_.size()) << "a rejected batch wrote something";
}

TEST_F(CellApiTest, ErrorsMapToTheirStatus) {
  const std::string cell = "/v1/trips/cells/" + row_ + "/BASE";
  EXPECT_EQ(400, Call("PUT", cell + "/1", "[1]").status);
  EXPECT_EQ(400, Call("PUT", cell + "/x", "{}").status);
  // Bad input keeps its documented HTTP status but carries the store's code
  // for it, InvalidArgument, so Client answers as CellStore does.
  for (const ApiResponse& bad :
       {Call("PUT", "/v1/trips/cells/" + row_ + "/NOPE/1", "{}"),
        Call("GET", "/v1/nope/cells/" + row_),
        Call("PUT", cell + "/1", "{\"a\":\"" + std::string(200, 'x') + "\"}")}) {
    EXPECT_EQ("InvalidArgument", J(bad)["error"]["code"]) << bad.body;
    EXPECT_EQ(StatusCode::kInvalidArgument, StatusCodeForHttp(bad.status, "InvalidArgument"));
  }
  EXPECT_EQ(404, Call("PUT", "/v1/trips/cells/" + row_ + "/NOPE/1", "{}").status);
  EXPECT_EQ(404, Call("GET", "/v1/nope/cells/" + row_).status);
  EXPECT_EQ(413, Call("PUT", cell + "/1", "{\"a\":\"" + std::string(200, 'x') + "\"}").status);
  EXPECT_EQ("NotFound", J(Call("GET", cell + "/9"))["error"]["code"]) << "a missing cell";
  ApiResponse wrong = Call("POST", cell + "/1", "{}");
  EXPECT_EQ(405, wrong.status);
  EXPECT_EQ("Allow", wrong.headers.at(0).first);
  EXPECT_EQ("GET, PUT", wrong.headers.at(0).second);
  EXPECT_EQ(404, Call("GET", "/v1/trips/indexes/by_city").status);
  backend_.SetUnavailable(true);
  ApiResponse down = Call("GET", cell);
  EXPECT_EQ(503, down.status);
  EXPECT_EQ("Retry-After", down.headers.at(0).first);
  ASSERT_EQ(1u, down.failed_shards.size());
  EXPECT_EQ(503, Call("GET", "/readyz").status);
  EXPECT_EQ(200, Call("GET", "/healthz").status);
}

TEST_F(CellApiTest, TokensAndScopes) {
  const char* env[][2] = {{"W", "writer-token-0123456789"}, {"R", "reader-token-0123456789"}};
  auto getenv_fn = [&](const char* name) -> const char* {
    for (auto& e : env)
      if (std::string(name) == e[0]) return e[1];
    return nullptr;
  };
  auto tokens = TokenTable::Parse(
      "tokens:\n"
      "  - { name: w, token_env: W, datastores: { trips: [read, write] } }\n"
      "  - { name: r, token_env: R, datastores: { \"*\": [read] } }\n",
      "t.yaml", ".", getenv_fn);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  CellApi api(config_, &backend_, &*tokens);
  const std::string cell = "/v1/trips/cells/" + row_ + "/BASE";
  auto call = [&](const std::string& method, const std::string& path, const std::string& auth) {
    return api.Handle({method, path, {}, method == "PUT" ? "{}" : "", auth});
  };
  EXPECT_EQ(401, call("GET", cell, "").status);
  EXPECT_EQ(401, call("GET", cell, "Bearer nope-nope-nope-nope").status);
  EXPECT_EQ(401, call("GET", cell, "Basic d3JpdGVyLXRva2Vu").status);
  EXPECT_EQ(201, call("PUT", cell + "/1", "Bearer writer-token-0123456789").status);
  EXPECT_EQ(201, call("PUT", cell + "/2", "bearer  writer-token-0123456789").status);
  EXPECT_EQ(403, call("PUT", cell + "/3", "Bearer reader-token-0123456789").status);
  EXPECT_EQ(200, call("GET", cell, "Bearer reader-token-0123456789").status);
  EXPECT_EQ(403, call("GET", "/v1/users/cells/" + row_, "Bearer writer-token-0123456789").status);
  // Unknown datastores are 403 for a scoped token, not 404: nothing leaks.
  EXPECT_EQ(403, call("GET", "/v1/secret/cells/" + row_, "Bearer writer-token-0123456789").status);
  EXPECT_EQ(200, call("GET", "/healthz", "").status);
}

TEST(TokenTableTest, RejectsBadFilesWithEveryError) {
  auto none = [](const char*) -> const char* { return nullptr; };
  auto t = TokenTable::Parse(
      "tokens:\n"
      "  - { name: a, token_env: UNSET, datastores: { trips: [read] } }\n"
      "  - { name: b, token_file: /nonexistent/file, datastores: { trips: [fly] } }\n"
      "  - { name: c, datastores: { \"Bad-Name\": [read] }, extra: 1 }\n",
      "tokens.yaml", ".", none);
  ASSERT_FALSE(t.ok());
  const std::string m = t.status().message();
  EXPECT_THAT(m, HasSubstr("tokens.yaml:2: tokens[0].token_env: environment variable 'UNSET'"));
  EXPECT_THAT(m, HasSubstr("tokens.yaml:3: tokens[1].token_file: cannot read token file"));
  EXPECT_THAT(m, HasSubstr("unknown scope 'fly'"));
  EXPECT_THAT(m, HasSubstr("tokens[2].extra: unknown key"));
  auto short_token =
      TokenTable::Parse("tokens: [ { name: s, token_env: S, datastores: { trips: [read] } } ]\n",
                        "t.yaml", ".", [](const char*) -> const char* { return "short"; });
  ASSERT_FALSE(short_token.ok());
  EXPECT_THAT(short_token.status().message(), HasSubstr("at least 16"));
  EXPECT_FALSE(TokenTable::Parse("tokens: [ {", "t.yaml", ".", none).ok());
}

TEST(ApiRouteTest, Shapes) {
  EXPECT_EQ(RouteKind::kBatch, MatchRoute("POST", "/v1/trips/cells:batch").kind);
  EXPECT_EQ(RouteKind::kVersions, MatchRoute("GET", "/v1/t/cells/r/c/versions").kind);
  EXPECT_EQ(RouteKind::kGetCell, MatchRoute("HEAD", "/v1/t/cells/r/c/1").kind);
  EXPECT_EQ(RouteKind::kShardLog, MatchRoute("GET", "/v1/t/shards/3/log").kind);
  EXPECT_EQ(RouteKind::kUnmatched, MatchRoute("GET", "/v1/t/cells/r/").kind);
  EXPECT_EQ(RouteKind::kUnmatched, MatchRoute("GET", "//v1/t/cells/r").kind);
  EXPECT_EQ(RouteKind::kUnmatched, MatchRoute("GET", "").kind);
  RouteMatch m = MatchRoute("PUT", "/v1/t/cells/r/c");
  EXPECT_EQ(405, m.status);
  EXPECT_EQ("GET, DELETE", m.allow);
}

TEST(JsonBodyTest, DepthIsCheckedBeforeParsing) {
  EXPECT_EQ(0, JsonNestingDepth("1"));
  EXPECT_EQ(2, JsonNestingDepth(R"({"a":[1], "b":"[[[["})"));
  EXPECT_EQ(1, JsonNestingDepth(R"({"a":"\"[["})"));
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = ParseJsonBody(deep, 64);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nests 100000 levels"));
  EXPECT_TRUE(ParseJsonBody(R"({"a":[[1]]})", 64).ok());
  EXPECT_FALSE(ParseJsonBody("  \n", 64).ok());
  EXPECT_FALSE(ParseJsonBody("{\"a\":1e99999}", 64).ok());
}

// CheckCellBody skips measuring a body whose source text is under
// limits.max_body_bytes / kMaxCompactJsonGrowth: the compact JSON of a parsed
// text never outgrows that factor (number tokens grow most), and a body over
// the limit is still refused when its text gives no such bound.
TEST(JsonBodyTest, CompactJsonOfAParsedTextStaysWithinTheGrowthBound) {
  for (const char* text :
       {R"({"a":1e15})", R"({"a":-1e15,"b":1E5,"c":0.1e1,"d":5e-7})", R"([1e5,1e5,1e5,1e5])",
        R"([1e15,1e15,1e15])", R"({"u":"\u00e9\u0001\/","n":null,"t":true})",
        R"({"big":18446744073709551616})", R"({"f":1.7976931348623157e308,"g":4.9e-324})"}) {
    auto body = ParseJsonBody(text, 64);
    ASSERT_TRUE(body.ok()) << text;
    const size_t compact = body->dump(-1, ' ', false, json::error_handler_t::replace).size();
    EXPECT_LE(compact, kMaxCompactJsonGrowth * std::string_view(text).size())
        << text << " dumps as " << body->dump();
  }
  LimitsConfig limits;
  limits.max_body_bytes = 16;
  const json big = {{"a", std::string(40, 'x')}};
  EXPECT_EQ(StatusCode::kResourceExhausted, CheckCellBody(big, limits, "cell").code());
  EXPECT_EQ(StatusCode::kResourceExhausted, CheckCellBody(big, limits, "cell", 1000).code());
  // A text short enough bounds the body: no dump (the caller passed the truth).
  EXPECT_TRUE(CheckCellBody(json{{"a", 1}}, limits, "cell", 2).ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, CheckCellBody(json::array(), limits, "cell", 2).code());
}

TEST(ApiWireTest, RoundTrips) {
  PutResult p{3, 42, 7, 1763776067716308, true, "p1.3.42.0a1b2c3d"};
  auto back = PutResultFromJson(PutResultToJson(p, "t/x/B/7"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(p.added_id, back->added_id);
  EXPECT_EQ(p.position, back->position);
  EXPECT_EQ(p.created_at, back->created_at);
  Cell c;
  c.row_key = Uuid::Random();
  c.column = "BASE";
  c.ref_key = 9;
  c.body = {{"a", 1}};
  c.created_at = 1763776067716308;
  auto cell = CellFromJson(CellToJson(c));
  ASSERT_TRUE(cell.ok());
  EXPECT_EQ(c.row_key, cell->row_key);
  EXPECT_EQ(c.body, cell->body);
  EXPECT_EQ(StatusCode::kConflict, StatusCodeForHttp(409, "Conflict"));
  EXPECT_EQ(StatusCode::kAborted, StatusCodeForHttp(409, "Aborted"));
  EXPECT_EQ(StatusCode::kFailedPrecondition, StatusCodeForHttp(401, "Unauthenticated"));
  EXPECT_EQ(StatusCode::kUnavailable, StatusCodeForHttp(502, ""));
  EXPECT_EQ("{\"s\":\"\xEF\xBF\xBD\"}", DumpJson({{"s", "\xff"}}));
}

// ---- Fuzzer regressions: inputs that once misbehaved stay answered. --------
TEST_F(CellApiTest, FuzzRegressions) {
  struct Case {
    std::string method, path, body;
    int want;
  };
  const std::vector<Case> cases = {
      // Deep JSON used to be able to overflow the stack in dump()/to_msgpack.
      {"PUT", "/v1/trips/cells/" + row_ + "/BASE/1", "{\"a\":" + std::string(50000, '[') + "}",
       400},
      {"POST", "/v1/trips/cells:batch", std::string(50000, '{'), 400},
      // Invalid UTF-8 echoed in an error message must not make dump() throw.
      {"GET", "/v1/tr\xff\xfeps/cells/" + row_, "", 404},
      {"GET", "/v1/trips/cells/" + row_ + "/BA\xc3", "", 404},
      {"GET", std::string("/v1/trips/cells/\0x", 18), "", 400},
      {"PUT", "/v1/trips/cells/" + row_ + "/BASE/00000000000000000000", "{}", 400},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path.substr(0, 80));
    EXPECT_EQ(c.want, Call(c.method, c.path, c.body).status);
  }
}

}  // namespace
}  // namespace cellar
