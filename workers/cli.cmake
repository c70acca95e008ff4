add_library(cellar_cli STATIC cli/cli_common.cc cli/cli_cells.cc)
target_link_libraries(cellar_cli PUBLIC cellar_cells cellar_config CLI11::CLI11)
add_executable(cellar cellar_main.cc)
target_link_libraries(cellar PRIVATE cellar_cli)
