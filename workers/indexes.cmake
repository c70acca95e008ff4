add_executable(cellar-indexer cellar_indexer_main.cc)
target_link_libraries(cellar-indexer PRIVATE cellar_indexes cellar_signals CLI11::CLI11)
