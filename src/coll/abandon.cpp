#include "coll/abandon.hpp"

#include <numeric>
#include <vector>

#include "core/runtime.hpp"

namespace sempi::detail::coll {

std::uint64_t& CollectiveCall::decisions() noexcept {
  thread_local std::uint64_t count = 0;
  return count;
}

void CollectiveCall::failed(ErrorClass cls, const std::string& what) const noexcept {
  // A schedule took the number: its own failure handling withdrew what it owed. A policy
  // error before that is the collective denial, which every member shares. A nested call
  // has decided already.
  if (cls == ErrorClass::policy || decisions() != decided_ ||
      comm_.collective_sequence.load(std::memory_order_relaxed) != sequence_) {
    return;
  }
  ++decisions();
  // WITHDRAWN carries a failure class; a peer refuses one without (protocol violation).
  if (cls == ErrorClass::success || cls == ErrorClass::pending) cls = ErrorClass::other;
  try {
    auto& engine = Runtime::get().engine();
    // Denied anyway (this rank failed its checks before the policy's): every member fails
    // alike, without the number.
    if (engine.collective_denied(comm_, kind_)) return;
    engine.collective_starting(comm_);
    const std::uint32_t sequence =
        comm_.collective_sequence.fetch_add(1, std::memory_order_relaxed);
    std::vector<int> everyone(static_cast<std::size_t>(comm_.size()));
    std::iota(everyone.begin(), everyone.end(), 0);
    const int me = comm_.world_ranks[static_cast<std::size_t>(comm_.rank)];
    engine.withdraw(comm_, kind_, sequence, everyone, cls,
                    "rank " + std::to_string(me) + " took no part: " + what);
  } catch (...) {
    // Out of memory, or no runtime: the others then wait for their timeout, as before.
  }
}

}  // namespace sempi::detail::coll
