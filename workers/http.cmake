# The HTTP worker node (workers/http/): the socket-free API library (also
# fuzzed), its httplib binding, the cellard binary, `cellar serve` and
# `cellar-bench http`.
add_library(cellar_http_api STATIC
  http/api_route.cc
  http/batch_request.cc
  http/cell_api.cc
  http/cell_backend.cc
  http/index_request.cc
  http/json_body.cc
  http/memory_cell_backend.cc
  http/request_fields.cc
  http/token_auth.cc)
target_include_directories(cellar_http_api PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(cellar_http_api PUBLIC cellar_cells cellar_indexes cellar_client cellar_config
  cellar_base nlohmann_json::nlohmann_json OpenSSL::Crypto)

add_library(cellar_http_server STATIC http/http_server.cc http/serve_command.cc)
target_link_libraries(cellar_http_server PUBLIC cellar_http_api cellar_retention cellar_signals CLI11::CLI11
  PkgConfig::HTTPLIB)

add_executable(cellard cellard_main.cc)
target_link_libraries(cellard PRIVATE cellar_http_server)

target_sources(cellar_cli PRIVATE cli/cli_serve.cc)
target_link_libraries(cellar_cli PUBLIC cellar_http_server)

if(TARGET cellar-bench AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_http.cc)
  target_sources(cellar-bench PRIVATE bench/bench_http.cc)
  target_link_libraries(cellar-bench PRIVATE cellar_http_server cellar_client)
endif()
