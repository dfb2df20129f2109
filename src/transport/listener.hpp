#pragma once
// A listening TCP socket for incoming rank connections. Binding port 0 lets the OS choose.
//
// Thread safety: accept() may be called from one thread at a time.

#include <system_error>

#include "transport/socket.hpp"

namespace sempi::transport {

class Listener {
 public:
  /// Binds and listens; throws sempi::Error(io) with the OS reason on failure.
  explicit Listener(const Endpoint& bind_to, int backlog = 128);

  /// The bound address, with the port the OS chose.
  [[nodiscard]] const Endpoint& endpoint() const noexcept { return endpoint_; }
  [[nodiscard]] int native_handle() const noexcept { return fd_.get(); }

  /// Accepts one connection (prepared: non-blocking, TCP_NODELAY) or fails with errc::timeout.
  UniqueFd accept(Deadline deadline, std::error_code& ec);

 private:
  UniqueFd fd_;
  Endpoint endpoint_;
};

}  // namespace sempi::transport
