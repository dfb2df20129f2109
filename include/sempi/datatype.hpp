#pragma once
/// \file
/// Which element types the typed API accepts: the builtin arithmetic types (and std::byte), sent
/// as contiguous arrays in the host's representation (all ranks run on the same architecture).
///
/// Collectives also describe elements by a `BasicType` (the type-erased form the reductions and
/// the mpi.h layer use); `datatype_traits<T>` maps C++ types to it, including the
/// (value, index) pairs of MINLOC/MAXLOC and std::complex.

#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
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

/// The builtin element types of reductions, after MPI's predefined datatypes. Fixed-width
/// integers have their own names for the mpi.h layer; they share the kernels of the C type of
/// the same width.
enum class BasicType : std::uint8_t {
  byte,                ///< MPI_BYTE: bitwise ops only
  char_,               ///< MPI_CHAR: text, no reduction ops (as in MPI)
  wchar,               ///< MPI_WCHAR: text, no reduction ops
  signed_char,         ///< MPI_SIGNED_CHAR
  unsigned_char,       ///< MPI_UNSIGNED_CHAR
  short_,              ///< MPI_SHORT
  unsigned_short,      ///< MPI_UNSIGNED_SHORT
  int_,                ///< MPI_INT
  unsigned_,           ///< MPI_UNSIGNED
  long_,               ///< MPI_LONG
  unsigned_long,       ///< MPI_UNSIGNED_LONG
  long_long,           ///< MPI_LONG_LONG
  unsigned_long_long,  ///< MPI_UNSIGNED_LONG_LONG
  int8,                ///< MPI_INT8_T
  int16,               ///< MPI_INT16_T
  int32,               ///< MPI_INT32_T
  int64,               ///< MPI_INT64_T
  uint8,               ///< MPI_UINT8_T
  uint16,              ///< MPI_UINT16_T
  uint32,              ///< MPI_UINT32_T
  uint64,              ///< MPI_UINT64_T
  float_,              ///< MPI_FLOAT
  double_,             ///< MPI_DOUBLE
  long_double,         ///< MPI_LONG_DOUBLE
  bool_,               ///< MPI_C_BOOL: logical ops only
  complex_float,       ///< MPI_C_FLOAT_COMPLEX: sum and prod only
  complex_double,      ///< MPI_C_DOUBLE_COMPLEX
  complex_long_double, ///< MPI_C_LONG_DOUBLE_COMPLEX
  float_int,           ///< MPI_FLOAT_INT: ValueIndex<float>, MINLOC/MAXLOC only
  double_int,          ///< MPI_DOUBLE_INT: ValueIndex<double>
  long_double_int,     ///< MPI_LONG_DOUBLE_INT: ValueIndex<long double>
  two_int,             ///< MPI_2INT: ValueIndex<int>
  long_int,            ///< MPI_LONG_INT: ValueIndex<long>
  short_int,           ///< MPI_SHORT_INT: ValueIndex<short>
};
inline constexpr int kBasicTypeCount = static_cast<int>(BasicType::short_int) + 1;

/// A value with its index, the element of MINLOC and MAXLOC. The layouts match MPI's pair
/// types (MPI_DOUBLE_INT is ValueIndex<double>, MPI_2INT is ValueIndex<int>, ...).
template <class T>
struct ValueIndex {
  T value;
  int index;
  friend bool operator==(const ValueIndex&, const ValueIndex&) = default;
};

/// Size in bytes of one element of `type` (padding included, as MPI's extent).
std::size_t basic_type_size(BasicType type) noexcept;
/// The MPI-style name of `type` ("MPI_DOUBLE", ...), for messages.
const char* basic_type_name(BasicType type) noexcept;

/// Maps a C++ element type to its BasicType. Specialised for the builtin arithmetic types,
/// std::byte, std::complex<float|double|long double> and ValueIndex<float|double|long double|
/// int|long|short>.
template <class T>
struct datatype_traits;

#define SEMPI_DATATYPE_TRAIT(CXX, BASIC)                      \
  template <>                                                 \
  struct datatype_traits<CXX> {                               \
    static constexpr BasicType type = BasicType::BASIC;       \
  };
SEMPI_DATATYPE_TRAIT(std::byte, byte)
SEMPI_DATATYPE_TRAIT(char, char_)
SEMPI_DATATYPE_TRAIT(wchar_t, wchar)
SEMPI_DATATYPE_TRAIT(signed char, signed_char)
SEMPI_DATATYPE_TRAIT(unsigned char, unsigned_char)
SEMPI_DATATYPE_TRAIT(short, short_)
SEMPI_DATATYPE_TRAIT(unsigned short, unsigned_short)
SEMPI_DATATYPE_TRAIT(int, int_)
SEMPI_DATATYPE_TRAIT(unsigned, unsigned_)
SEMPI_DATATYPE_TRAIT(long, long_)
SEMPI_DATATYPE_TRAIT(unsigned long, unsigned_long)
SEMPI_DATATYPE_TRAIT(long long, long_long)
SEMPI_DATATYPE_TRAIT(unsigned long long, unsigned_long_long)
SEMPI_DATATYPE_TRAIT(float, float_)
SEMPI_DATATYPE_TRAIT(double, double_)
SEMPI_DATATYPE_TRAIT(long double, long_double)
SEMPI_DATATYPE_TRAIT(bool, bool_)
SEMPI_DATATYPE_TRAIT(std::complex<float>, complex_float)
SEMPI_DATATYPE_TRAIT(std::complex<double>, complex_double)
SEMPI_DATATYPE_TRAIT(std::complex<long double>, complex_long_double)
SEMPI_DATATYPE_TRAIT(ValueIndex<float>, float_int)
SEMPI_DATATYPE_TRAIT(ValueIndex<double>, double_int)
SEMPI_DATATYPE_TRAIT(ValueIndex<long double>, long_double_int)
SEMPI_DATATYPE_TRAIT(ValueIndex<int>, two_int)
SEMPI_DATATYPE_TRAIT(ValueIndex<long>, long_int)
SEMPI_DATATYPE_TRAIT(ValueIndex<short>, short_int)
#undef SEMPI_DATATYPE_TRAIT

/// Element types the typed collectives accept: those with a datatype_traits specialisation.
template <class T>
concept Element = requires { datatype_traits<std::remove_cv_t<T>>::type; };

/// How a reduction sees its elements: a builtin type, or (for user-defined operations only)
/// opaque elements of `size` bytes, e.g. an mpi.h derived datatype. Converts from BasicType.
struct ElementType {
  BasicType basic = BasicType::byte;
  std::size_t size = 1;  ///< bytes per element
  bool opaque = false;   ///< true: only user-defined operations may combine these elements

  ElementType() = default;
  ElementType(BasicType type) : basic(type), size(basic_type_size(type)) {}  // NOLINT: implicit
  /// Elements of `bytes` bytes that only a user-defined operation understands.
  static ElementType opaque_of(std::size_t bytes) {
    ElementType t;
    t.size = bytes;
    t.opaque = true;
    return t;
  }
};

/// The in-place sentinel (MPI_IN_PLACE). Pass it where MPI allows MPI_IN_PLACE: the send buffer
/// of gather (root), allgather(v), alltoall, reduce (root), allreduce, reduce_scatter(_block),
/// scan and exscan, and the receive buffer of scatter(v) at the root. It converts to any object
/// pointer, so it works for the typed and the byte-level (`*_bytes`, `*_raw`) functions alike.
struct InPlaceT {
  template <class T>
  operator T*() const noexcept {  // NOLINT: implicit by design, like MPI_IN_PLACE
    return static_cast<T*>(address());
  }
  /// The address that stands for IN_PLACE: never a valid object (the first page is unmapped).
  static void* address() noexcept {
    return reinterpret_cast<void*>(std::uintptr_t{alignof(std::max_align_t)} * 4);  // NOLINT
  }
};
inline constexpr InPlaceT IN_PLACE{};
/// True if `p` is the IN_PLACE sentinel.
inline bool is_in_place(const void* p) noexcept { return p == InPlaceT::address(); }

}  // namespace sempi
