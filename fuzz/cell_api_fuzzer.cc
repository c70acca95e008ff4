// Fuzzes the HTTP request handling path without a socket: routing, auth,
// validation and the JSON answers of CellApi (api/cell_api.h) over
// the in-memory backend. Input, one field per line, the body last:
//   METHOD\nPATH\nQUERY (k=v&k=v, not decoded)\nAUTHORIZATION\nBODY...
// Invariants (abort on violation): no exception, never a 500, the status is
// one the API documents, the answer is JSON with {"error":{code,message}} on
// errors, and a rejected request (4xx) wrote nothing.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "api/cell_api.h"
#include "cells/testing/memory_cell_store.h"

namespace {

using cellar::ApiRequest;

cellar::ClusterConfig Config() {
  auto c = cellar::ParseClusterConfig(
      "shards: 4\n"
      "mysql: { hosts: [ { address: 127.0.0.1, port: 1, shards: 0-3 } ] }\n"
      "limits: { max_body_bytes: 2048, max_batch_cells: 8, max_log_limit: 50 }\n"
      "datastores:\n"
      "  - { name: trips, columns: { BASE: {}, STATUS: {} } }\n"
      "  - { name: users, columns: { PROFILE: {} } }\n",
      "fuzz");
  if (!c.ok()) std::abort();
  return *c;
}

const cellar::TokenTable& Tokens() {
  static const cellar::TokenTable t = [] {
    auto r = cellar::TokenTable::Parse(
        "tokens:\n"
        "  - { name: w, token_env: W, datastores: { trips: [read, write] } }\n"
        "  - { name: r, token_env: R, datastores: { \"*\": [read] } }\n",
        "fuzz", ".", [](const char* n) -> const char* {
          return std::string_view(n) == "W" ? "writer-token-0123456789" : "reader-token-0123456789";
        });
    if (!r.ok()) std::abort();
    return *r;
  }();
  return t;
}

std::string_view NextLine(std::string_view& in) {
  const size_t nl = in.find('\n');
  std::string_view line = in.substr(0, nl);
  in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cellar::ClusterConfig config = Config();
  static const std::set<int> kDocumented = {200, 201, 400, 401, 403, 404, 405, 409, 413, 503};
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ApiRequest req;
  req.method = NextLine(in);
  req.path = NextLine(in);
  std::string_view query = NextLine(in);
  req.authorization = NextLine(in);
  req.body = in;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    const size_t eq = kv.find('=');
    req.params.emplace_back(kv.substr(0, eq),
                            eq == std::string_view::npos ? "" : kv.substr(eq + 1));
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  cellar::MemoryCellStore backend(config);
  cellar::CellApiOptions options;
  options.max_request_bytes = 16 * 1024;
  const bool with_auth = !req.authorization.empty();
  cellar::CellApi api(config, &backend, with_auth ? &Tokens() : nullptr, options);
  // Twice: the second time the first one's writes exist (retries, conflicts).
  for (int round = 0; round < 2; ++round) {
    const size_t before = backend.size();
    const cellar::ApiResponse r = api.Handle(req);
    if (!kDocumented.count(r.status)) std::abort();
    nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) std::abort();
    if (r.status >= 400 && !(j.is_object() && j.contains("error") && j["error"].is_object() &&
                             j["error"].contains("code") && j["error"]["code"].is_string() &&
                             j["error"].contains("message") && j["error"]["message"].is_string()))
      std::abort();
    if (r.status >= 400 && backend.size() != before) std::abort();
  }
  return 0;
}
