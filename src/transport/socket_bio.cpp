#include "transport/socket_bio.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

namespace sempi::transport {
namespace {

// TLS records gathered before a send() is attempted without waiting for a flush: a few
// maximum-size records per system call.
constexpr std::size_t kSendAt = 64 * 1024;
// Most bytes held; a record that does not fit waits (retry) until the socket drains some.
constexpr std::size_t kCapacity = 256 * 1024;
// Bytes taken from the socket per recv(): several maximum-size records.
constexpr std::size_t kReadCapacity = 128 * 1024;

struct SocketBio {
  int fd = -1;
  std::unique_ptr<std::uint8_t[]> out;  // allocated at the first write
  std::size_t begin = 0;                // first byte not yet sent
  std::size_t end = 0;                  // one past the last buffered byte
  std::unique_ptr<std::uint8_t[]> in;   // allocated at the first read
  std::size_t in_begin = 0;             // first byte not yet handed to OpenSSL
  std::size_t in_end = 0;               // one past the last received byte

  [[nodiscard]] std::size_t pending() const { return end - begin; }
  [[nodiscard]] std::size_t readable() const { return in_end - in_begin; }
};

SocketBio& state_of(BIO* bio) { return *static_cast<SocketBio*>(BIO_get_data(bio)); }

bool is_retryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

// Sends buffered bytes until the buffer is empty or the socket is full. Returns false on a
// socket error (errno set).
bool drain(SocketBio& s) {
  while (s.pending() > 0) {
    const ssize_t n = ::send(s.fd, s.out.get() + s.begin, s.pending(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return is_retryable(errno);
    }
    s.begin += static_cast<std::size_t>(n);
  }
  s.begin = s.end = 0;
  return true;
}

int socket_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  SocketBio& s = state_of(bio);
  const auto bytes = static_cast<std::size_t>(size);
  if (s.pending() + bytes > kCapacity) {
    if (!drain(s)) return -1;
    if (s.pending() > 0 && s.pending() + bytes > kCapacity) {
      BIO_set_retry_write(bio);
      return -1;
    }
  }
  if (bytes > kCapacity) {  // cannot happen with TLS records; still correct: send directly
    const ssize_t n = ::send(s.fd, data, bytes, MSG_NOSIGNAL);
    if (n < 0 && is_retryable(errno)) BIO_set_retry_write(bio);
    return static_cast<int>(n);
  }
  // Not zeroed: only the pages actually written count against the rank's memory.
  if (!s.out) s.out = std::make_unique_for_overwrite<std::uint8_t[]>(kCapacity);
  if (s.end + bytes > kCapacity) {  // compact: the unsent tail moves to the front
    std::memmove(s.out.get(), s.out.get() + s.begin, s.pending());
    s.end -= s.begin;
    s.begin = 0;
  }
  std::memcpy(s.out.get() + s.end, data, bytes);
  s.end += bytes;
  if (s.pending() >= kSendAt && !drain(s)) return -1;
  return size;
}

int socket_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  SocketBio& s = state_of(bio);
  if (s.readable() == 0) {
    if (!s.in) s.in = std::make_unique_for_overwrite<std::uint8_t[]>(kReadCapacity);
    ssize_t n = 0;
    do {
      n = ::recv(s.fd, s.in.get(), kReadCapacity, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {  // 0: orderly shutdown by the peer
      if (n < 0 && is_retryable(errno)) BIO_set_retry_read(bio);
      return static_cast<int>(n);
    }
    s.in_begin = 0;
    s.in_end = static_cast<std::size_t>(n);
  }
  const std::size_t count = std::min(s.readable(), static_cast<std::size_t>(size));
  std::memcpy(data, s.in.get() + s.in_begin, count);
  s.in_begin += count;
  return static_cast<int>(count);
}

long socket_ctrl(BIO* bio, int cmd, long, void*) {
  SocketBio& s = state_of(bio);
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      BIO_clear_retry_flags(bio);
      if (!drain(s)) return 0;
      if (s.pending() > 0) {
        BIO_set_retry_write(bio);
        return 0;
      }
      return 1;
    case BIO_CTRL_WPENDING:
      return static_cast<long>(s.pending());
    case BIO_CTRL_PENDING:
      return static_cast<long>(s.readable());
    default:
      return 0;
  }
}

int socket_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int socket_destroy(BIO* bio) {
  delete static_cast<SocketBio*>(BIO_get_data(bio));
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
  auto state = std::make_unique<SocketBio>();
  state->fd = fd;
  BIO* bio = BIO_new(socket_method());
  if (bio != nullptr) BIO_set_data(bio, state.release());
  return bio;
}

std::size_t socket_bio_unsent(BIO* bio) { return state_of(bio).pending(); }

std::size_t socket_bio_unread(BIO* bio) { return state_of(bio).readable(); }

}  // namespace sempi::transport
