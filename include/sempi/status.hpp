#pragma once
/// \file
/// The outcome of a receive or probe.

#include <climits>
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

  /// Number of whole elements of T received, or UNDEFINED if bytes is not a multiple of
  /// sizeof(T) or the number does not fit an int (as MPI_Get_count).
  template <class T>
  [[nodiscard]] constexpr int count() const noexcept {
    if (bytes % sizeof(T) != 0 || bytes / sizeof(T) > static_cast<std::size_t>(INT_MAX)) {
      return UNDEFINED;
    }
    return static_cast<int>(bytes / sizeof(T));
  }
};

}  // namespace sempi
