# Rank programs and the real-job tests that run them under sempirun.
add_executable(p2p_check programs/p2p_check.cpp)
target_link_libraries(p2p_check PRIVATE sempi::sempi OpenSSL::Crypto Threads::Threads
                      sempi_project_options)
target_include_directories(p2p_check PRIVATE ${PROJECT_SOURCE_DIR}/tests)

sempi_test(runtime_test SOURCES runtime_test.cpp TIMEOUT 900)
target_include_directories(runtime_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
add_dependencies(runtime_test p2p_check sempirun ring pi)
target_compile_definitions(runtime_test PRIVATE
  SEMPIRUN_PATH="$<TARGET_FILE:sempirun>"
  P2P_CHECK_PATH="$<TARGET_FILE:p2p_check>"
  RING_PATH="$<TARGET_FILE:ring>"
  PI_PATH="$<TARGET_FILE:pi>")

# A peer host lost without a reset, simulated in a private network namespace (skips where
# none can be made).
sempi_test(lost_host_test SOURCES lost_host_test.cpp TIMEOUT 300)
target_include_directories(lost_host_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
add_dependencies(lost_host_test p2p_check sempirun)
target_compile_definitions(lost_host_test PRIVATE
  SEMPIRUN_PATH="$<TARGET_FILE:sempirun>"
  P2P_CHECK_PATH="$<TARGET_FILE:p2p_check>")
