# cellar-broker: an in-memory Kafka-protocol broker (librdkafka mock cluster)
# for development and benchmarks. Self-contained: does not use tests/support.
add_executable(cellar-broker cellar_broker_main.cc)
target_link_libraries(cellar-broker PRIVATE cellar_base PkgConfig::RDKAFKA CLI11::CLI11)
