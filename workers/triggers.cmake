add_executable(cellar-trigger cellar_trigger_main.cc)
target_link_libraries(cellar-trigger PRIVATE cellar_triggers CLI11::CLI11)
add_executable(cellar-billing cellar_billing_main.cc)
target_link_libraries(cellar-billing PRIVATE cellar_triggers CLI11::CLI11)
