#pragma once
// A bounded queue for many producers and one consumer at a time, without locks: the audit
// log's capture queue (audit_log.hpp). A capture runs on the message path, once per audited
// message, so it must cost a few stores: a mutex, a counter and a growing vector cost about
// 25 ns there (measured in place).
//
// Each slot carries a sequence number that says whose turn it is (the bounded queue of
// D. Vyukov): equal to a position, the slot is free for the producer that claims that position;
// equal to position + 1, it holds that position's element for the consumer. A producer claims a
// position with one compare-and-swap, fills the slot and publishes it with a release store.
// Elements are reused in place, never destroyed while the ring lives, so an element's buffers
// (a std::string's capacity) survive from one use to the next.
//
// Order: one producer's elements come out in the order it pushed them. A slot claimed but not
// yet published holds back the ones after it until it is published (a few stores later).

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace sempi::audit {

template <class T>
class CaptureRing {
 public:
  /// `capacity` is rounded up to a power of two.
  explicit CaptureRing(std::size_t capacity)
      : mask_(std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity) - 1),
        slots_(std::make_unique<Slot[]>(mask_ + 1)) {
    for (std::size_t i = 0; i <= mask_; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
  }
  CaptureRing(const CaptureRing&) = delete;
  CaptureRing& operator=(const CaptureRing&) = delete;

  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }

  /// Producer (any thread): claims a slot, calls fill(T&) on it and publishes it. Returns
  /// false, without calling fill, if the ring is full. fill must not throw: a slot claimed and
  /// never published would stop the consumer there for good.
  template <class Fill>
  bool try_push(Fill&& fill) {
    static_assert(std::is_nothrow_invocable_v<Fill&, T&>, "fill must be noexcept");
    std::uint64_t pos = head_.load(std::memory_order_relaxed);
    Slot* slot = nullptr;
    for (;;) {
      slot = &slots_[pos & mask_];
      const std::uint64_t seq = slot->seq.load(std::memory_order_acquire);
      if (seq == pos) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (seq < pos) {
        return false;  // the slot still holds the element from one lap ago: full
      } else {
        pos = head_.load(std::memory_order_relaxed);  // another producer took pos
      }
    }
    fill(slot->value);
    slot->seq.store(pos + 1, std::memory_order_release);
    return true;
  }

  /// Consumer (one thread at a time, e.g. under a lock): the oldest published element, or
  /// null if there is none yet.
  [[nodiscard]] T* front() noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    Slot& slot = slots_[tail & mask_];
    return slot.seq.load(std::memory_order_acquire) == tail + 1 ? &slot.value : nullptr;
  }
  /// Consumer: gives front()'s slot back to the producers.
  void pop() noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    slots_[tail & mask_].seq.store(tail + mask_ + 1, std::memory_order_release);
    tail_.store(tail + 1, std::memory_order_relaxed);
  }

  /// True if something was claimed and not yet consumed (a hint, from any thread).
  [[nodiscard]] bool maybe_nonempty() const noexcept {
    return head_.load(std::memory_order_relaxed) != tail_.load(std::memory_order_relaxed);
  }

 private:
  struct Slot {
    std::atomic<std::uint64_t> seq{0};
    T value{};
  };
  // Producers write head_, the consumer writes tail_ (atomic only so that maybe_nonempty() may
  // read it from any thread): kept on separate cache lines.
  static constexpr std::size_t kLine = 64;

  const std::size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(kLine) std::atomic<std::uint64_t> head_{0};  // next position to claim
  alignas(kLine) std::atomic<std::uint64_t> tail_{0};  // next position to consume
};

}  // namespace sempi::audit
