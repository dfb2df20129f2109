# Collective algorithms (one family per file) over the core's point-to-point engine, and the
# reduction kernels behind sempi::Op.
sempi_module(coll
  SOURCES coll/schedule.cpp coll/abandon.cpp coll/tuning.cpp coll/reduce_ops.cpp
          coll/barrier_dissemination.cpp coll/binomial.cpp coll/bcast_scatter_allgather.cpp
          coll/recursive_doubling.cpp coll/rabenseifner.cpp coll/ring.cpp coll/bruck.cpp
          coll/pairwise.cpp coll/linear.cpp coll/scan.cpp
  PUBLIC_DEPS sempi::core)

target_sources(sempi PRIVATE api/collectives.cpp)
target_link_libraries(sempi PRIVATE sempi::coll)
