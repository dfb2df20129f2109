#pragma once
/// \file
/// Wildcards and limits with MPI's meanings.

namespace sempi {

/// Receive from any source (MPI_ANY_SOURCE).
inline constexpr int ANY_SOURCE = -1;
/// Receive with any tag (MPI_ANY_TAG).
inline constexpr int ANY_TAG = -1;
/// The null process: operations with it complete at once and move no data (MPI_PROC_NULL).
inline constexpr int PROC_NULL = -2;
/// Returned where a value is undefined (MPI_UNDEFINED); also the color that opts out of split.
inline constexpr int UNDEFINED = -32766;
/// Largest valid tag (MPI_TAG_UB).
inline constexpr int TAG_UB = 0x7fffffff;

}  // namespace sempi
