#pragma once
// Buffers for eager payloads that arrive before their receive is posted (and for messages a
// rank sends to itself), reused instead of taken from the heap each time.
//
// Why: such a payload used to be a fresh heap block, freed once delivered. Blocks of tens of
// KiB end up at the top of the heap, and glibc gives that memory back with brk() when they are
// freed. In a multi-threaded process (every rank has a background thread) shrinking the heap
// costs a TLB shootdown on the other cores, which on a virtual machine is an interrupt to each
// vCPU: 13 % of all samples in a 4-rank 256 KiB allreduce, which ran twice as fast once its
// 64 KiB eager messages were sent as rendezvous instead.
//
// Payloads from kMinPooled to kMaxPooled bytes take a buffer of the next power of two, so a
// buffer is at most twice its payload; capacity_for() says how much, and the engine counts that
// against the peer's unexpected budget. Other payloads use the heap directly: glibc keeps small
// blocks in its bins and maps large ones on their own.
//
// How much stays pooled: as much as was recently in use. A returned buffer is kept while the
// pool's buffers (in use and free) stay within the recent peak: the most that was in use at
// once since the last trim() or during the period before it, and at least kKeptFloor. A fixed
// cap of 1 MiB was too small for a burst: an eager flood (a 2-rank bcast loop of 64 KiB
// messages, whose receiver queues dozens of them) freed and refaulted its buffers on every
// round, and took 200-250 us a message instead of ~30. trim() (the engine's background thread,
// every second) starts a new period and gives back what neither the period that ended nor the
// new one has needed: a burst's buffers go 1-2 s after it.
//
// The bound, exactly: free buffers never exceed the recent peak. A take() of a size class with
// no free buffer allocates even while other classes hold free ones, so for those 1-2 s the
// pool may hold what is in use plus up to the recent peak, twice the peak at most (a burst of
// one size, then one of another). Releasing other classes there instead would refault them
// whenever sizes alternate.
//
// Thread safety: take() and the return of a buffer may run on any thread. A buffer holds a
// reference to its pool, so it may outlive the engine that took it (an MPI_Message, say).

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace sempi::detail {

class PayloadPool;

/// Returns a buffer to its pool, or to the heap if it was not pooled.
struct PayloadReturn {
  std::shared_ptr<PayloadPool> pool;  // null: a heap block
  std::size_t capacity = 0;
  void operator()(std::uint8_t* data) const noexcept;
};
using Payload = std::unique_ptr<std::uint8_t[], PayloadReturn>;

class PayloadPool : public std::enable_shared_from_this<PayloadPool> {
 public:
  static constexpr std::size_t kMinPooled = 4 * 1024;
  static constexpr std::size_t kMaxPooled = 1024 * 1024;
  static constexpr std::size_t kKeptFloor = 1024 * 1024;

  static std::shared_ptr<PayloadPool> create() {
    return std::shared_ptr<PayloadPool>(new PayloadPool());
  }
  ~PayloadPool();
  PayloadPool(const PayloadPool&) = delete;
  PayloadPool& operator=(const PayloadPool&) = delete;

  /// The buffer size a payload of `bytes` gets.
  [[nodiscard]] static constexpr std::size_t capacity_for(std::size_t bytes) noexcept {
    return bytes >= kMinPooled && bytes <= kMaxPooled ? std::bit_ceil(bytes) : bytes;
  }

  /// A buffer of capacity_for(bytes), not zero-filled (the caller overwrites it).
  [[nodiscard]] Payload take(std::size_t bytes);

  /// Bytes held by free buffers.
  [[nodiscard]] std::size_t kept_bytes() const;

  /// Starts a new period, and frees the free buffers beyond what the period that ended needed
  /// at most (and kKeptFloor).
  void trim() noexcept;

 private:
  friend struct PayloadReturn;
  PayloadPool() = default;
  void give_back(std::uint8_t* data, std::size_t capacity) noexcept;
  // The most the pool's buffers may hold in all, in use and free (under mu_).
  [[nodiscard]] std::size_t limit() const noexcept;

  mutable std::mutex mu_;
  // Free buffers by size class: free_[k] holds buffers of kMinPooled << k bytes.
  std::vector<std::vector<std::uint8_t*>> free_;
  std::size_t kept_ = 0;           // bytes in free_
  std::size_t in_use_ = 0;         // bytes of pooled buffers handed out and not returned
  std::size_t peak_ = 0;           // the most in_use_ since the last trim()
  std::size_t previous_peak_ = 0;  // the most in_use_ in the period before that
};

}  // namespace sempi::detail
