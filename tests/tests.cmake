cellar_test(support_test support_test.cc kafka_transactions_probe_test.cc)
cellar_test(config_test config_test.cc)
target_link_libraries(config_test PRIVATE cellar_cells)
cellar_test(cells_unit_test cells_unit_test.cc base_unit_test.cc)
target_link_libraries(cells_unit_test PRIVATE cellar_cells)
cellar_test(cells_store_test cells_store_test.cc)
target_link_libraries(cells_store_test PRIVATE cellar_cells)
cellar_test(cells_store_concurrency_test cells_store_concurrency_test.cc)
target_link_libraries(cells_store_concurrency_test PRIVATE cellar_cells)
cellar_test(cells_host_log_test cells_host_log_test.cc)
target_link_libraries(cells_host_log_test PRIVATE cellar_cells)
cellar_test(cells_failure_test cells_failure_test.cc)
target_link_libraries(cells_failure_test PRIVATE cellar_cells)
cellar_test(cells_bad_input_test cells_bad_input_test.cc)
target_link_libraries(cells_bad_input_test PRIVATE cellar_cells)
cellar_test(relay_test relay_test.cc relay_process_test.cc relay_exactly_once_test.cc
            relay_test_util.cc)
target_link_libraries(relay_test PRIVATE cellar_changelog)
target_compile_definitions(relay_test PRIVATE CELLAR_RELAY_BIN="$<TARGET_FILE:cellar-relay>")
add_dependencies(relay_test cellar-relay)
cellar_test(retention_test retention_test.cc relay_test_util.cc)
target_link_libraries(retention_test PRIVATE cellar_retention)
target_compile_definitions(retention_test PRIVATE CELLAR_RELAY_BIN="$<TARGET_FILE:cellar-relay>")
# HTTP worker node (workers/http/, client/): unit tests without sockets, and
# end-to-end tests against real cellard processes over a private MariaDB.
cellar_test(http_api_unit_test http_api_unit_test.cc)
target_link_libraries(http_api_unit_test PRIVATE cellar_http_api)
foreach(t http_server_test http_bad_request_test http_failover_test http_erase_test)
  cellar_test(${t} ${t}.cc http_test_util.cc)
  target_link_libraries(${t} PRIVATE cellar_client cellar_cells PkgConfig::HTTPLIB)
  target_compile_definitions(${t} PRIVATE CELLARD_BIN="$<TARGET_FILE:cellard>")
  add_dependencies(${t} cellard)
endforeach()
target_link_libraries(http_server_test PRIVATE cellar_indexes)
target_compile_definitions(http_server_test PRIVATE CELLAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
cellar_test(system_test system_test.cc)
target_link_libraries(system_test PRIVATE cellar_client cellar_indexes cellar_triggers)
target_compile_definitions(system_test PRIVATE CELLAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}" CELLAR_BUILD_DIR="${PROJECT_BINARY_DIR}")
add_dependencies(system_test cellar cellard cellar-relay cellar-indexer cellar-billing cellar-trigger cellar-webhook-sink cellar-broker)
set_tests_properties(system_test PROPERTIES TIMEOUT 900)
cellar_test(trigger_test trigger_test.cc trigger_dlq_test.cc trigger_group_test.cc
            trigger_large_body_test.cc keyed_consumer_test.cc trigger_test_util.cc)
target_link_libraries(trigger_test PRIVATE cellar_triggers PkgConfig::HTTPLIB)
cellar_test(triggers_unit_test triggers_unit_test.cc trigger_config_unit_test.cc)
target_link_libraries(triggers_unit_test PRIVATE cellar_triggers)
cellar_test(webhook_test webhook_test.cc trigger_test_util.cc)
target_link_libraries(webhook_test PRIVATE cellar_triggers PkgConfig::HTTPLIB)
cellar_test(trigger_process_test trigger_process_test.cc trigger_test_util.cc)
target_link_libraries(trigger_process_test PRIVATE cellar_triggers PkgConfig::HTTPLIB)
target_compile_definitions(trigger_process_test PRIVATE
  CELLAR_BILLING_BIN="$<TARGET_FILE:cellar-billing>" CELLAR_TRIGGER_BIN="$<TARGET_FILE:cellar-trigger>")
add_dependencies(trigger_process_test cellar-billing cellar-trigger)
cellar_test(indexes_unit_test indexes_unit_test.cc indexes_entry_unit_test.cc)
target_link_libraries(indexes_unit_test PRIVATE cellar_indexes)
target_compile_definitions(indexes_unit_test PRIVATE CELLAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
cellar_test(indexes_test indexes_test.cc indexes_large_body_test.cc indexes_lag_test.cc
            indexes_test_util.cc)
target_link_libraries(indexes_test PRIVATE cellar_indexes)
target_compile_definitions(indexes_test PRIVATE CELLAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
cellar_test(indexes_model_test indexes_model_test.cc indexes_test_util.cc)
target_link_libraries(indexes_model_test PRIVATE cellar_indexes)
target_compile_definitions(indexes_model_test PRIVATE CELLAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# #14 part 5: a host outage under the running relay and index worker.
cellar_test(host_return_test host_return_test.cc indexes_test_util.cc)
target_link_libraries(host_return_test PRIVATE cellar_indexes cellar_index_model)
target_compile_definitions(host_return_test PRIVATE CELLAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
cellar_test(cells_migration_test cells_migration_test.cc)
target_link_libraries(cells_migration_test PRIVATE cellar_cells)
cellar_test(cells_shard_move_test cells_shard_move_test.cc)
target_link_libraries(cells_shard_move_test PRIVATE cellar_cells)
# Idempotent erase: store level, and a lost COMMIT acknowledgement through a fault proxy.
cellar_test(cells_erase_test cells_erase_test.cc)
target_link_libraries(cells_erase_test PRIVATE cellar_cells)
# The brute-force index model (index_model.h), shared by the index suites and the history check.
add_library(cellar_index_model STATIC index_model.cc)
target_link_libraries(cellar_index_model PUBLIC cellar_indexes GTest::gtest)
target_link_libraries(indexes_test PRIVATE cellar_index_model)
target_link_libraries(indexes_model_test PRIVATE cellar_index_model)
# The history check (#14 part 4): a seeded workload under faults against the
# whole stack as processes, checked from its record (tests/history/).
# CELLAR_HISTORY_SEED replays a run; CELLAR_HISTORY_SECONDS=1800 is the soak.
cellar_test(history_check_test history_check_test.cc http_test_util.cc
            history/stack.cc history/history.cc history/violations.cc history/workload.cc
            history/workload_thread.cc history/faults.cc history/stored_cells.cc
            history/check_rows.cc history/check_trigger.cc history/check_change_log.cc
            history/topic_reader.cc history/check_index.cc)
target_link_libraries(history_check_test PRIVATE cellar_client cellar_indexes cellar_triggers
  cellar_index_model)
target_compile_definitions(history_check_test PRIVATE CELLAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
  CELLARD_BIN="$<TARGET_FILE:cellard>" CELLAR_RELAY_BIN="$<TARGET_FILE:cellar-relay>"
  CELLAR_INDEXER_BIN="$<TARGET_FILE:cellar-indexer>" CELLAR_BILLING_BIN="$<TARGET_FILE:cellar-billing>")
add_dependencies(history_check_test cellard cellar-relay cellar-indexer cellar-billing)
set_tests_properties(history_check_test PROPERTIES TIMEOUT 600)
