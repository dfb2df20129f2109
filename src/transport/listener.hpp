#pragma once
// Where peers connect to a rank: a listening TCP socket (port 0: the OS chooses) and, for peers
// on this host, optionally a Unix socket. A Unix socket skips the TCP/IP stack (about half the
// kernel's cost per byte on loopback); TLS runs over either one unchanged. The Unix socket is
// made in the job's private directory (launch/job_socket_dir.hpp: mode 0700, so other users
// cannot even connect to it; the launcher removes it when the job ends) and is removed with the
// listener, after start-up; connections outlive it.
//
// Thread safety: accept() may be called from one thread at a time; shutdown() from any.

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

#include "transport/socket.hpp"

namespace sempi::transport {

class Listener {
 public:
  /// Binds and listens on `bind_to`; throws sempi::Error(io) with the OS reason on failure.
  /// With a `local_dir`, also listens on `local_dir`/rank-PID.sock, if that directory is ours
  /// alone (see local_path(); on failure, local_failure() says why and peers use TCP).
  explicit Listener(const Endpoint& bind_to, const std::filesystem::path& local_dir = {},
                    int backlog = 128);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// The bound address, with the port the OS chose.
  [[nodiscard]] const Endpoint& endpoint() const noexcept { return endpoint_; }
  /// The Unix socket's path, or empty.
  [[nodiscard]] const std::string& local_path() const noexcept { return local_path_; }
  [[nodiscard]] const std::string& local_failure() const noexcept { return local_failure_; }

  /// Accepts one connection (prepared: non-blocking, TCP_NODELAY for TCP), the Unix socket's
  /// first: only this user can reach it, so a flood of TCP connections cannot starve the ranks
  /// that come that way. A Unix peer must run as this user. Fails with errc::timeout at the
  /// deadline, with ECANCELED after shutdown().
  UniqueFd accept(Deadline deadline, std::error_code& ec);
  /// Stops listening; a blocked accept() returns with an error.
  void shutdown() noexcept;

 private:
  void listen_locally(const std::filesystem::path& dir, int backlog);

  UniqueFd fd_;
  Endpoint endpoint_;
  UniqueFd local_fd_;
  std::string local_path_;
  std::string local_failure_;
  std::atomic<bool> stopped_{false};
};

}  // namespace sempi::transport
