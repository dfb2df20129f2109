#include "transport/listener.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sempi/error.hpp"

namespace sempi::transport {

Listener::Listener(const Endpoint& bind_to, bool local, int backlog) : endpoint_(bind_to) {
  fd_.reset(::socket(bind_to.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const auto fail = [&](const char* what) {
    throw Error(ErrorClass::io, std::string(what) + " " + format_endpoint(bind_to) + ": " +
                                    std::strerror(errno));
  };
  if (!fd_.valid()) fail("cannot create socket for");
  const int one = 1;
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_.get(), bind_to.data(), static_cast<socklen_t>(bind_to.size())) < 0) {
    fail("cannot bind");
  }
  if (::listen(fd_.get(), backlog) < 0) fail("cannot listen on");
  socklen_t len = static_cast<socklen_t>(endpoint_.capacity());
  if (::getsockname(fd_.get(), endpoint_.data(), &len) < 0) fail("getsockname failed for");
  endpoint_.resize(len);
  if (local) listen_locally(backlog);
}

void Listener::listen_locally(int backlog) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = (tmp != nullptr && *tmp == '/' ? std::string(tmp) : std::string("/tmp")) +
                    "/sempi-XXXXXX";
  const auto give_up = [&](const char* what) {
    local_failure_ = std::string("cannot ") + what + " in " + dir + ": " + std::strerror(errno);
  };
  if (::mkdtemp(dir.data()) == nullptr) return give_up("create a private directory");  // 0700
  local_dir_ = dir;
  const std::string path = dir + "/rank.sock";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    errno = ENAMETOOLONG;
    return give_up("place a socket");
  }
  path.copy(address.sun_path, path.size());
  local_fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!local_fd_.valid() ||
      ::bind(local_fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0) {
    local_fd_.reset();
    return give_up("bind a Unix socket");
  }
  local_path_ = path;
  if (::listen(local_fd_.get(), backlog) < 0) {
    local_fd_.reset();
    local_path_.clear();
    give_up("listen on a Unix socket");
  }
}

Listener::~Listener() {
  local_fd_.reset();
  if (!local_dir_.empty()) {
    ::unlink((local_dir_ + "/rank.sock").c_str());
    ::rmdir(local_dir_.c_str());
  }
}

void Listener::shutdown() noexcept {
  ::shutdown(fd_.get(), SHUT_RDWR);
  if (local_fd_.valid()) ::shutdown(local_fd_.get(), SHUT_RDWR);
}

UniqueFd Listener::accept(Deadline deadline, std::error_code& ec) {
  std::vector<int> sockets = {fd_.get()};
  if (local_fd_.valid()) sockets.push_back(local_fd_.get());
  for (;;) {
    for (const int listening : sockets) {
      UniqueFd fd{::accept4(listening, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
      if (fd.valid()) {
        ec = prepare_stream_socket(fd.get());
        return ec ? UniqueFd{} : std::move(fd);
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ec = {errno, std::system_category()};
        return {};
      }
    }
    // Both are empty: wait for either (a shut-down socket wakes this and fails its accept).
    pollfd polled[2] = {{sockets[0], POLLIN, 0}, {sockets.size() > 1 ? sockets[1] : -1, POLLIN, 0}};
    const auto now = Clock::now();
    if (now >= deadline) {
      ec = errc::timeout;
      return {};
    }
    const auto wait_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    if (::poll(polled, 2, static_cast<int>(std::min<long long>(wait_ms, 60'000))) < 0 &&
        errno != EINTR) {
      ec = {errno, std::system_category()};
      return {};
    }
  }
}

}  // namespace sempi::transport
