#include "transport/listener.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "sempi/error.hpp"

namespace sempi::transport {
namespace {

// How long accept() waits before trying again when descriptors or memory run out.
constexpr auto kResourcePause = std::chrono::milliseconds(10);

}  // namespace

Listener::Listener(const Endpoint& bind_to, const std::filesystem::path& local_dir, int backlog)
    : endpoint_(bind_to) {
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
  if (!local_dir.empty()) listen_locally(local_dir, backlog);
}

void Listener::listen_locally(const std::filesystem::path& dir, int backlog) {
  const std::string path = (dir / ("rank-" + std::to_string(::getpid()) + ".sock")).string();
  const auto give_up = [&](const std::string& why) { local_failure_ = path + ": " + why; };
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return give_up(std::strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    return give_up("the directory is not a private (0700) directory of this user");
  }
  sockaddr_un address;
  if (!unix_address(path, address)) return give_up("path too long for a socket");
  UniqueFd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (!fd.valid()) return give_up(std::strerror(errno));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) < 0) {
    return give_up(std::strerror(errno));
  }
  if (::listen(fd.get(), backlog) < 0) {
    give_up(std::strerror(errno));
    ::unlink(path.c_str());
    return;
  }
  local_fd_ = std::move(fd);
  local_path_ = path;
}

Listener::~Listener() {
  if (!local_path_.empty()) ::unlink(local_path_.c_str());
}

void Listener::shutdown() noexcept {
  stopped_ = true;
  ::shutdown(fd_.get(), SHUT_RDWR);
  if (local_fd_.valid()) ::shutdown(local_fd_.get(), SHUT_RDWR);
}

UniqueFd Listener::accept(Deadline deadline, std::error_code& ec) {
  std::error_code shortage;  // the last time accept4 found no descriptor or memory
  for (;;) {
    // A shut-down Unix socket keeps reporting EAGAIN: the flag, not its accept(), ends this.
    if (stopped_) {
      ec = std::make_error_code(std::errc::operation_canceled);
      return {};
    }
    for (const int listening : {local_fd_.get(), fd_.get()}) {
      if (listening < 0) continue;
      UniqueFd fd{::accept4(listening, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
      if (fd.valid()) {
        if (listening == local_fd_.get() && !same_user_peer(fd.get())) continue;  // root's only
        ec = prepare_stream_socket(fd.get());
        return ec ? UniqueFd{} : std::move(fd);
      }
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EWOULDBLOCK) {
        continue;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory for now (handshakes in flight hold several each): the
        // connection waits in the backlog until some are released. Not a reason to stop; if
        // the deadline comes first, this is why.
        shortage = {errno, std::system_category()};
        const auto left = deadline - Clock::now();
        if (left > Clock::duration::zero()) {
          std::this_thread::sleep_for(std::min<Clock::duration>(kResourcePause, left));
        }
        continue;  // not synchronisation: waiting for a scarce resource
      }
      if (stopped_) break;
      ec = {errno, std::system_category()};
      return {};
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      ec = shortage ? shortage : make_error_code(errc::timeout);
      return {};
    }
    pollfd polled[2] = {{fd_.get(), POLLIN, 0}, {local_fd_.get(), POLLIN, 0}};  // -1: ignored
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
