#pragma once
// Communicator creation (dup and split): every member of the parent learns every member's
// (color, key, next free context id), so all agree on the groups and on a context id that no
// member has used yet.

#include <memory>
#include <string>

#include "core/comm_state.hpp"
#include "core/engine.hpp"

namespace sempi::detail {

/// Collective over `parent`. Returns null for color == UNDEFINED. Throws sempi::Error if a
/// member fails meanwhile. `name` is the new communicator's initial name.
std::shared_ptr<const CommState> split_communicator(Engine& engine,
                                                    const std::shared_ptr<const CommState>& parent,
                                                    int color, int key, const std::string& name);

}  // namespace sempi::detail
