// Compiled into libsempi (see mpi.cmake): it needs the communicator factory of the runtime core.

#include "mpi/bridge.hpp"

#include "core/comm_factory.hpp"
#include "core/internal_tags.hpp"
#include "core/runtime.hpp"

namespace sempi::mpi_bridge {

Communicator create_from_members(const Communicator& parent, const std::vector<int>& members,
                                 const std::string& name, int tag) {
  if (parent.is_null()) throw Error(ErrorClass::comm, "create_from_members: null communicator");
  const auto& state = parent.state();
  std::vector<int> world_ranks;
  world_ranks.reserve(members.size());
  for (const int m : members) {
    if (m < 0 || m >= state->size()) {
      throw Error(ErrorClass::rank, "create_from_members: rank " + std::to_string(m) +
                                        " is not in the parent communicator");
    }
    world_ranks.push_back(state->world_ranks[static_cast<std::size_t>(m)]);
  }
  const int me = state->world_ranks[static_cast<std::size_t>(state->rank)];
  // A view of the members that shares the parent's contexts: the factory's exchange then runs
  // among the members alone, and the new context is above every member's used contexts.
  auto members_view =
      std::make_shared<const detail::CommState>(state->context, world_ranks, me, state->name());
  auto created = detail::split_communicator(detail::Runtime::get().engine(), members_view, 0,
                                            members_view->rank, name,
                                            detail::internal_tag::comm_create_group(tag));
  return Communicator(std::const_pointer_cast<detail::CommState>(created));
}

}  // namespace sempi::mpi_bridge
