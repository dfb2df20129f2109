#include "transport/socket.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "sempi/error.hpp"

namespace sempi::transport {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

UniqueFd::~UniqueFd() { reset(); }

int UniqueFd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::error_code wait_fd(int fd, WaitFor what, Deadline deadline) {
  pollfd p{fd, static_cast<short>(what == WaitFor::read ? POLLIN : POLLOUT), 0};
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) return errc::timeout;
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(remaining, 60'000)));
    if (rc > 0) return {};  // readable, writable, or HUP/ERR: the next I/O call reports which
    if (rc < 0 && errno != EINTR) return {errno, std::system_category()};
  }
}

void raise_unix_send_buffer(int fd) {
  // A Unix socket's send buffer bounds the bytes in flight. The kernel's default is 208 KiB; it
  // doubles the value asked for, capped at net.core.wmem_max (416 KiB under the stock 208 KiB
  // cap). Half of a 1 MiB allreduce then fits at once, so a rank seals its whole half before it
  // waits for a reader that may share its core (bench/RESULTS.md, seventh session). Only raised,
  // never lowered below a host's own default; only the bytes actually queued use memory. A
  // performance hint: a channel works with any buffer, so a refusal is not an error.
  int current = 0;
  socklen_t length = sizeof current;
  if (::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &current, &length) == 0 &&
      current >= 2 * kUnixSendBufferRequest) {
    return;
  }
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kUnixSendBufferRequest,
                     sizeof kUnixSendBufferRequest);
}

std::error_code prepare_stream_socket(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
      ::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
    return {errno, std::system_category()};
  }
  if (is_unix_socket(fd)) {
    raise_unix_send_buffer(fd);
    return {};
  }
  // Latency matters more than packet count for MPI traffic; the channel coalesces itself.
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
    return {errno, std::system_category()};
  }
  // A peer host that vanishes (power loss, a partition) sends nothing, not even a reset: idle
  // connections probe it, so that the ranks waiting on it learn of the loss instead of waiting
  // for the job's timeout. The probes are answered by the peer's kernel, so a rank busy
  // computing for hours is never mistaken for a dead one.
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) < 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepaliveIdleSeconds,
                   sizeof kKeepaliveIdleSeconds) < 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepaliveIntervalSeconds,
                   sizeof kKeepaliveIntervalSeconds) < 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepaliveProbes, sizeof kKeepaliveProbes) < 0) {
    return {errno, std::system_category()};
  }
  return {};
}

bool unacknowledged_too_long(int fd) {
  tcp_info info{};
  socklen_t length = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return false;
  // tcpi_unacked: segments in flight. A receiver that stops reading closes its window instead:
  // then nothing is in flight, and its kernel answers the window probes.
  // tcpi_last_ack_recv alone is not enough: data segments that acknowledge nothing new do not
  // refresh it, so a rank that only received for 40 s and then sends one frame shows a stale
  // time until that frame's acknowledgement returns. Three retransmission timeouts in a row
  // (both counters are reset by an acknowledgement; over a second at the least) say the data
  // really goes unanswered, not that one segment was lost.
  return info.tcpi_unacked > 0 && info.tcpi_last_ack_recv >= kUnacknowledgedLimitMs &&
         (info.tcpi_retransmits >= 3 || info.tcpi_backoff >= 3);
}

namespace {

// Connects `fd` (non-blocking, prepared) to `address`, waiting at most until the deadline.
UniqueFd finish_connect(UniqueFd fd, const sockaddr* address, socklen_t length, Deadline deadline,
                        std::error_code& ec) {
  if (ec = prepare_stream_socket(fd.get()); ec) return {};
  if (::connect(fd.get(), address, length) < 0) {
    // (A Unix socket connects at once, or fails: EAGAIN when its listen backlog is full.)
    if (errno != EINPROGRESS && errno != EINTR) {
      ec = {errno, std::system_category()};
      return {};
    }
    if (ec = wait_fd(fd.get(), WaitFor::write, deadline); ec) return {};
    int error = 0;
    socklen_t len = sizeof error;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len) < 0) error = errno;
    if (error != 0) {
      ec = {error, std::system_category()};
      return {};
    }
  }
  ec.clear();
  return fd;
}

}  // namespace

UniqueFd tcp_connect(const Endpoint& to, Deadline deadline, std::error_code& ec) {
  UniqueFd fd{::socket(to.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (!fd.valid()) {
    ec = {errno, std::system_category()};
    return {};
  }
  return finish_connect(std::move(fd), to.data(), static_cast<socklen_t>(to.size()), deadline, ec);
}

bool unix_address(const std::string& path, sockaddr_un& address) {
  address = {};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) return false;
  path.copy(address.sun_path, path.size());
  return true;
}

UniqueFd unix_connect(const std::string& path, Deadline deadline, std::error_code& ec) {
  sockaddr_un address;
  if (!unix_address(path, address)) {
    ec = std::make_error_code(std::errc::filename_too_long);
    return {};
  }
  // A socket file itself, of this user: not a link that connect() would follow elsewhere.
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    ec = {errno, std::system_category()};
    return {};
  }
  if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid()) {
    ec = std::make_error_code(std::errc::permission_denied);
    return {};
  }
  // A full listen backlog (EAGAIN: many local ranks dialing one at once) is waited out, not
  // taken for an unreachable socket: the caller would fall back to TCP, and the pair would do
  // without its shared rings for the whole job.
  constexpr auto kLongestPause = std::chrono::milliseconds(50);
  auto pause = std::chrono::milliseconds(1);
  UniqueFd fd;
  for (;;) {
    fd = UniqueFd{::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
    if (!fd.valid()) {
      ec = {errno, std::system_category()};
      return {};
    }
    fd = finish_connect(std::move(fd), reinterpret_cast<const sockaddr*>(&address),
                        static_cast<socklen_t>(sizeof address), deadline, ec);
    if (fd.valid() || ec != std::errc::resource_unavailable_try_again) break;
    if (Clock::now() + pause >= deadline) {
      ec = errc::timeout;
      return {};
    }
    std::this_thread::sleep_for(pause);  // not synchronisation: the listener is behind
    pause = std::min(pause * 2, kLongestPause);
  }
  if (fd.valid() && !same_user_peer(fd.get())) {
    ec = std::make_error_code(std::errc::permission_denied);  // not a socket of ours
    return {};
  }
  return fd;
}

bool same_user_peer(int fd) {
  ucred peer{};
  socklen_t length = sizeof peer;
  return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0 &&
         length == sizeof peer && peer.uid == ::geteuid();
}

bool is_unix_socket(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         address.ss_family == AF_UNIX;
}

bool send_byte_with_descriptor(int socket, std::uint8_t byte, int fd) {
  iovec data{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(rights), &fd, sizeof(int));
  }
  ssize_t sent = 0;
  do {
    sent = ::sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent == 0) errno = EAGAIN;
  return sent == 1;
}

bool receive_byte_with_descriptors(int socket, std::uint8_t& byte, std::vector<UniqueFd>& fds,
                                   bool& truncated) {
  iovec data{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t got = 0;
  do {
    got = ::recvmsg(socket, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); got > 0 && c != nullptr;
       c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
    }
  }
  truncated = got > 0 && (message.msg_flags & MSG_CTRUNC) != 0;
  if (got == 0) errno = 0;
  return got == 1;
}

std::string local_host_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char net[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/net", net, sizeof net - 1);
  if (boot_id.empty() || n <= 0) return {};
  return boot_id + "/" + std::string(net, static_cast<std::size_t>(n));
}

Endpoint parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw Error(ErrorClass::config, "invalid address '" + text + "': expected HOST:PORT");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  asio::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw Error(ErrorClass::config, "invalid IP address '" + host + "' in '" + text + "'");
  unsigned long port = 0;
  try {
    std::size_t used = 0;
    port = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    throw Error(ErrorClass::config, "invalid port in '" + text + "'");
  }
  return {address, static_cast<unsigned short>(port)};
}

std::string format_endpoint(const Endpoint& endpoint) {
  const auto address = endpoint.address();
  const std::string host =
      address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

}  // namespace sempi::transport
