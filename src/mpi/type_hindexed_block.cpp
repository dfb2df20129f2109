// MPI_Type_create_hindexed_block (MPI 3.1 section 4.1.2): equal-length blocks at byte
// displacements - MPI_Type_create_indexed_block with displacements in bytes.

#include <vector>

#include "mpi/mpi_impl.hpp"

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_create_hindexed_block", [&] {
    check_count(count);
    if (blocklength < 0) fail(MPI_ERR_ARG, "negative block length " + std::to_string(blocklength));
    const auto& old = type_of(oldtype, false);
    const std::vector<std::int64_t> lengths(static_cast<std::size_t>(count), blocklength);
    const std::vector<std::int64_t> displs(displacements, displacements + count);
    auto* t = new sempi_mpi_datatype;
    t->map = TypeMap::hindexed(lengths, displs, *old);
    *newtype = t;
  });
}

}  // extern "C"
