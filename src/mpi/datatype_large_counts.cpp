// Datatype queries with MPI_Count results (MPI 3.1 section 4.1.5): the _x forms report sizes,
// extents and element counts beyond INT_MAX, where the int forms can only say MPI_UNDEFINED.

#include "mpi/mpi_impl.hpp"

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_size_x", [&] {
    const auto& t = type_of(datatype, false);
    require_output(size, "size");
    *size = static_cast<MPI_Count>(t->size);
  });
}

int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_get_extent_x", [&] {
    const auto& t = type_of(datatype, false);
    require_output(lb, "lb");
    require_output(extent, "extent");
    *lb = static_cast<MPI_Count>(t->lb);
    *extent = static_cast<MPI_Count>(t->extent());
  });
}

int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb,
                               MPI_Count* true_extent) {
  return guarded(MPI_COMM_WORLD, "MPI_Type_get_true_extent_x", [&] {
    const auto& t = type_of(datatype, false);
    require_output(true_lb, "true_lb");
    require_output(true_extent, "true_extent");
    *true_lb = static_cast<MPI_Count>(t->true_lb);
    *true_extent = static_cast<MPI_Count>(t->true_ub - t->true_lb);
  });
}

int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return guarded(MPI_COMM_WORLD, "MPI_Get_elements_x", [&] {
    const auto& type = type_of(datatype, false);
    require_input(status, "status");
    require_output(count, "count");
    const auto n = type->elements_in(status->sempi_bytes);
    *count = n < 0 ? MPI_UNDEFINED : static_cast<MPI_Count>(n);
  });
}

}  // extern "C"
