// The OpenAPI 3 document of the HTTP API (api/openapi.json), embedded at
// build time (api/CMakeLists.txt generates its definition from the file) and
// served at GET /v1/openapi.json. tests/http_openapi_test.cc checks it
// against the route table (api_route.h) and a running server.
// Threading: the returned text is immutable and lives for the program.
#pragma once

#include <string_view>

namespace cellar {

// The JSON text of api/openapi.json as it was at build time.
std::string_view OpenApiDocument();

}  // namespace cellar
