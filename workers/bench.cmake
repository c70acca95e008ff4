# cellar-bench: benchmark programs (workers/bench/). Each subcommand lives in
# bench_<name>.cc (a long one also in bench_<name>_<part>.cc); it links the
# private-MariaDB support library to start its own server when not given --config.
add_executable(cellar-bench
  bench/bench_main.cc
  bench/bench_common.cc
  bench/bench_load.cc
  bench/bench_put.cc
  bench/bench_put_raw.cc
  bench/bench_put_store.cc
  bench/bench_put_phases.cc
  bench/bench_relay.cc
  bench/bench_relay_baselines.cc
  bench/bench_relay_collector.cc
  bench/bench_relay_rounds.cc
  bench/bench_trigger.cc
  bench/bench_index.cc
  bench/bench_index_trips.cc
  bench/bench_index_lag.cc
  bench/bench_index_upserts.cc
  bench/bench_index_query.cc
  bench/bench_index_report.cc
  bench/bench_all.cc
  bench/bench_all_child.cc)
target_include_directories(cellar-bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(cellar-bench PRIVATE cellar_cells cellar_changelog cellar_triggers
  cellar_indexes cellar_test_support CLI11::CLI11
  nlohmann_json::nlohmann_json Threads::Threads)
