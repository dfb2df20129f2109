// The ABI of libsempi_mpi's predefined handles.
//
// MPI_COMM_WORLD, MPI_INT, MPI_SUM and the other predefined handles are addresses of objects
// this library exports. A program built against mpi.h keeps its own copy of each object (an
// x86-64 copy relocation), of the size the object had when the program was linked. A library
// whose objects have grown since then overwrites memory past those copies: the program breaks
// silently, e.g. hangs. So the sizes are part of the ABI. Changing one requires a new
// SEMPI_MPI_ABI (the SONAME, in mpi.cmake), so that programs built before keep the library
// they were built for; update the sizes here at the same time. (sempi_mpi_message is checked
// next to its definition, in matched_probe.cpp.)

#include "mpi/mpi_impl.hpp"

#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(sempi_mpi_comm) == 136, "ABI change: bump SEMPI_MPI_ABI (abi_guard.cpp)");
static_assert(sizeof(sempi_mpi_group) == 40, "ABI change: bump SEMPI_MPI_ABI (abi_guard.cpp)");
static_assert(sizeof(sempi_mpi_errhandler) == 16, "ABI change: bump SEMPI_MPI_ABI (abi_guard.cpp)");
static_assert(sizeof(sempi_mpi_datatype) == 112, "ABI change: bump SEMPI_MPI_ABI (abi_guard.cpp)");
static_assert(sizeof(sempi_mpi_op) == 48, "ABI change: bump SEMPI_MPI_ABI (abi_guard.cpp)");
#endif
