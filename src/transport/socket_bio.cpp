#include "transport/socket_bio.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace sempi::transport {
namespace {

SocketBuffers& state_of(BIO* bio) { return *static_cast<SocketBuffers*>(BIO_get_data(bio)); }

bool is_retryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

int socket_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  SocketBuffers& s = state_of(bio);
  const auto bytes = static_cast<std::size_t>(size);
  bool lost = false;
  std::uint8_t* space = s.reserve_draining(bytes, lost);
  if (lost) return -1;
  if (space == nullptr) {  // a handshake record never exceeds the buffer: only a full socket
    BIO_set_retry_write(bio);
    return -1;
  }
  std::memcpy(space, data, bytes);
  s.commit(bytes);
  return s.send_if_full() ? size : -1;
}

int socket_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  SocketBuffers& s = state_of(bio);
  if (s.unread() == 0) {
    const long n = s.receive(1);
    if (n <= 0) {  // 0: orderly shutdown by the peer
      if (n < 0 && is_retryable(errno)) BIO_set_retry_read(bio);
      return static_cast<int>(n);
    }
  }
  const std::size_t count = std::min(s.unread(), static_cast<std::size_t>(size));
  std::memcpy(data, s.unread_data(), count);
  s.consume(count);
  return static_cast<int>(count);
}

long socket_ctrl(BIO* bio, int cmd, long, void*) {
  SocketBuffers& s = state_of(bio);
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      BIO_clear_retry_flags(bio);
      if (!s.drain()) return 0;
      if (s.unsent() > 0) {
        BIO_set_retry_write(bio);
        return 0;
      }
      return 1;
    case BIO_CTRL_WPENDING:
      return static_cast<long>(s.unsent());
    case BIO_CTRL_PENDING:
      return static_cast<long>(s.unread());
    default:
      return 0;
  }
}

int socket_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int socket_destroy(BIO* bio) {
  delete static_cast<SocketBuffers*>(BIO_get_data(bio));
  BIO_set_data(bio, nullptr);
  return 1;
}

const BIO_METHOD* socket_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sempi socket");
    BIO_meth_set_write(m, socket_write);
    BIO_meth_set_read(m, socket_read);
    BIO_meth_set_ctrl(m, socket_ctrl);
    BIO_meth_set_create(m, socket_create);
    BIO_meth_set_destroy(m, socket_destroy);
    return m;
  }();
  return method;
}

}  // namespace

BIO* new_socket_bio(int fd) {
  auto state = std::make_unique<SocketBuffers>(fd);
  BIO* bio = BIO_new(socket_method());
  if (bio != nullptr) BIO_set_data(bio, state.release());
  return bio;
}

SocketBuffers& socket_bio_buffers(BIO* bio) { return state_of(bio); }

}  // namespace sempi::transport
