# `sempirun`: the mpirun-style launcher; the logic lives in sempi::launch.
add_executable(sempirun sempirun/main.cpp)
target_link_libraries(sempirun PRIVATE sempi::launch sempi_project_options)
install(TARGETS sempirun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
