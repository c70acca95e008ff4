// A table of bad requests against a real `cellard` over a private MariaDB:
// each gets its documented 4xx with the JSON error shape, and the database is
// unchanged afterwards (the ShardHead of every shard of every datastore).
// Raw sockets send what no HTTP client library would (a truncated body, a
// lying Content-Length, a broken request line, an oversized chunked body);
// the server's read timeout (1 s here) ends the wait for missing bytes.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/http_test_util.h"

namespace cellar {
namespace {

using json = nlohmann::json;

constexpr uint32_t kShards = 4;
constexpr int kMaxBodyBytes = 4096;      // limits.max_body_bytes of the cluster
constexpr int kMaxBatchCells = 20;       // limits.max_batch_cells
constexpr int kMaxRequestBytes = 65536;  // cellard --max-request-bytes
const char* const kToken = "bad-request-test-token-0123456789";
const char* const kReadToken = "bad-request-read-token-0123456789";

class BadRequestEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      db = testing::PrivateMariaDb::Start("httpbad");
    } catch (const std::exception& e) {
      FAIL() << "cannot start MariaDB: " << e.what();
    }
    const std::string yaml = testing::MakeClusterYaml({db.get()}, kShards) +
                             "limits:\n  max_body_bytes: " + std::to_string(kMaxBodyBytes) +
                             "\n  max_batch_cells: " + std::to_string(kMaxBatchCells) + "\n";
    const std::string config_path = testing::WriteTempFile(yaml, ".yaml");
    auto cfg = LoadClusterConfig(config_path);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    store = CellStore::Open(*cfg);
    ASSERT_TRUE(store->Init().ok());
    setenv("CELLAR_BAD_REQUEST_TOKEN", kToken, 1);
    setenv("CELLAR_BAD_REQUEST_READ_TOKEN", kReadToken, 1);
    const std::string tokens = testing::WriteTempFile(
        "tokens:\n"
        "  - { name: svc, token_env: CELLAR_BAD_REQUEST_TOKEN, datastores: { trips: [read, write] "
        "} }\n"
        "  - { name: ro, token_env: CELLAR_BAD_REQUEST_READ_TOKEN, datastores: { trips: [read] } "
        "}\n",
        ".yaml");
    server = testing::CellardProcess::Start(
        config_path,
        {"--max-request-bytes", std::to_string(kMaxRequestBytes), "--read-timeout-ms", "1000"});
    ASSERT_NE(nullptr, server);
    auth_server = testing::CellardProcess::Start(config_path, {"--tokens", tokens});
    ASSERT_NE(nullptr, auth_server);
  }
  void TearDown() override {
    auth_server.reset();
    server.reset();
    store.reset();
    db.reset();
  }

  std::unique_ptr<testing::PrivateMariaDb> db;
  std::unique_ptr<CellStore> store;
  std::unique_ptr<testing::CellardProcess> server, auth_server;
};

BadRequestEnv* const env =
    static_cast<BadRequestEnv*>(::testing::AddGlobalTestEnvironment(new BadRequestEnv));

struct BadRequest {
  std::string name;
  std::string method;
  std::string path;  // already percent-encoded where needed
  std::string body;
  int want;
  std::string token = "-";  // "-": no auth server; otherwise sent to the auth server
  std::string content_type = "application/json";
};

std::vector<uint64_t> AllHeads() {
  std::vector<uint64_t> heads;
  for (const char* ds : {"trips", "users"})
    for (uint32_t s = 0; s < kShards; ++s) {
      auto h = env->store->ShardHead(ds, s);
      EXPECT_TRUE(h.ok()) << h.status().ToString();
      heads.push_back(h.ok() ? *h : ~0ull);
    }
  return heads;
}

std::string Nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

std::string BatchOf(int n, const std::string& row) {
  json cells = json::array();
  for (int i = 0; i < n; ++i)
    cells.push_back({{"row_key", row}, {"column", "BASE"}, {"ref_key", i}, {"body", {{"i", i}}}});
  return json{{"cells", cells}}.dump();
}

std::string BatchCell(json row, json column, json ref, json body) {
  return json{{"cells",
               {{{"row_key", std::move(row)},
                 {"column", std::move(column)},
                 {"ref_key", std::move(ref)},
                 {"body", std::move(body)}}}}}
      .dump();
}

std::vector<BadRequest> Table() {
  const std::string row = Uuid::Random().ToString();
  const std::string cells = "/v1/trips/cells/" + row;
  const std::string sql =
      "'%3B%20DROP%20TABLE%20cells_trips%3B%20--";  // '; DROP TABLE cells_trips; --
  const std::string big_cell = "{\"pad\":\"" + std::string(kMaxBodyBytes, 'x') + "\"}";
  const std::string huge = "{\"pad\":\"" + std::string(kMaxRequestBytes + 10, 'x') + "\"}";
  return {
      {"malformed JSON", "PUT", cells + "/BASE/1", "{\"a\": ", 400},
      {"unquoted keys", "PUT", cells + "/BASE/1", "{a: 1}", 400},
      {"trailing garbage", "PUT", cells + "/BASE/1", "{\"a\": 1} x", 400},
      {"invalid UTF-8", "PUT", cells + "/BASE/1", "{\"a\": \"\xff\xfe\"}", 400},
      {"empty body", "PUT", cells + "/BASE/1", "", 400},
      {"array body", "PUT", cells + "/BASE/1", "[1, 2]", 400},
      {"string body", "PUT", cells + "/BASE/1", "\"trip\"", 400},
      {"null body", "PUT", cells + "/BASE/1", "null", 400},
      {"nested 1000 deep", "PUT", cells + "/BASE/1", "{\"a\":" + Nested(1000) + "}", 400},
      // One past the documented limit of 100 (kMaxBodyDepth).
      {"nested 101 deep", "PUT", cells + "/BASE/1", "{\"a\":" + Nested(100) + "}", 400},
      {"bad UUID", "PUT", "/v1/trips/cells/not-a-uuid/BASE/1", "{}", 400},
      {"UUID one char short", "GET", cells.substr(0, cells.size() - 1) + "/BASE", "", 400},
      {"negative ref_key", "PUT", cells + "/BASE/-1", "{}", 400},
      {"non-numeric ref_key", "PUT", cells + "/BASE/one", "{}", 400},
      {"fractional ref_key", "GET", cells + "/BASE/1.5", "", 400},
      {"ref_key over int64", "PUT", cells + "/BASE/9223372036854775808", "{}", 400},
      {"plus-signed ref_key", "GET", cells + "/BASE/+1", "", 400},
      {"unknown datastore (put)", "PUT", "/v1/nope/cells/" + row + "/BASE/1", "{}", 404},
      {"unknown datastore (row)", "GET", "/v1/nope/cells/" + row, "", 404},
      {"unknown column (put)", "PUT", cells + "/NOPE/1", "{}", 404},
      {"unknown column (latest)", "GET", cells + "/base", "", 404},
      {"column of another datastore", "DELETE", cells + "/PROFILE", "", 404},
      {"cell body over max_body_bytes", "PUT", cells + "/BASE/1", big_cell, 413},
      {"request over max_request_bytes", "PUT", cells + "/BASE/1", huge, 413},
      {"huge batch", "POST", "/v1/trips/cells:batch", BatchOf(kMaxBatchCells + 1, row), 413},
      {"batch: not an object", "POST", "/v1/trips/cells:batch", "[]", 400},
      {"batch: no cells key", "POST", "/v1/trips/cells:batch", "{\"cell\": []}", 400},
      {"batch: bad UUID", "POST", "/v1/trips/cells:batch",
       BatchCell("x", "BASE", 1, json::object()), 400},
      {"batch: negative ref_key", "POST", "/v1/trips/cells:batch",
       BatchCell(row, "BASE", -5, json::object()), 400},
      {"batch: string ref_key", "POST", "/v1/trips/cells:batch",
       BatchCell(row, "BASE", "1", json::object()), 400},
      {"batch: array body", "POST", "/v1/trips/cells:batch",
       BatchCell(row, "BASE", 1, json::array()), 400},
      {"batch: unknown column", "POST", "/v1/trips/cells:batch",
       BatchCell(row, "NOPE", 1, json::object()), 404},
      {"batch: one good one bad", "POST", "/v1/trips/cells:batch",
       json{{"cells",
             {{{"row_key", row}, {"column", "BASE"}, {"ref_key", 1}, {"body", {{"ok", 1}}}},
              {{"row_key", row}, {"column", "BASE"}, {"ref_key", -1}, {"body", {{"ok", 0}}}}}}}
           .dump(),
       400},
      {"path traversal", "GET", "/v1/../../etc/passwd", "", 404},
      {"encoded traversal in datastore", "GET", "/v1/%2e%2e%2fetc/cells/" + row, "", 404},
      {"encoded traversal in column", "GET", cells + "/..%2F..%2Fpasswd", "", 404},
      {"traversal as column", "GET", cells + "/..", "", 404},
      {"SQL in datastore", "PUT", "/v1/trips" + sql + "/cells/" + row + "/BASE/1", "{}", 404},
      {"SQL in row key", "PUT", "/v1/trips/cells/" + row.substr(0, 8) + sql + "/BASE/1", "{}", 400},
      {"SQL in column", "PUT", cells + "/BASE" + sql + "/1", "{}", 404},
      {"SQL in ref_key", "PUT", cells + "/BASE/1" + sql, "{}", 400},
      {"SQL in shard", "GET", "/v1/trips/shards/0" + sql + "/log", "", 400},
      {"SQL in query", "GET", cells + "/BASE/versions?limit=1" + sql, "", 400},
      {"SQL in as_of", "GET", cells + "/BASE/versions?as_of=" + sql, "", 400},
      {"SQL in since", "GET", cells + "/BASE/versions?since=" + sql, "", 400},
      {"since after as_of", "GET",
       cells + "/BASE/versions?since=2026-01-02T00:00:00Z&as_of=2026-01-01T00:00:00Z", "", 400},
      {"SQL in batch column", "POST", "/v1/trips/cells:batch",
       BatchCell(row, "BASE'; DROP TABLE x; --", 1, json::object()), 404},
      {"SQL in batch row key", "POST", "/v1/trips/cells:batch",
       BatchCell("'; DROP TABLE x; --", "BASE", 1, json::object()), 400},
      {"unknown query parameter", "GET", cells + "/BASE?verbose=1", "", 400},
      {"bad read preference", "GET", cells + "/BASE?read=nearest", "", 400},
      {"read preference on a put", "PUT", cells + "/BASE/1?read=replica", "{}", 400},
      {"not a position token", "GET", cells + "/BASE/1?read=replica&after=12", "", 400},
      {"SQL in after", "GET", cells + "?read=replica&after=" + sql, "", 400},
      {"duplicate query parameter", "GET", cells + "/BASE/versions?limit=1&limit=2", "", 400},
      {"limit 0", "GET", cells + "/BASE/versions?limit=0", "", 400},
      {"min_ref above max_ref", "GET", cells + "/BASE/versions?min_ref=5&max_ref=1", "", 400},
      {"shard out of range", "GET", "/v1/trips/shards/4/log", "", 404},
      {"log limit too large", "GET", "/v1/trips/shards/0/log?limit=100000", "", 400},
      {"negative after", "GET", "/v1/trips/shards/0/log?after=-1", "", 400},
      {"unknown endpoint", "GET", "/v2/trips/cells/" + row, "", 404},
      {"trailing slash", "GET", cells + "/", "", 404},
      {"method not allowed", "POST", cells + "/BASE/1", "{}", 405},
      {"PATCH not allowed", "PATCH", cells + "/BASE/1", "{}", 405},
      {"multipart body", "PUT", cells + "/BASE/1", "--x\r\n\r\n--x--\r\n", 415, "-",
       "multipart/form-data; boundary=x"},
      {"missing token", "PUT", cells + "/BASE/1", "{}", 401, ""},
      {"bad token", "PUT", cells + "/BASE/1", "{}", 401, "not-the-token-0123456789"},
      {"token with SQL", "GET", cells + "/BASE", "", 401, "' OR '1'='1"},
      {"read-only token writes", "PUT", cells + "/BASE/1", "{}", 403, kReadToken},
      {"token lacks datastore", "GET", "/v1/users/cells/" + row, "", 403, kToken},
  };
}

httplib::Result Send(httplib::Client& c, const BadRequest& r) {
  httplib::Headers h;
  if (r.token != "-" && !r.token.empty()) h.emplace("Authorization", "Bearer " + r.token);
  if (r.method == "GET") return c.Get(r.path, h);
  if (r.method == "PUT") return c.Put(r.path, h, r.body, r.content_type);
  if (r.method == "POST") return c.Post(r.path, h, r.body, r.content_type);
  if (r.method == "PATCH") return c.Patch(r.path, h, r.body, r.content_type);
  return c.Delete(r.path, h);
}

TEST(HttpBadRequestTest, EveryBadRequestGetsItsStatusAndWritesNothing) {
  ASSERT_NE(nullptr, env->server);
  const std::vector<BadRequest> table = Table();
  ASSERT_GE(table.size(), 30u);
  httplib::Client plain("127.0.0.1", env->server->port());
  httplib::Client authed("127.0.0.1", env->auth_server->port());
  const std::vector<uint64_t> before = AllHeads();
  for (const BadRequest& r : table) {
    SCOPED_TRACE(r.name + ": " + r.method + " " + r.path.substr(0, 120));
    auto res = Send(r.token == "-" ? plain : authed, r);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(r.want, res->status) << res->body.substr(0, 300);
    json body = json::parse(res->body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << "not JSON: " << res->body.substr(0, 200);
    EXPECT_TRUE(body["error"]["code"].is_string()) << res->body.substr(0, 200);
    EXPECT_TRUE(body["error"]["message"].is_string());
    EXPECT_EQ(before, AllHeads()) << "a rejected request wrote something";
  }
  std::printf("%zu bad requests answered with their 4xx; nothing written\n", table.size());
}

// Sends raw bytes and returns the status code of the answer's status line (0
// when there is none within 15 s).
int RawStatus(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return 0;
  }
  timeval tv{15, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading everything
    sent += static_cast<size_t>(n);
  }
  // No half-close: httplib does not answer a peer that shut its writing side.
  std::string answer;
  char buf[4096];
  ssize_t n;
  while (answer.find("\r\n") == std::string::npos && (n = ::recv(fd, buf, sizeof buf, 0)) > 0)
    answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  // "HTTP/1.1 413 Payload Too Large"
  if (answer.size() < 12 || answer.compare(0, 5, "HTTP/") != 0) return 0;
  return std::atoi(answer.c_str() + 9);
}

TEST(HttpBadRequestTest, MalformedWireRequests) {
  ASSERT_NE(nullptr, env->server);
  const int port = env->server->port();
  const std::string path = "/v1/trips/cells/" + Uuid::Random().ToString() + "/BASE/1";
  const std::vector<uint64_t> before = AllHeads();
  struct Wire {
    std::string name, bytes;
    int want;
  };
  std::string chunked =
      "PUT " + path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string chunk(60000, 'x');
  chunk = "{\"a\":\"" + chunk + "\"}";
  for (int i = 0; i < 3; ++i) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%zx", chunk.size());
    chunked += std::string(hex) + "\r\n" + chunk + "\r\n";
  }
  chunked += "0\r\n\r\n";
  const std::vector<Wire> wires = {
      {"truncated body",
       "PUT " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":", 400},
      {"Content-Length over the limit",
       "PUT " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n{}", 413},
      {"chunked body over the limit", chunked, 413},
      {"garbage request line", "HELLO\r\n\r\n", 400},
      {"bad Content-Length",
       "PUT " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", 400},
  };
  for (const Wire& w : wires) {
    SCOPED_TRACE(w.name);
    EXPECT_EQ(w.want, RawStatus(port, w.bytes));
    EXPECT_EQ(before, AllHeads()) << "a rejected request wrote something";
  }
  // The server is still healthy afterwards.
  httplib::Client c("127.0.0.1", port);
  auto health = c.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(200, health->status);
}

}  // namespace
}  // namespace cellar
