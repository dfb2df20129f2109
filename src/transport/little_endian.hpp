#pragma once
// Fixed-width little-endian load/store for wire formats, independent of host byte order.

#include <cstddef>
#include <cstdint>

namespace sempi::transport {

template <class T>
inline void store_le(std::uint8_t* out, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(value) >> (8 * i));
  }
}

template <class T>
inline T load_le(const std::uint8_t* in) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  }
  return static_cast<T>(value);
}

}  // namespace sempi::transport
