#pragma once
/// \file
/// Matched messages: what Communicator::mprobe / improbe take out of matching (MPI_Mprobe,
/// MPI 3.1 section 3.8.2).
///
/// A probe followed by a receive is racy when several threads receive on one communicator:
/// another thread's receive can take the probed message in between. A matched probe removes
/// the message from matching instead; only the Message handle it returns can receive it, once.
///
/// Thread safety: different Messages may be used from different threads at once; one Message
/// must not be received by two threads at the same time.

#include <cstddef>
#include <memory>
#include <utility>

#include "sempi/request.hpp"
#include "sempi/status.hpp"

namespace sempi {

namespace detail {
struct CommState;
struct MatchedMessage;
}  // namespace detail

class [[nodiscard]] Message {
 public:
  Message() = default;  ///< no message (MPI_MESSAGE_NULL)
  /// A message dropped without being received (its handle destroyed or assigned over) goes
  /// back to matching, where it arrived: a later receive or probe gets it, and its sender is
  /// not left waiting for an acknowledgement or a transfer that never comes. One handle owns
  /// a message: Messages move, they do not copy.
  ~Message();
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  Message(Message&& other) noexcept;
  Message& operator=(Message&& other) noexcept;
  /// The message of a probe for source PROC_NULL (MPI_MESSAGE_NO_PROC): receiving it completes
  /// at once with source PROC_NULL, tag ANY_TAG and no data.
  static Message no_proc();

  [[nodiscard]] bool is_null() const noexcept { return !matched_ && !no_proc_; }
  [[nodiscard]] bool is_no_proc() const noexcept { return no_proc_; }

  /// Starts receiving the message into `buf`; this handle becomes null. Throws sempi::Error
  /// (request) if it is null, (buffer) if `buf` is null with capacity. Failures of the transfer
  /// (truncate, peer_failed) come from Request::wait().
  Request irecv_bytes(void* buf, std::size_t capacity);
  /// irecv_bytes() and wait.
  Status recv_bytes(void* buf, std::size_t capacity);

  /// Internal: made by Communicator::mprobe / improbe.
  Message(std::shared_ptr<const detail::CommState> comm,
          std::shared_ptr<detail::MatchedMessage> matched)
      : comm_(std::move(comm)), matched_(std::move(matched)) {}

 private:
  void release() noexcept;  // drops this handle; restores an unreceived message (see above)

  std::shared_ptr<const detail::CommState> comm_;
  std::shared_ptr<detail::MatchedMessage> matched_;
  bool no_proc_ = false;
};

}  // namespace sempi
