#pragma once
// The one entry point the mpi.h layer needs below the public C++ API: a communicator created by
// a subset of a parent's members only (MPI_Comm_create_group). It is compiled into libsempi
// (bridge.cpp), where the communicator factory lives, and exported from it explicitly.

#include <string>
#include <vector>

#include "sempi/communicator.hpp"

namespace sempi::mpi_bridge {

/// A communicator of `parent`'s ranks `members` (in that order), created by a call from
/// exactly those ranks; the others are not involved. The new context is agreed among the
/// members only, over the parent's collective context. Throws sempi::Error.
[[gnu::visibility("default")]] Communicator create_from_members(const Communicator& parent,
                                                                const std::vector<int>& members,
                                                                const std::string& name);

}  // namespace sempi::mpi_bridge
