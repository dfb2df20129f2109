#pragma once
// A collective call that fails on one rank before its schedule exists (its own arguments did
// not validate: a null buffer at the root, a bad datatype, a negative count) must not leave the
// other members waiting for the job's timeout, nor leave this rank's collective sequence
// number one behind theirs, which would make its next collective match the wrong messages.
// So the failing rank takes the sequence number anyway and withdraws from the collective, to
// every other member (Engine::withdraw): their receives from it and sends to it in that
// collective fail at once with its error, and their failed parts withdraw in turn, as after
// any failed collective.
//
// Not for a policy denial of the collective (Engine::collective_denied): that is the same on
// every member, so every member fails alike without taking the sequence number.

#include <cstdint>
#include <string>

#include "core/collective_kind.hpp"
#include "core/comm_state.hpp"
#include "sempi/error.hpp"

namespace sempi::detail::coll {

/// One call of a collective on `comm`, made before any of its checks: remembers the
/// communicator's sequence number, so that a failure can tell whether the collective began.
/// Calls nest (the mpi.h layer's around the C++ API's): a failure is decided once, by the
/// innermost.
class CollectiveCall {
 public:
  CollectiveCall(const CommState& comm, OpKind kind) noexcept
      : comm_(comm),
        kind_(kind),
        sequence_(comm.collective_sequence.load(std::memory_order_relaxed)),
        decided_(decisions()) {}

  /// The call failed with `cls` and `what` (call from its catch block). If the collective had
  /// not taken its sequence number, abandons it (see above). Never throws: the caller
  /// rethrows its own error.
  void failed(ErrorClass cls, const std::string& what) const noexcept;

 private:
  // How many failures this thread's calls have decided on (a call nested in this one may have).
  static std::uint64_t& decisions() noexcept;

  const CommState& comm_;
  OpKind kind_;
  std::uint32_t sequence_;
  std::uint64_t decided_;
};

}  // namespace sempi::detail::coll
