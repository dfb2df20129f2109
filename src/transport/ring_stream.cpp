#include "transport/ring_stream.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace sempi::transport {
namespace {

constexpr auto kSeqCst = std::memory_order_seq_cst;

template <class T>
std::atomic_ref<T> shared(T& word) {
  return std::atomic_ref<T>(word);
}

}  // namespace

RingStream::RingStream(std::unique_ptr<SharedRegion> region, bool dialer, int socket)
    : SocketBuffers(socket),
      region_(std::move(region)),
      ring_(region_->ring_bytes()),
      tx_(region_->control(dialer ? 0 : 1)),
      tx_data_(region_->data(dialer ? 0 : 1)),
      rx_(region_->control(dialer ? 1 : 0)),
      rx_data_(region_->data(dialer ? 1 : 0)) {}

long RingStream::fail(std::string detail) {
  if (!broken()) detail_ = "shared ring: " + std::move(detail);
  errno = EPROTO;
  return -1;
}

bool RingStream::refresh_tail() {
  const std::uint64_t tail = shared(tx_.tail).load(kSeqCst);
  if (tail < tx_tail_seen_ || tail > tx_head_) {
    fail("the peer moved its tail to " + std::to_string(tail) + " (expected " +
         std::to_string(tx_tail_seen_) + " to " + std::to_string(tx_head_) + ")");
    return false;
  }
  tx_tail_seen_ = tail;
  return true;
}

// Inline: on every push and pull, where a call through the PLT costs ~15 instructions.
inline void RingStream::wake_if_asked(std::uint32_t& flag) noexcept {
  auto asked = shared(flag);
  if (asked.load(kSeqCst) == 0 || asked.exchange(0, kSeqCst) == 0 || ring_bell()) return;
  if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
    peer_closed_ = true;  // the socket is closed: the peer is gone
  } else {
    asked.store(1, kSeqCst);  // out of buffers: the next publish or take rings again
  }
}

long RingStream::push(const std::uint8_t* data, std::size_t size) {
  if (broken()) return fail({});
  if (peer_closed_) {  // as a socket whose reader is gone
    errno = EPIPE;
    return -1;
  }
  if (tx_head_ - tx_tail_seen_ == ring_ && !refresh_tail()) return -1;
  const std::size_t count = std::min<std::uint64_t>(size, ring_ - (tx_head_ - tx_tail_seen_));
  if (count == 0) {
    errno = EAGAIN;
    return -1;
  }
  const std::size_t at = tx_head_ % ring_;
  const std::size_t first = std::min(count, ring_ - at);
  std::memcpy(tx_data_ + at, data, first);
  std::memcpy(tx_data_, data + first, count - first);
  tx_head_ += count;
  shared(tx_.head).store(tx_head_, kSeqCst);
  // Published all the same if the wake-up fails: a failure now would have the caller push
  // these bytes again. A peer that is gone is reported by the next push.
  wake_if_asked(tx_.consumer_asleep);  // the peer consumes this ring
  return static_cast<long>(count);
}

long RingStream::pull(std::uint8_t* dst, std::size_t size) {
  if (broken()) return fail({});
  const std::uint64_t head = shared(rx_.head).load(std::memory_order_acquire);
  if (head < rx_head_seen_ || head - rx_tail_ > ring_) {
    return fail("the peer moved its head to " + std::to_string(head) + " (expected " +
                std::to_string(rx_head_seen_) + " to " + std::to_string(rx_tail_ + ring_) + ")");
  }
  rx_head_seen_ = head;
  const std::size_t count = std::min<std::uint64_t>(size, head - rx_tail_);
  if (count == 0) {
    if (peer_closed_) return 0;
    errno = EAGAIN;
    return -1;
  }
  const std::size_t at = rx_tail_ % ring_;
  const std::size_t first = std::min(count, ring_ - at);
  std::memcpy(dst, rx_data_ + at, first);
  std::memcpy(dst + first, rx_data_, count - first);
  rx_tail_ += count;
  shared(rx_.tail).store(rx_tail_, kSeqCst);
  wake_if_asked(rx_.producer_waiting);
  return static_cast<long>(count);
}

bool RingStream::has_unseen_input() const noexcept {
  return shared(rx_.head).load(std::memory_order_acquire) != rx_tail_;
}

bool RingStream::prepare_to_block(bool reading, bool writing) noexcept {
  if (peer_closed_ || broken()) return true;
  bool ready = false;
  if (reading) {
    shared(rx_.consumer_asleep).store(1, kSeqCst);
    ready = shared(rx_.head).load(kSeqCst) != rx_tail_;
  }
  if (writing && unsent() > 0) {  // writes wait for room
    shared(tx_.producer_waiting).store(1, kSeqCst);
    ready = ready || !refresh_tail() || tx_head_ - tx_tail_seen_ < ring_;
  }
  return ready;
}

void RingStream::done_blocking() noexcept {
  shared(rx_.consumer_asleep).store(0, std::memory_order_relaxed);
  shared(tx_.producer_waiting).store(0, std::memory_order_relaxed);
}

void RingStream::service_socket() noexcept {
  // Bounded: a peer that keeps ringing cannot keep us here.
  for (int round = 0; round < 4; ++round) {
    std::uint8_t bytes[64];
    const ssize_t n = ::recv(fd(), bytes, sizeof bytes, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    peer_closed_ = true;  // closed, or reset: nothing more will be published
    return;
  }
}

bool RingStream::ring_bell() noexcept {
  const std::uint8_t bell = 1;
  for (;;) {
    const ssize_t n = ::send(fd(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    // A full socket holds wake-up bytes the peer has not read yet: it will wake all the same.
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace sempi::transport
