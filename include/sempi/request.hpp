#pragma once
/// \file
/// Handles to nonblocking operations.
///
/// Thread safety: different Requests may be used from different threads at once; one Request
/// must not be waited on by two threads at the same time.

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

/// A nonblocking operation. Copies share it. Dropping the last copy of an unfinished
/// collective's Request abandons this rank's part (its peers' calls fail, naming why), and the
/// destructor returns only once nothing of the collective still uses the buffers it was given
/// (so it must not be dropped from inside that collective's own reduction operation).
class [[nodiscard]] Request {
 public:
  Request() = default;  ///< the null request; wait() returns at once

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
  std::shared_ptr<detail::RequestState> state_;
  // A nonblocking collective's, shared by the copies of this Request: when the last copy goes,
  // on that thread, an unfinished collective is abandoned, and the destructor returns once
  // nothing of it touches the application's buffers. Not tied to state_'s lifetime: another
  // thread's progress may hold the state a while longer.
  std::shared_ptr<void> abandon_on_last_copy_;
};

}  // namespace sempi
