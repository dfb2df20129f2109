#pragma once
// A collective operation as a schedule (after libNBC, Hoefler, Lumsdaine & Rehm 2007): rounds of
// nonblocking sends/receives followed by local steps (reductions, copies) that run once every
// transfer of the round has completed. Algorithms only *build* schedules, as if writing
// blocking code; the same schedule is then either run to completion (blocking collectives) or
// wrapped in a Request that wait()/test() advance (nonblocking collectives). No threads.
//
// Matching: every schedule takes the communicator's next collective sequence number (the same
// on every rank, since MPI requires the same call order), and its messages carry the tag
//   kCollectiveTagBit | (sequence mod 2^16) << 14 | (step mod 2^14)
// on the communicator's collective context, with the operation kind in the frame header. So
// concurrent collectives on one communicator never cross-match, and the tags can never collide
// with the runtime's own small internal tags (core/internal_tags.hpp). `step` is chosen by the
// algorithm so that sender and receiver agree on it; within one (pair, step) messages match in
// order (MPI's non-overtaking rule), which rounds preserve.
//
// Threading: a schedule is built by one thread and driven by one thread at a time: the
// Request's owner, or any application thread waiting on the engine meanwhile (a started
// schedule is in flight: Engine::add_in_flight; MPI's progress rule).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/collective_kind.hpp"
#include "core/comm_state.hpp"
#include "core/engine.hpp"
#include "core/internal_tags.hpp"
#include "core/request_state.hpp"
#include "sempi/error.hpp"

namespace sempi::detail::coll {

inline constexpr int kCollectiveTagBit = internal_tag::kScheduleBit;
inline constexpr int kSequenceBits = internal_tag::kScheduleSequenceBits;
inline constexpr int kStepBits = internal_tag::kScheduleStepBits;

/// The tag of a collective message (see above); always within 0..TAG_UB.
constexpr int collective_tag(std::uint32_t sequence, int step) {
  return kCollectiveTagBit |
         static_cast<int>((sequence & ((1u << kSequenceBits) - 1)) << kStepBits) |
         (step & ((1 << kStepBits) - 1));
}

/// How many schedules this thread has retired after a failure (retire_after_failure): a
/// caller's buffers for a collective that failed with transfers still running must outlive it.
std::uint64_t schedules_retired_by_this_thread() noexcept;

class Schedule : public std::enable_shared_from_this<Schedule> {
 public:
  /// Takes the communicator's next collective sequence number.
  Schedule(std::shared_ptr<const CommState> comm, OpKind kind, std::string operation);
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;
  /// One never run nor started withdraws this rank from its collective.
  ~Schedule();

  [[nodiscard]] int rank() const { return comm_->rank; }
  [[nodiscard]] int size() const { return comm_->size(); }
  [[nodiscard]] std::uint32_t sequence() const { return sequence_; }
  [[nodiscard]] const std::string& operation() const { return operation_; }

  // --- building ---
  /// Scratch memory owned by the schedule; the address is stable for its lifetime.
  std::byte* scratch(std::size_t bytes);
  /// Transfers of the current round (they run concurrently). `peer` is a communicator rank,
  /// never this rank (algorithms copy locally instead).
  void send(const void* buf, std::size_t bytes, int peer, int step);
  void recv(void* buf, std::size_t bytes, int peer, int step);
  /// A local step, run after the current round's transfers complete. A transfer added after a
  /// local step starts a new round.
  void local(std::function<void()> step);
  /// memcpy as a local step (no-op for zero bytes or identical pointers).
  void copy(void* dst, const void* src, std::size_t bytes);
  /// Ends the current round: later transfers wait for this round's to complete.
  void sync();

  // --- running ---
  /// Runs to completion on this thread. Throws sempi::Error if a transfer failed, or whatever
  /// a local step throws.
  void run();
  /// Starts the schedule and returns the collective request that Request::wait/test advance.
  std::shared_ptr<RequestState> start();

  /// Number of rounds (for tests).
  [[nodiscard]] std::size_t rounds() const { return rounds_.size(); }

 private:
  struct Transfer {
    bool is_send = false;
    void* buf = nullptr;
    std::size_t bytes = 0;
    int peer = 0;
    int tag = 0;
  };
  struct Round {
    std::vector<Transfer> transfers;
    std::vector<std::function<void()>> locals;
  };
  class Driver;

  Round& open_round_for_transfer();
  void post_round(std::size_t index);
  /// First failed request of the posted round, or null.
  [[nodiscard]] const RequestState* failure() const;
  /// After a failure with `cls`: withdraws this rank from the collective (Engine::withdraw,
  /// with `origin`: where the failure began), and keeps this schedule (its scratch buffers)
  /// alive: the engine may still write into them when the failed collective's receives that
  /// had matched complete, or send from them.
  void retire_after_failure(ErrorClass cls, const std::string& origin);
  /// After retire_after_failure: true once no transfer of the posted round is in flight. Its
  /// receives that had matched, and its sends, may still write into or read from the
  /// application's buffers until then, so the error must not reach the application before:
  /// it may free them. Those left are under way (retiring cancelled the receives not matched
  /// and, by withdrawing, the rendezvous sends without a CTS): each finishes, or fails with
  /// its peer, without waiting for the peer's next call.
  [[nodiscard]] bool quiet() const;
  /// Waits (driving progress) until quiet().
  void wait_until_quiet() const;
  /// The communicator ranks this schedule has transfers with, each once.
  [[nodiscard]] std::vector<int> peers() const;
  /// `origin` for a failure described by `detail` that began at this rank.
  [[nodiscard]] std::string failed_here(const std::string& detail) const;
  /// `origin` for a failed transfer.
  [[nodiscard]] std::string origin_of(const RequestState& failed) const;

  std::shared_ptr<const CommState> comm_;
  OpKind kind_;
  std::string operation_;
  std::uint32_t sequence_;
  std::vector<Round> rounds_;
  std::vector<std::unique_ptr<std::byte[]>> scratch_;
  std::vector<std::shared_ptr<RequestState>> posted_;  // the current round's requests
  bool retired_ = false;                               // retire_after_failure ran (it runs once)
  bool launched_ = false;                // run() or start() took it over (and with it its failures)
  std::size_t posted_round_ = SIZE_MAX;  // index of the last round posted (none yet: SIZE_MAX)
};

}  // namespace sempi::detail::coll
