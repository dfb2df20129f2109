#pragma once
// The state of one communicator: its group (communicator rank -> world rank) and context ids.
// The group and contexts are immutable after creation and may be read from any thread without
// locking; the name (guarded by name_mu) and the collective sequence (atomic) may change.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "sempi/constants.hpp"

namespace sempi::detail {

struct CommState {
  /// Point-to-point traffic uses `context`; collective traffic uses `context + 1`, so the two
  /// can never match each other.
  std::uint32_t context = 0;
  std::vector<int> world_ranks;  // index: rank in this communicator
  std::unordered_map<int, int> comm_rank_of_world;
  int rank = 0;  // this process's rank in the communicator

  /// Collectives on a communicator are called in the same order by all members, so a counter
  /// per communicator gives every collective call the same number on every rank; collective
  /// algorithms derive their tags from it so overlapping collectives never cross-match.
  mutable std::atomic<std::uint32_t> collective_sequence{0};

  [[nodiscard]] std::string name() const {
    std::lock_guard lock(name_mu_);
    return name_;
  }
  void set_name(std::string name) const {
    std::lock_guard lock(name_mu_);
    name_ = std::move(name);
  }

  CommState(std::uint32_t ctx, std::vector<int> members, int my_world_rank, std::string comm_name)
      : context(ctx), world_ranks(std::move(members)), name_(std::move(comm_name)) {
    for (int i = 0; i < static_cast<int>(world_ranks.size()); ++i) {
      comm_rank_of_world[world_ranks[static_cast<std::size_t>(i)]] = i;
    }
    rank = comm_rank_of_world.at(my_world_rank);
  }

  [[nodiscard]] int size() const { return static_cast<int>(world_ranks.size()); }
  [[nodiscard]] std::uint32_t collective_context() const { return context + 1; }
  /// World rank of communicator rank `source`; ANY_SOURCE stays ANY_SOURCE.
  [[nodiscard]] int world_source(int source) const {
    return source == ANY_SOURCE ? ANY_SOURCE : world_ranks[static_cast<std::size_t>(source)];
  }
  /// Communicator rank of a world rank, or -1 if it is not a member.
  [[nodiscard]] int comm_rank(int world) const {
    const auto it = comm_rank_of_world.find(world);
    return it == comm_rank_of_world.end() ? -1 : it->second;
  }

 private:
  mutable std::mutex name_mu_;
  mutable std::string name_;
};

}  // namespace sempi::detail
