# The policy engine (validation, compilation, decisions). It extends the sempi_policy module
# declared in src/CMakeLists.txt; like it, it must not depend on transport.
target_sources(sempi_policy PRIVATE policy/policy.cpp)
