# Policy enforcement and the audit log on real jobs (sempirun, real processes, real TLS).
add_executable(policy_probe programs/policy_probe.cpp)
target_link_libraries(policy_probe PRIVATE sempi::sempi sempi_project_options)
target_include_directories(policy_probe PRIVATE ${PROJECT_SOURCE_DIR}/tests)

sempi_test(policy_audit_test SOURCES policy_audit_test.cpp LIBS sempi::audit TIMEOUT 240)
target_include_directories(policy_audit_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
add_dependencies(policy_audit_test policy_probe coll_check sempirun sempi_tool)
target_compile_definitions(policy_audit_test PRIVATE
  SEMPIRUN_PATH="$<TARGET_FILE:sempirun>"
  SEMPI_TOOL_PATH="$<TARGET_FILE:sempi_tool>"
  POLICY_PROBE_PATH="$<TARGET_FILE:policy_probe>"
  COLL_CHECK_PATH="$<TARGET_FILE:coll_check>")
