#pragma once
// Communicator creation (dup and split): every member of the parent learns every member's
// (color, key), so all agree on the groups, and the parent's rank 0 hands out a context id from
// its own share of the id space (Engine::allocate_context), which no other creation can use.

#include <memory>
#include <string>

#include "core/comm_state.hpp"
#include "core/internal_tags.hpp"
#include "core/engine.hpp"

namespace sempi::detail {

/// Collective over `parent`. Returns null for color == UNDEFINED. Throws sempi::Error if a
/// member fails meanwhile. `name` is the new communicator's initial name. `exchange_tag` (an
/// internal tag, core/internal_tags.hpp) separates creations that may run concurrently on the
/// same parent's context (MPI_Comm_create_group's tag).
std::shared_ptr<const CommState> split_communicator(
    Engine& engine, const std::shared_ptr<const CommState>& parent, int color, int key,
    const std::string& name, int exchange_tag = internal_tag::kCommCreate);

}  // namespace sempi::detail
