# Collectives under real jobs: every operation against a serial reference at 1..9 ranks.
add_executable(coll_check programs/coll_check.cpp)
target_link_libraries(coll_check PRIVATE sempi::sempi Threads::Threads sempi_project_options)

sempi_test(coll_test SOURCES coll_test.cpp TIMEOUT 600)
target_include_directories(coll_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
add_dependencies(coll_test coll_check sempirun pi)
target_compile_definitions(coll_test PRIVATE
  SEMPIRUN_PATH="$<TARGET_FILE:sempirun>"
  COLL_CHECK_PATH="$<TARGET_FILE:coll_check>"
  PI_PATH="$<TARGET_FILE:pi>")
