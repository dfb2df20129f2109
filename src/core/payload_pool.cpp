#include "core/payload_pool.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <new>

namespace sempi::detail {
namespace {

// Size class of a pooled capacity (a power of two from kMinPooled to kMaxPooled).
std::size_t size_class(std::size_t capacity) noexcept {
  return static_cast<std::size_t>(std::countr_zero(capacity / PayloadPool::kMinPooled));
}

}  // namespace

void PayloadReturn::operator()(std::uint8_t* data) const noexcept {
  if (pool) {
    pool->give_back(data, capacity);
  } else {
    delete[] data;
  }
}

PayloadPool::~PayloadPool() {
  for (auto& buffers : free_) {
    for (std::uint8_t* data : buffers) delete[] data;
  }
}

Payload PayloadPool::take(std::size_t bytes) {
  const std::size_t capacity = capacity_for(bytes);
  if (capacity < kMinPooled || capacity > kMaxPooled) {
    return Payload(new std::uint8_t[bytes == 0 ? 1 : bytes], PayloadReturn{});
  }
  std::unique_lock lock(mu_);
  const std::size_t k = size_class(capacity);
  std::uint8_t* data = nullptr;
  if (k < free_.size() && !free_[k].empty()) {
    data = free_[k].back();
    free_[k].pop_back();
    kept_ -= capacity;
  } else {
    lock.unlock();  // the heap has its own locks
    data = new std::uint8_t[capacity];
    lock.lock();
  }
  in_use_ += capacity;
  peak_ = std::max(peak_, in_use_);
  return Payload(data, PayloadReturn{shared_from_this(), capacity});
}

std::size_t PayloadPool::limit() const noexcept {
  return std::max({kKeptFloor, peak_, previous_peak_});
}

void PayloadPool::give_back(std::uint8_t* data, std::size_t capacity) noexcept {
  {
    std::lock_guard lock(mu_);
    in_use_ -= capacity;
    if (in_use_ + kept_ + capacity <= limit()) {
      const std::size_t k = size_class(capacity);
      try {
        if (free_.size() <= k) free_.resize(k + 1);
        free_[k].push_back(data);
        kept_ += capacity;
        return;
      } catch (const std::bad_alloc&) {
        // No room to remember it: free it below.
      }
    }
  }
  delete[] data;
}

std::size_t PayloadPool::kept_bytes() const {
  std::lock_guard lock(mu_);
  return kept_;
}

void PayloadPool::trim() noexcept {
  std::unique_lock lock(mu_);
  previous_peak_ = peak_;
  peak_ = in_use_;
  // Largest buffers first: fewest frees for the bytes. Freed outside the lock, a batch at a
  // time (a 1 MiB buffer is its own mapping: each free is an munmap), so that the rank's
  // take() and returns do not wait behind a trim after a large burst.
  for (;;) {
    std::array<std::uint8_t*, 32> batch{};
    std::size_t count = 0;
    for (std::size_t k = free_.size(); k-- > 0 && count < batch.size();) {
      auto& buffers = free_[k];
      while (!buffers.empty() && count < batch.size() && in_use_ + kept_ > limit()) {
        batch[count++] = buffers.back();
        buffers.pop_back();
        kept_ -= kMinPooled << k;
      }
    }
    if (count == 0) return;
    lock.unlock();
    for (std::size_t i = 0; i < count; ++i) delete[] batch[i];
    lock.lock();
  }
}

}  // namespace sempi::detail
