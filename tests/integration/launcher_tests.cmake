# Launcher (sempirun) tests: unit tests of its pure parts, and end-to-end runs of the binary.

sempi_test(launch_options_test SOURCES launch_options_test.cpp LIBS sempi::launch TIMEOUT 60)
sempi_test(program_path_test SOURCES program_path_test.cpp LIBS sempi::launch TIMEOUT 60)
sempi_test(rank_process_test SOURCES rank_process_test.cpp LIBS sempi::launch TIMEOUT 120)
sempi_test(output_forwarder_test SOURCES output_forwarder_test.cpp LIBS sempi::launch TIMEOUT 60)
sempi_test(output_writer_test SOURCES output_writer_test.cpp LIBS sempi::launch TIMEOUT 120)
sempi_test(enrollment_test SOURCES enrollment_test.cpp LIBS sempi::launch TIMEOUT 120)

# A rank that speaks the bootstrap protocol by hand (no sempi runtime).
add_executable(enroll_probe programs/enroll_probe.cpp)
target_link_libraries(enroll_probe PRIVATE sempi::launch_protocol sempi::pki sempi_project_options)

# Runs the real binaries; their paths are compiled in so the test runs from any directory.
sempi_test(sempirun_test SOURCES sempirun_test.cpp LIBS sempi::policy sempi::transport TIMEOUT 240)
target_compile_definitions(sempirun_test PRIVATE
  SEMPIRUN_PATH="$<TARGET_FILE:sempirun>"
  ENROLL_PROBE_PATH="$<TARGET_FILE:enroll_probe>"
  P2P_CHECK_PATH="$<TARGET_FILE:p2p_check>")
add_dependencies(sempirun_test sempirun enroll_probe p2p_check)
