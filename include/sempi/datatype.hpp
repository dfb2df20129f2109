#pragma once
/// \file
/// Which element types the typed API accepts: the builtin arithmetic types (and std::byte), sent
/// as contiguous arrays in the host's representation (all ranks run on the same architecture).

#include <cstddef>
#include <limits>
#include <type_traits>

#include "sempi/error.hpp"

namespace sempi {

template <class T>
concept Builtin = std::is_arithmetic_v<T> || std::is_same_v<T, std::byte>;

namespace detail {
/// Validates (buffer, count) and returns the byte size. Throws sempi::Error(count/buffer).
template <class T>
std::size_t checked_bytes(const T* buf, int count, const char* operation) {
  if (count < 0) {
    throw Error(ErrorClass::count,
                std::string(operation) + ": negative count " + std::to_string(count));
  }
  if (buf == nullptr && count > 0) {
    throw Error(ErrorClass::buffer, std::string(operation) + ": null buffer with count " +
                                        std::to_string(count));
  }
  return static_cast<std::size_t>(count) * sizeof(T);
}
}  // namespace detail

}  // namespace sempi
