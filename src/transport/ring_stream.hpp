#pragma once
// The byte pipe of a channel between two ranks on one host, once its TLS handshake and HELLO
// exchange are done: TLS records go through a pair of shared-memory rings (shared_region.hpp)
// instead of the kernel, and the Unix socket the channel was set up on only wakes a sleeping
// side and tells when the peer is gone.
//
// Why: through a socket, every send and receive is a system call (~1.1 us on the VMs this was
// measured on) plus socket-buffer allocation in the kernel, and a small message wakes the
// peer. Through the ring the same bytes are copied by each side in user space, and a spinning
// peer sees them without any system call. The records are the same TLS 1.3 records as on a
// socket, under the same keys; the buffers and their policies are SocketBuffers' own.
//
// Copies, not sealing in place: the bytes are copied into the ring after sealing and out of it
// before opening. Sealing and opening straight in shared memory measured slower (every cache
// line then moves between cores inside the cipher's loop), and a copy also means the peer
// cannot change a record while it is being checked.
//
// Waking: a side about to block in poll() sets its ring's consumer_asleep flag and looks at the
// head once more, and if its writes wait for room, sets producer_waiting and looks at the tail
// once more (prepare_to_block()). A producer publishing bytes, or a consumer freeing room,
// clears the flag it finds set and sends one byte over the socket. Each side's store comes
// before its load of the other's word (both sequentially consistent), so at least one of the
// two sees the other: a wake-up is never lost. (A byte the socket refuses for want of kernel
// buffers is owed: the flag is set again for the next publish.) A side that spins sets no flag,
// and the other side then makes no system call for it.
//
// A peer that exits or crashes closes the socket; what it had published is still read, and
// the stream reports the close once the ring is empty, as a socket would. Indices the peer
// writes are checked before use: a head or tail that moves backwards or past the other index
// fails the stream with a precise reason (failure_detail()).
//
// Not thread-safe: the channel's owner uses it.

#include <memory>
#include <string>

#include "transport/shared_region.hpp"
#include "transport/socket_buffers.hpp"

namespace sempi::transport {

class RingStream final : public SocketBuffers {
 public:
  /// `dialer`: this side created the region and sends on ring 0. `socket`: the channel's Unix
  /// socket (not owned), for wake-up bytes.
  RingStream(std::unique_ptr<SharedRegion> region, bool dialer, int socket);

  [[nodiscard]] std::string failure_detail() const override { return detail_; }

  /// Before blocking on the socket: asks the peer for a wake-up byte when it publishes (if
  /// `reading`) and, if `writing` and bytes wait to be sent, when it frees room. true if what
  /// was asked for is the case already, or the stream failed or the peer closed (then do not
  /// block).
  bool prepare_to_block(bool reading, bool writing) noexcept;
  /// After blocking: the peer need not ring any more.
  void done_blocking() noexcept;
  /// Reads the wake-up bytes waiting on the socket and notes when the peer has closed it.
  void service_socket() noexcept;
  /// True if the peer published bytes not taken in yet.
  [[nodiscard]] bool has_unseen_input() const noexcept;

 protected:
  long push(const std::uint8_t* data, std::size_t size) override;
  long pull(std::uint8_t* dst, std::size_t size) override;

 private:
  long fail(std::string detail);
  // Refreshes our view of the consumer's tail; false if the peer broke the ring.
  bool refresh_tail();
  // If the peer set `flag` (in shared memory), clears it and sends a wake-up byte. If the
  // socket is closed, the peer is gone (peer_closed_); if it refuses the byte for want of
  // buffers, the flag is set again, so that the wake-up is not lost.
  inline void wake_if_asked(std::uint32_t& flag) noexcept;
  // Sends one wake-up byte; false (errno set) if the socket refused it for another reason
  // than being full: the peer is gone (EPIPE, ECONNRESET, ENOTCONN), or the kernel is out of
  // buffers.
  bool ring_bell() noexcept;

  [[nodiscard]] bool broken() const noexcept { return !detail_.empty(); }

  std::unique_ptr<SharedRegion> region_;
  std::uint64_t ring_;  // bytes of each ring
  RingControl& tx_;
  std::uint8_t* tx_data_;
  std::uint64_t tx_head_ = 0;       // published
  std::uint64_t tx_tail_seen_ = 0;  // the peer's tail, as last read
  RingControl& rx_;
  std::uint8_t* rx_data_;
  std::uint64_t rx_tail_ = 0;  // taken in (and published as the tail)
  std::uint64_t rx_head_seen_ = 0;
  bool peer_closed_ = false;
  std::string detail_;  // set once the peer broke the ring
};

}  // namespace sempi::transport
