#pragma once
/// \file
/// Handles to nonblocking operations.
///
/// Thread safety: different Requests may be used from different threads at once; one Request,
/// or two copies of it, must not be waited on or tested by two threads at the same time.

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <string>

#include "sempi/error.hpp"
#include "sempi/status.hpp"

namespace sempi {

/// What Request::wait() and test() (and the blocking calls built on them) throw when the
/// operation failed. status() is what is known of the operation: a truncated receive has
/// matched a message, so it names the sender, the tag and the bytes kept; after other failures
/// it is the empty status. Catch sempi::Error for the error class alone.
class RequestError : public Error {
 public:
  RequestError(const Status& status, const std::string& message)
      : Error(status.error, message), status_(status) {}
  [[nodiscard]] const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

namespace detail {
struct RequestState;
}

/// A nonblocking operation. Copies share it. When the last copy of an unfinished Request goes,
/// the operation stops using the buffers it was given before the destructor returns, so they
/// may be freed next:
///  - a receive that has not matched is cancelled; one whose data is arriving is waited for;
///  - a send goes on from a copy of its data taken then (as after MPI_Request_free);
///  - a collective: this rank's part is abandoned (its peers' calls fail, naming why), and the
///    destructor returns once nothing of the collective still uses the buffers (so it must not
///    be dropped from inside that collective's own reduction operation).
class [[nodiscard]] Request {
 public:
  Request() = default;  ///< the null request; wait() returns at once
  Request(const Request& other) noexcept;
  Request(Request&& other) noexcept = default;
  Request& operator=(const Request& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  ~Request();

  /// Blocks until the operation completes. Throws sempi::RequestError if it failed (e.g.
  /// truncation, a failed peer, policy denial). Waiting again returns the same status.
  Status wait();
  /// Returns the status if complete (throwing like wait() on failure), nullopt otherwise.
  std::optional<Status> test();
  /// Cancels a receive that has not matched yet; returns true if it was cancelled (wait() then
  /// reports Status::cancelled). Sends cannot be cancelled; returns false.
  bool cancel();
  [[nodiscard]] bool is_null() const noexcept { return !state_; }
  /// True if the operation is known to have completed (or failed), looked at without a round
  /// of engine progress: what progress elsewhere has found so far. The null request has.
  [[nodiscard]] bool completed() const noexcept;

  /// Waits for every request; statuses in the same order. Throws the first failure after all
  /// requests have completed.
  static std::vector<Status> wait_all(std::span<Request> requests);
  /// Waits until one non-null request completes and returns its index (it becomes null), or
  /// returns requests.size() if all are null.
  static std::size_t wait_any(std::span<Request> requests, Status* status = nullptr);

  /// Internal: wraps engine state.
  explicit Request(std::shared_ptr<detail::RequestState> state);
  [[nodiscard]] const std::shared_ptr<detail::RequestState>& state() const { return state_; }

 private:
  // This copy goes: the last one abandons an unfinished operation, on this thread. Copies are
  // counted in the state (RequestState::user_copies), not by its owners: the engine and
  // another thread's progress may hold the state a while longer.
  void release() noexcept;

  std::shared_ptr<detail::RequestState> state_;
};

}  // namespace sempi
