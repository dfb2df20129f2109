#pragma once
/// \file
/// The outcome of a receive or probe.

#include <cstddef>

#include "sempi/constants.hpp"
#include "sempi/error.hpp"

namespace sempi {

struct Status {
  int source = ANY_SOURCE;  ///< sender's rank in the communicator
  int tag = ANY_TAG;
  std::size_t bytes = 0;    ///< bytes received (or, for probe, the size of the message)
  bool cancelled = false;
  ErrorClass error = ErrorClass::success;

  /// Number of whole elements of T received, or UNDEFINED if bytes is not a multiple of sizeof(T).
  template <class T>
  [[nodiscard]] int count() const noexcept {
    return bytes % sizeof(T) == 0 ? static_cast<int>(bytes / sizeof(T)) : UNDEFINED;
  }
};

}  // namespace sempi
