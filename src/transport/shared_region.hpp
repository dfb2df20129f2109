#pragma once
// The shared memory of one channel between two ranks on one host: two single-producer,
// single-consumer byte rings, one per direction, in a sealed memfd.
//
// The dialing rank creates the region and hands the memfd to the accepting rank over the Unix
// socket the channel runs on (ring_stream.hpp says how the rings are used). Only TLS records,
// sealed with the channel's traffic keys, ever pass through it.
//
// Layout: one page of control words (per ring: the producer's head, the consumer's tail and
// the two wake-up flags, each on its own cache line), then ring 0 (dialer to acceptor), then
// ring 1 (acceptor to dialer). Head and tail count bytes since the start and never wrap.
//
// Safety against a hostile peer: the memfd is sealed against shrinking and growing before it
// is handed over, and adopt() refuses anything else, so the peer cannot make our accesses
// fault (SIGBUS) by truncating it. The indices the peer writes are checked before every use
// (ring_stream.cpp). Nobody else holds the memfd: it has no name in any file system and
// travels only over a Unix socket in the job's private (0700) directory.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/socket.hpp"

namespace sempi::transport {

/// Control words of one ring, written with atomic_ref from both processes.
struct RingControl {
  alignas(64) std::uint64_t head;             // producer: bytes published so far
  alignas(64) std::uint64_t tail;             // consumer: bytes consumed so far
  alignas(64) std::uint32_t consumer_asleep;  // 1: the consumer may block; ring on new bytes
  alignas(64) std::uint32_t producer_waiting; // 1: the producer waits for room; ring on progress
};

class SharedRegion {
 public:
  /// Bytes of each ring: room for many maximum-size TLS records, like a socket's buffer, as
  /// long as a rank's rings together stay within kRingBudget (ring_bytes_for()).
  static constexpr std::size_t kMaxRingBytes = 512 * 1024;
  static constexpr std::size_t kMinRingBytes = 64 * 1024;
  static constexpr std::size_t kRingBudget = 8 * 1024 * 1024;
  static constexpr std::size_t kControlBytes = 4096;

  /// The ring size for a job of `ranks`: a rank's outgoing rings to every other rank share
  /// kRingBudget (pages a ring has used stay in memory until the channel closes), within
  /// [kMinRingBytes, kMaxRingBytes], a multiple of the page size.
  static std::size_t ring_bytes_for(std::size_t ranks) noexcept;

  /// A new region with rings of `ring_bytes` (the dialer's side). nullptr with `error` set if
  /// the system refuses.
  static std::unique_ptr<SharedRegion> create(std::size_t ring_bytes, std::string& error);
  /// Maps a region received from the peer. nullptr with `error` set unless `fd` is a memfd
  /// sealed against shrinking, growing and further sealing, whose size is that of two rings
  /// of a size create() could have chosen.
  static std::unique_ptr<SharedRegion> adopt(UniqueFd fd, std::string& error);

  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;
  ~SharedRegion();

  /// The memfd, to hand to the peer (the mappings do not need it); -1 after close_fd().
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  /// Closes the memfd once the peer has it: a channel should not cost two descriptors.
  void close_fd() noexcept { fd_ = UniqueFd(); }
  /// Ring 0 carries the dialer's records, ring 1 the acceptor's.
  [[nodiscard]] RingControl& control(int ring) const noexcept { return controls_[ring]; }
  [[nodiscard]] std::size_t ring_bytes() const noexcept { return ring_bytes_; }
  /// The ring's ring_bytes() bytes.
  [[nodiscard]] std::uint8_t* data(int ring) const noexcept {
    return static_cast<std::uint8_t*>(mapping_) + kControlBytes +
           static_cast<std::size_t>(ring) * ring_bytes_;
  }

 private:
  SharedRegion(UniqueFd fd, std::size_t ring_bytes) : fd_(std::move(fd)), ring_bytes_(ring_bytes) {}
  [[nodiscard]] std::size_t file_bytes() const noexcept { return kControlBytes + 2 * ring_bytes_; }
  bool map(std::string& error);

  UniqueFd fd_;
  std::size_t ring_bytes_;
  void* mapping_ = nullptr;
  RingControl* controls_ = nullptr;
};

}  // namespace sempi::transport
