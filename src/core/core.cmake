# The rank runtime: progress engine, matching, communicators, enrollment.
sempi_module(core
  SOURCES core/engine.cpp core/rank_bootstrap.cpp core/higher_rank_acceptor.cpp
          core/runtime.cpp core/comm_factory.cpp core/payload_pool.cpp
  PUBLIC_DEPS sempi::transport sempi::launch_protocol sempi::policy)

target_sources(sempi PRIVATE api/communicator.cpp api/message.cpp api/request.cpp
                             api/environment.cpp api/rank_stdout.cpp)
target_link_libraries(sempi PRIVATE sempi::core)
