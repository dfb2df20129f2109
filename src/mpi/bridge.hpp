#pragma once
// The one entry point the mpi.h layer needs below the public C++ API: a communicator created by
// a subset of a parent's members only (MPI_Comm_create_group). It is compiled into libsempi
// (bridge.cpp), where the communicator factory lives, and exported from it explicitly.

#include <string>
#include <vector>

#include "sempi/communicator.hpp"

namespace sempi::mpi_bridge {

/// A communicator of `parent`'s ranks `members` (in that order), created by a call from
/// exactly those ranks; the others are not involved. The members agree among themselves, over
/// the parent's collective context, on messages tagged after `tag` (MPI_Comm_create_group's),
/// so calls with different tags may run concurrently. Throws sempi::Error.
[[gnu::visibility("default")]] Communicator create_from_members(const Communicator& parent,
                                                                const std::vector<int>& members,
                                                                const std::string& name, int tag);

}  // namespace sempi::mpi_bridge
