// The OpenAPI document (api/openapi.json, served at GET /v1/openapi.json)
// against a running cellard and the route table (api/api_route.h Routes()):
// the served document is the committed one and is OpenAPI 3; its (path,
// method) pairs and each operation's status codes are the route table's, so a
// route added without documenting it fails here; and real answers provoked
// from the server (successes, bad input, conflicts, auth) carry status codes
// that the document lists for their operation.
#include <httplib.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/api_route.h"
#include "api/openapi_document.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/http_test_util.h"

namespace cellar {
namespace {

using json = nlohmann::json;

constexpr int kMaxBatchCells = 5;
const char* const kToken = "openapi-test-write-token-0123456789";
const char* const kReadToken = "openapi-test-read-token-0123456789";

class OpenApiEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      db = testing::PrivateMariaDb::Start("openapi");
    } catch (const std::exception& e) {
      FAIL() << "cannot start MariaDB: " << e.what();
    }
    const std::string yaml =
        testing::MakeClusterYaml({db.get()}, 4) +
        "limits:\n  max_body_bytes: 1024\n  max_batch_cells: " + std::to_string(kMaxBatchCells) +
        "\n";
    const std::string config_path = testing::WriteTempFile(yaml, ".yaml");
    auto cfg = LoadClusterConfig(config_path);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    ASSERT_TRUE(CellStore::Open(*cfg)->Init().ok());
    setenv("CELLAR_OPENAPI_TOKEN", kToken, 1);
    setenv("CELLAR_OPENAPI_READ_TOKEN", kReadToken, 1);
    const std::string tokens = testing::WriteTempFile(
        "tokens:\n"
        "  - { name: svc, token_env: CELLAR_OPENAPI_TOKEN, datastores: { trips: [read, write] } }\n"
        "  - { name: ro, token_env: CELLAR_OPENAPI_READ_TOKEN, datastores: { trips: [read] } }\n",
        ".yaml");
    server = testing::CellardProcess::Start(config_path);
    ASSERT_NE(nullptr, server);
    auth_server = testing::CellardProcess::Start(config_path, {"--tokens", tokens});
    ASSERT_NE(nullptr, auth_server);
  }
  void TearDown() override {
    auth_server.reset();
    server.reset();
    db.reset();
  }

  std::unique_ptr<testing::PrivateMariaDb> db;
  std::unique_ptr<testing::CellardProcess> server, auth_server;
};

OpenApiEnv* const env =
    static_cast<OpenApiEnv*>(::testing::AddGlobalTestEnvironment(new OpenApiEnv));

// The document as the server serves it (parsed once).
const json& ServedDocument() {
  static const json doc = [] {
    httplib::Client c(env->server->url());
    auto res = c.Get("/v1/openapi.json");
    if (!res || res->status != 200) return json();
    return json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  }();
  return doc;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const std::set<std::string> kMethods = {"get", "put", "post", "delete", "patch", "head", "options"};

// The documented status codes of (path template, lowercase method).
std::set<int> DocumentedStatuses(const json& doc, const std::string& path, const std::string& m) {
  std::set<int> out;
  const json& responses = doc["paths"][path][m]["responses"];
  for (const auto& [code, _] : responses.items())
    if (code != "default") out.insert(std::stoi(code));
  return out;
}

// Every "$ref" under `j` (all local, "#/...") that does not resolve in `doc`.
void CollectDanglingRefs(const json& doc, const json& j, std::vector<std::string>* out) {
  if (j.is_object()) {
    if (auto it = j.find("$ref"); it != j.end() && it->is_string()) {
      const std::string ref = *it;
      if (ref.rfind("#/", 0) != 0 || !doc.contains(json::json_pointer(ref.substr(1))))
        out->push_back(ref);
    }
    for (const auto& [_, v] : j.items()) CollectDanglingRefs(doc, v, out);
  } else if (j.is_array()) {
    for (const json& v : j) CollectDanglingRefs(doc, v, out);
  }
}

TEST(OpenApi, ServedDocumentIsTheCommittedOpenApi3Json) {
  httplib::Client c(env->server->url());
  auto res = c.Get("/v1/openapi.json");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status);
  EXPECT_EQ("application/json", res->get_header_value("Content-Type"));
  const json doc = json::parse(res->body, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "not JSON: " << res->body.substr(0, 200);
  ASSERT_TRUE(doc.contains("openapi") && doc["openapi"].is_string());
  EXPECT_EQ(0u, doc["openapi"].get<std::string>().rfind("3.", 0)) << doc["openapi"];
  EXPECT_TRUE(doc["info"].contains("title") && doc["info"].contains("version"));
  ASSERT_TRUE(doc["paths"].is_object());
  std::vector<std::string> dangling;
  CollectDanglingRefs(doc, doc, &dangling);
  EXPECT_THAT(dangling, ::testing::IsEmpty());
  // Embedded at build time from the committed file: the same document.
  std::ifstream in(std::string(CELLAR_SOURCE_DIR) + "/api/openapi.json");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(json::parse(ss.str(), nullptr, false), doc);
  EXPECT_EQ(json::parse(OpenApiDocument(), nullptr, false), doc);
  // Public, like /healthz: the auth server serves it without a token.
  httplib::Client a(env->auth_server->url());
  auto open = a.Get("/v1/openapi.json");
  ASSERT_TRUE(open);
  EXPECT_EQ(200, open->status);
}

TEST(OpenApi, OperationsAndStatusCodesAreTheRouteTables) {
  const json& doc = ServedDocument();
  ASSERT_TRUE(doc.is_object());
  std::set<std::pair<std::string, std::string>> documented, implemented;
  for (const auto& [path, item] : doc["paths"].items())
    for (const auto& [m, _] : item.items())
      if (kMethods.count(m)) documented.emplace(path, m);
  for (const RouteSpec& r : Routes()) implemented.emplace(std::string(r.path), Lower(r.method));
  EXPECT_EQ(implemented, documented);

  for (const RouteSpec& r : Routes()) {
    const std::string path(r.path), m = Lower(r.method);
    if (!doc["paths"].contains(path) || !doc["paths"][path].contains(m)) continue;
    const std::set<int> want(r.statuses.begin(), r.statuses.end());
    EXPECT_EQ(want, DocumentedStatuses(doc, path, m)) << r.method << " " << path;
    // Every {parameter} of the template is declared as a path parameter.
    std::set<std::string> declared;
    for (const json& p : doc["paths"][path][m].value("parameters", json::array())) {
      json param = p;
      if (p.contains("$ref")) {
        const std::string ref = p["$ref"];  // "#/components/parameters/<name>"
        param = doc["components"]["parameters"][ref.substr(ref.rfind('/') + 1)];
      }
      if (param.value("in", "") == "path") declared.insert(param.value("name", ""));
    }
    std::set<std::string> in_template;
    for (size_t open = path.find('{'); open != std::string::npos; open = path.find('{', open + 1))
      in_template.insert(path.substr(open + 1, path.find('}', open) - open - 1));
    EXPECT_EQ(in_template, declared) << r.method << " " << path;
  }
}

struct Probe {
  std::string method, path;  // path with any query string
  std::string body;
  int want;
  std::string token;  // non-empty: sent to the auth server ("-": without a token)
  std::string content_type = "application/json";
};

httplib::Result Send(const Probe& p) {
  const bool auth = !p.token.empty();
  httplib::Client c(auth ? env->auth_server->url() : env->server->url());
  httplib::Headers h;
  if (auth && p.token != "-") h.emplace("Authorization", "Bearer " + p.token);
  if (p.method == "GET") return c.Get(p.path, h);
  if (p.method == "PUT") return c.Put(p.path, h, p.body, p.content_type);
  if (p.method == "POST") return c.Post(p.path, h, p.body, p.content_type);
  return c.Delete(p.path, h, p.body, p.content_type);
}

TEST(OpenApi, ProvokedAnswersAreDocumented) {
  const json& doc = ServedDocument();
  ASSERT_TRUE(doc.is_object());
  const std::string row = "/v1/trips/cells/" + Uuid::Random().ToString();
  const std::string batch_row = Uuid::Random().ToString();
  json too_many = json::array();
  for (int i = 0; i <= kMaxBatchCells; ++i)
    too_many.push_back(
        {{"row_key", batch_row}, {"column", "BASE"}, {"ref_key", i}, {"body", json::object()}});
  const std::vector<Probe> probes = {
      {"GET", "/healthz", "", 200, ""},
      {"GET", "/readyz", "", 200, ""},
      {"GET", "/metrics", "", 200, ""},
      {"GET", "/v1/openapi.json", "", 200, ""},
      {"PUT", row + "/BASE/1", "{\"v\":1}", 201, ""},
      {"PUT", row + "/BASE/1", "{\"v\":1}", 200, ""},
      {"PUT", row + "/BASE/1", "{\"v\":2}", 409, ""},
      {"PUT", row + "/BASE/2", "{\"v\":", 400, ""},
      {"PUT", row + "/NOPE/1", "{}", 404, ""},
      {"PUT", row + "/BASE/3", "{\"pad\":\"" + std::string(2000, 'x') + "\"}", 413, ""},
      {"PUT", row + "/BASE/4", "--x--", 415, "", "multipart/form-data; boundary=x"},
      {"GET", row + "/BASE/1", "", 200, ""},
      {"GET", row + "/BASE/9", "", 404, ""},
      {"GET", "/v1/trips/cells/not-a-uuid/BASE/1", "", 400, ""},
      {"GET", row + "/BASE/versions?limit=5", "", 200, ""},
      {"GET", row + "/BASE/versions?limit=0", "", 400, ""},
      {"GET", row + "/BASE", "", 200, ""},
      {"GET", row + "/STATUS", "", 404, ""},
      {"GET", row + "/BASE?bogus=1", "", 400, ""},
      {"DELETE", row + "/BASE?expected_ref_key=99", "", 409, ""},
      {"DELETE", row + "/BASE?expected_ref_key=x", "", 400, ""},
      {"DELETE", row + "/BASE?expected_ref_key=1", "", 200, ""},
      {"GET", row, "", 200, ""},
      {"GET", "/v1/nope/cells/" + batch_row, "", 404, ""},
      {"POST", "/v1/trips/cells:batch",
       json{{"cells",
             {{{"row_key", batch_row},
               {"column", "BASE"},
               {"ref_key", 1},
               {"body", json::object()}}}}}
           .dump(),
       200, ""},
      {"POST", "/v1/trips/cells:batch", "[]", 400, ""},
      {"POST", "/v1/trips/cells:batch", json{{"cells", too_many}}.dump(), 413, ""},
      {"POST", "/v1/nope/cells:batch", "{\"cells\":[]}", 404, ""},
      {"GET", "/v1/trips/shards/0/log?after=0&limit=10", "", 200, ""},
      {"GET", "/v1/trips/shards/99/log", "", 404, ""},
      {"GET", "/v1/trips/shards/0/log?after=x", "", 400, ""},
      {"GET", "/v1/trips/indexes/by_city?shard_value=x", "", 404, ""},
      {"GET", row + "/BASE/1", "", 401, "-"},
      {"GET", row + "/BASE/1", "", 401, "not-a-known-token-0123456789"},
      {"GET", row + "/BASE/1", "", 200, kReadToken},
      {"PUT", row + "/BASE/5", "{}", 403, kReadToken},
      {"PUT", row + "/BASE/5", "{}", 201, kToken},
      {"GET", "/v1/users/cells/" + batch_row, "", 403, kReadToken},
  };
  std::set<RouteKind> seen;
  for (const Probe& p : probes) {
    SCOPED_TRACE(p.method + " " + p.path.substr(0, 120) + (p.token.empty() ? "" : " (auth)"));
    auto res = Send(p);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(p.want, res->status) << res->body.substr(0, 300);
    const RouteMatch m = MatchRoute(p.method, p.path.substr(0, p.path.find('?')));
    const RouteSpec* spec = FindRoute(m.kind);
    ASSERT_NE(nullptr, spec);
    seen.insert(m.kind);
    const std::set<int> listed = DocumentedStatuses(doc, std::string(spec->path), Lower(p.method));
    EXPECT_EQ(1u, listed.count(res->status))
        << res->status << " is not documented for " << spec->method << " " << spec->path;
  }
  // Every operation was exercised at least once.
  EXPECT_EQ(Routes().size(), seen.size());
}

}  // namespace
}  // namespace cellar
