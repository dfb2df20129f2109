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
// against the peer's unexpected budget. Freed buffers stay in the pool up to kKeptBytes in all;
// beyond that they go back to the heap. Other payloads use the heap directly: glibc keeps
// small blocks in its bins and maps large ones on their own.
//
// Thread safety: take() and the return of a buffer may run on any thread. A buffer holds a
// reference to its pool, so it may outlive the engine that took it (an MPI_Message, say).

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
  static constexpr std::size_t kKeptBytes = 1024 * 1024;

  static std::shared_ptr<PayloadPool> create() {
    return std::shared_ptr<PayloadPool>(new PayloadPool());
  }
  ~PayloadPool();
  PayloadPool(const PayloadPool&) = delete;
  PayloadPool& operator=(const PayloadPool&) = delete;

  /// The buffer size a payload of `bytes` gets.
  [[nodiscard]] static std::size_t capacity_for(std::size_t bytes) noexcept;

  /// A buffer of capacity_for(bytes), not zero-filled (the caller overwrites it).
  [[nodiscard]] Payload take(std::size_t bytes);

  /// Bytes held by free buffers.
  [[nodiscard]] std::size_t kept_bytes() const;

 private:
  friend struct PayloadReturn;
  PayloadPool() = default;
  void give_back(std::uint8_t* data, std::size_t capacity) noexcept;

  mutable std::mutex mu_;
  // Free buffers by size class: free_[k] holds buffers of kMinPooled << k bytes.
  std::vector<std::vector<std::uint8_t*>> free_;
  std::size_t kept_ = 0;
};

}  // namespace sempi::detail
