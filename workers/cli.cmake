add_library(cellar_signals STATIC signal_wait.cc)
target_include_directories(cellar_signals PUBLIC ${PROJECT_SOURCE_DIR})

add_library(cellar_cli STATIC cli/cli_common.cc cli/cli_cells.cc cli/cli_changelog.cc
  cli/cli_triggers.cc cli/cli_indexes.cc cli/cli_layout.cc)
target_link_libraries(cellar_cli PUBLIC cellar_cells cellar_changelog cellar_triggers cellar_indexes cellar_retention cellar_config
  cellar_signals CLI11::CLI11 PkgConfig::HTTPLIB)
add_executable(cellar cellar_main.cc)
target_link_libraries(cellar PRIVATE cellar_cli)

add_executable(cellar-relay cellar_relay_main.cc)
target_link_libraries(cellar-relay PRIVATE cellar_changelog cellar_signals CLI11::CLI11)
