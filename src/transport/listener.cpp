#include "transport/listener.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "sempi/error.hpp"

namespace sempi::transport {

Listener::Listener(const Endpoint& bind_to, int backlog) : endpoint_(bind_to) {
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
}

UniqueFd Listener::accept(Deadline deadline, std::error_code& ec) {
  for (;;) {
    UniqueFd fd{::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
    if (fd.valid()) {
      ec = prepare_stream_socket(fd.get());
      return ec ? UniqueFd{} : std::move(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = {errno, std::system_category()};
      return {};
    }
    if (ec = wait_fd(fd_.get(), WaitFor::read, deadline); ec) return {};
  }
}

}  // namespace sempi::transport
