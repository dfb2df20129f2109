#pragma once
// Thin POSIX socket helpers with deadlines. Sockets are non-blocking; every wait is bounded.

#include <sys/un.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include <asio/ip/tcp.hpp>

namespace sempi::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
using Endpoint = asio::ip::tcp::endpoint;

/// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept;
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

enum class WaitFor { read, write };

/// Waits until `fd` is ready or the deadline passes (errc::timeout). Retries on EINTR.
std::error_code wait_fd(int fd, WaitFor what, Deadline deadline);

/// Non-blocking TCP connect with TCP_NODELAY; bounded by the deadline.
UniqueFd tcp_connect(const Endpoint& to, Deadline deadline, std::error_code& ec);
/// Non-blocking connect to the Unix stream socket at `path`, which must be a socket file of
/// this user (not a symbolic link) with a listener running as this user (EACCES otherwise);
/// bounded by the deadline, until which a full listen backlog is waited out (errc::timeout).
UniqueFd unix_connect(const std::string& path, Deadline deadline, std::error_code& ec);
/// The address of the Unix socket at `path`; false if the path is empty or too long for one.
bool unix_address(const std::string& path, sockaddr_un& address);
/// True if `fd` is a Unix-domain socket (a peer on this host), false for TCP.
bool is_unix_socket(int fd);
/// True if the process at the other end of Unix socket `fd` runs as this process's user.
bool same_user_peer(int fd);
/// Sends one byte over Unix socket `socket` with descriptor `fd` attached (SCM_RIGHTS), or
/// with none if `fd` is negative. false with errno set unless the byte went out.
bool send_byte_with_descriptor(int socket, std::uint8_t byte, int fd);
/// Receives one byte without waiting, and the descriptors that came with it (closed on
/// destruction unless kept). false with errno set (0 at the peer's close) if no byte came.
/// `truncated`: more descriptors came than fit (4); those are lost.
bool receive_byte_with_descriptors(int socket, std::uint8_t& byte, std::vector<UniqueFd>& fds,
                                   bool& truncated);
/// Names this host as peers must match it to use a Unix socket: the kernel's boot id and the
/// network namespace (ranks in different namespaces stand for different hosts, as in tests and
/// simulated clusters). Empty if unknown: then only TCP is used.
std::string local_host_identity();

// SO_SNDBUF asked for on Unix-socket channels; the kernel doubles it, up to wmem_max.
inline constexpr int kUnixSendBufferRequest = 256 * 1024;
/// Raises the send buffer of Unix socket `fd` to kUnixSendBufferRequest (never lowers it);
/// best effort.
void raise_unix_send_buffer(int fd);

// TCP keepalive on every rank connection: a silent peer is declared lost after
// idle + probes * interval seconds (40 s) without an answer.
inline constexpr int kKeepaliveIdleSeconds = 20;
inline constexpr int kKeepaliveIntervalSeconds = 5;
inline constexpr int kKeepaliveProbes = 4;
// Keepalive only runs while nothing is in flight: data sent just before the peer's host
// vanished would instead be retransmitted for ~15 minutes (tcp_retries2). TCP_USER_TIMEOUT
// would bound that, but it also ends a connection whose receiver merely stops reading for a
// while (zero-window probing counts against it), which backpressure does on purpose. So the
// engine asks the kernel instead: data that has waited this long without any acknowledgement
// from the peer's host (which acknowledges even when its rank is busy) means the host is gone.
inline constexpr unsigned kUnacknowledgedLimitMs =
    (kKeepaliveIdleSeconds + kKeepaliveProbes * kKeepaliveIntervalSeconds) * 1000;

/// True if `fd` has sent data that nothing has acknowledged for kUnacknowledgedLimitMs.
bool unacknowledged_too_long(int fd);

/// Sets O_NONBLOCK and FD_CLOEXEC on a connected socket; for TCP also TCP_NODELAY and
/// keepalive (a Unix socket learns of its peer's death from the kernel at once), for a Unix
/// socket a larger send buffer (raise_unix_send_buffer).
std::error_code prepare_stream_socket(int fd);

/// Parses "host:port" (IPv4 dotted quad or [IPv6]); throws sempi::Error(config).
Endpoint parse_endpoint(const std::string& text);
std::string format_endpoint(const Endpoint& endpoint);

}  // namespace sempi::transport
