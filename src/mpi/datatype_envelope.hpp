#pragma once
// How each derived datatype was made, for MPI_Type_get_envelope / MPI_Type_get_contents (MPI
// 3.1 section 4.1.13): the combiner and the constructor's integer, address and datatype
// arguments, in the order the standard lists them.
//
// Envelopes live in a table keyed by handle rather than in sempi_mpi_datatype, whose size is
// part of the ABI (abi_guard.cpp). A handle without an entry is a predefined type (NAMED).
// Thread safety: any thread may record, look up or forget envelopes.

#include <memory>
#include <vector>

#include <mpi.h>

namespace sempi::mpi {

struct Envelope {
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int> integers;
  std::vector<MPI_Aint> addresses;
  /// The argument types, each kept alive (retain_type) while the envelope is: a program may
  /// free them and still decode the type made from them.
  std::vector<std::shared_ptr<sempi_mpi_datatype>> types;
};

/// Makes `envelope` the envelope of the new handle `type`.
void record_envelope(MPI_Datatype type, std::shared_ptr<const Envelope> envelope);
/// The envelope of `type`, or null for a predefined one.
std::shared_ptr<const Envelope> envelope_of(MPI_Datatype type);
/// Drops the entry of a handle that is being deleted (release_type).
void forget_envelope(MPI_Datatype type) noexcept;

}  // namespace sempi::mpi
