#include "transport/socket_bio.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace sempi::transport {
namespace {

int fd_of(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

bool is_retryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

int socket_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(fd_of(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL);
  if (n < 0 && is_retryable(errno)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int socket_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(fd_of(bio), data, static_cast<size_t>(size), 0);
  if (n < 0 && is_retryable(errno)) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

long socket_ctrl(BIO*, int cmd, long, void*) {
  // Writes go straight to the kernel, so there is never anything to flush.
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int socket_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* socket_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sempi socket");
    BIO_meth_set_write(m, socket_write);
    BIO_meth_set_read(m, socket_read);
    BIO_meth_set_ctrl(m, socket_ctrl);
    BIO_meth_set_create(m, socket_create);
    return m;
  }();
  return method;
}

}  // namespace

BIO* new_socket_bio(int fd) {
  BIO* bio = BIO_new(socket_method());
  if (bio != nullptr) BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  return bio;
}

}  // namespace sempi::transport
