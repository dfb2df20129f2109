// Filling in a status (MPI 3.1 section 13.3, generalized requests and layered libraries):
// MPI_Status_set_elements(_x) and MPI_Status_set_cancelled, so that MPI_Get_count,
// MPI_Get_elements and MPI_Test_cancelled report what a library that completes an operation
// itself wants them to.

#include <algorithm>

#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {
namespace {

// Bytes of the first `elements` basic elements of instances of `type` laid end to end: what
// status->sempi_bytes must be for MPI_Get_elements to give `elements` back.
std::int64_t bytes_of_elements(const TypeMap& type, std::int64_t elements) {
  const std::int64_t per_instance = type.elements();
  if (per_instance == 0) {
    if (elements != 0) fail(MPI_ERR_ARG, "the datatype has no elements");
    return 0;
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(elements / per_instance, type.size, &bytes)) {
    fail(MPI_ERR_COUNT, std::to_string(elements) + " elements do not fit in 64 bits of bytes");
  }
  std::int64_t rest = elements % per_instance;
  for (const auto& r : type.runs) {  // less than one instance: no overflow from here on
    if (rest == 0) break;
    const std::int64_t n = std::min(rest, r.count);
    bytes += n * r.size;
    rest -= n;
  }
  return bytes;
}

int set_elements(const char* function, MPI_Status* status, MPI_Datatype datatype,
                 MPI_Count count) {
  return guarded(MPI_COMM_WORLD, function, [&] {
    if (count < 0) fail(MPI_ERR_COUNT, "negative count " + std::to_string(count));
    const auto& type = type_of(datatype, false);
    // ROMIO sets the elements of MPI_STATUS_IGNORE; Open MPI and MPICH accept that quietly
    // (after checking the other arguments, as here).
    if (status == MPI_STATUS_IGNORE) return;
    status->sempi_bytes = static_cast<MPI_Count>(bytes_of_elements(*type, count));
  });
}

}  // namespace
}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count) {
  return set_elements("MPI_Status_set_elements", status, datatype, count);
}

int MPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  return set_elements("MPI_Status_set_elements_x", status, datatype, count);
}

int MPI_Status_set_cancelled(MPI_Status* status, int flag) {
  return guarded(MPI_COMM_WORLD, "MPI_Status_set_cancelled", [&] {
    require_output(status, "status");
    status->sempi_cancelled = flag != 0 ? 1 : 0;
  });
}

}  // extern "C"
