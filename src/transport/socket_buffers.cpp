#include "transport/socket_buffers.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace sempi::transport {

std::uint8_t* SocketBuffers::reserve(std::size_t size) {
  if (unsent() + size > kCapacity) return nullptr;
  // Not zeroed: only the pages actually written count against the rank's memory.
  if (!out_) out_ = std::make_unique_for_overwrite<std::uint8_t[]>(kCapacity);
  if (end_ + size > kCapacity) {  // compact: the unsent tail moves to the front
    std::memmove(out_.get(), out_.get() + begin_, unsent());
    end_ -= begin_;
    begin_ = 0;
  }
  return out_.get() + end_;
}

std::uint8_t* SocketBuffers::reserve_draining(std::size_t size, bool& lost) {
  if (std::uint8_t* space = reserve(size); space != nullptr) return space;
  lost = !drain();
  return lost ? nullptr : reserve(size);
}

bool SocketBuffers::drain() {
  while (unsent() > 0) {
    const long n = push(out_.get() + begin_, unsent());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    begin_ += static_cast<std::size_t>(n);
  }
  begin_ = end_ = 0;
  return true;
}

long SocketBuffers::receive(std::size_t room) {
  if (!in_) in_ = std::make_unique_for_overwrite<std::uint8_t[]>(kReadCapacity);
  if (unread() == 0) {
    in_begin_ = in_end_ = 0;
  } else if (kReadCapacity - in_end_ < room) {  // the partial record moves to the front
    std::memmove(in_.get(), in_.get() + in_begin_, unread());
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  long n = 0;
  do {
    n = pull(in_.get() + in_end_, kReadCapacity - in_end_);
  } while (n < 0 && errno == EINTR);
  if (n > 0) in_end_ += static_cast<std::size_t>(n);
  return n;
}

long SocketBuffers::push(const std::uint8_t* data, std::size_t size) {
  return static_cast<long>(::send(fd_, data, size, MSG_NOSIGNAL));
}

long SocketBuffers::pull(std::uint8_t* dst, std::size_t size) {
  return static_cast<long>(::recv(fd_, dst, size, 0));
}

}  // namespace sempi::transport
