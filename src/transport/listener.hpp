#pragma once
// Where peers connect to a rank: a listening TCP socket (port 0: the OS chooses) and, for peers
// on this host, optionally a Unix socket. A Unix socket skips the TCP/IP stack (about half the
// kernel's cost per byte on loopback); TLS runs over either one unchanged. The Unix socket lives
// in a new directory of mode 0700, so other users cannot even connect to it, and is removed
// with the listener (after start-up; connections outlive it).
//
// Thread safety: accept() may be called from one thread at a time; shutdown() from any.

#include <string>
#include <system_error>

#include "transport/socket.hpp"

namespace sempi::transport {

class Listener {
 public:
  /// Binds and listens on `bind_to`; throws sempi::Error(io) with the OS reason on failure.
  /// With `local`, also listens on a Unix socket (see local_path(); empty if none could be
  /// made, e.g. no writable temporary directory: peers then use TCP).
  explicit Listener(const Endpoint& bind_to, bool local = false, int backlog = 128);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// The bound address, with the port the OS chose.
  [[nodiscard]] const Endpoint& endpoint() const noexcept { return endpoint_; }
  /// The Unix socket's path, or empty (local_failure() then says why, if one was asked for).
  [[nodiscard]] const std::string& local_path() const noexcept { return local_path_; }
  [[nodiscard]] const std::string& local_failure() const noexcept { return local_failure_; }
  [[nodiscard]] int native_handle() const noexcept { return fd_.get(); }

  /// Accepts one connection on either socket (prepared: non-blocking, TCP_NODELAY for TCP) or
  /// fails with errc::timeout, or with the socket's error after shutdown().
  UniqueFd accept(Deadline deadline, std::error_code& ec);
  /// Stops listening; a blocked accept() returns with an error.
  void shutdown() noexcept;

 private:
  void listen_locally(int backlog);

  UniqueFd fd_;
  Endpoint endpoint_;
  UniqueFd local_fd_;
  std::string local_dir_;
  std::string local_path_;
  std::string local_failure_;
};

}  // namespace sempi::transport
