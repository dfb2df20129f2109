#pragma once
// The datatype engine behind MPI_Datatype: a type is flattened into its typemap as a list of
// (offset, length) byte blocks in typemap order, with neighbours that touch in memory merged.
// A type whose one block covers its whole extent is contiguous: buffers of it are sent as they
// are (zero copy). Anything else is packed into a contiguous stream before sending and unpacked
// after receiving; the stream is the concatenation of the blocks, which is also MPI_Pack's
// format. A second list of (basic type, count) runs describes the element sequence for
// MPI_Get_elements and for reductions.
//
// TypeMaps are immutable once built and shared (std::shared_ptr<const TypeMap>) by handles and
// pending operations, so MPI_Type_free never pulls a layout from under a running transfer.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace sempi::mpi {

/// The basic (predefined, non-derived) element types, including the MINLOC/MAXLOC pairs.
enum class Basic : std::uint8_t {
  none,  // not a single basic type (heterogeneous derived type)
  char_, schar, uchar, byte, packed, short_, ushort, int_, uint, long_, ulong, llong, ullong,
  float_, double_, ldouble, wchar, bool_, i8, i16, i32, i64, u8, u16, u32, u64, aint, offset,
  count, cfloat, cdouble, cldouble,
  // pairs { value; int index; } in their C layout
  float_int, double_int, long_int, two_int, short_int, ldouble_int,
};

struct Block {
  std::int64_t offset;
  std::int64_t length;
};

struct Run {
  Basic basic;
  std::int64_t size;   // bytes of one element
  std::int64_t count;  // elements in the run
};

class TypeMap {
 public:
  std::vector<Block> blocks;  // typemap order, merged where contiguous
  std::vector<Run> runs;      // basic element sequence, merged
  std::int64_t size = 0;      // bytes of data (sum of block lengths)
  std::int64_t lb = 0;
  std::int64_t ub = 0;
  std::int64_t true_lb = 0;
  std::int64_t true_ub = 0;
  std::int64_t align = 1;     // strictest member alignment: extents are padded to it
  /// lb / ub are explicit markers (set by MPI_Type_create_resized, directly or in a member).
  /// Markers are sticky: a type built from members with a marker takes that bound from the
  /// markers alone, and a type with an explicit ub is not padded (MPI 3.1 sections
  /// 4.1.6-4.1.7).
  bool explicit_lb = false;
  bool explicit_ub = false;
  /// The one basic type all elements share for reductions (pairs count as one element), and
  /// how many of them one instance holds; `none` if mixed.
  Basic reduce_basic = Basic::none;
  std::int64_t reduce_count = 0;

  [[nodiscard]] std::int64_t extent() const { return ub - lb; }
  /// Instances laid end to end form one block of bytes (starting at true_lb).
  [[nodiscard]] bool contiguous() const {
    return size == 0 || (blocks.size() == 1 && blocks[0].length == size && extent() == size);
  }
  /// Number of basic elements in one instance.
  [[nodiscard]] std::int64_t elements() const;

  /// Copies `count` instances starting at `base` into `out` (count * size bytes).
  void pack(const std::byte* base, std::int64_t count, std::byte* out) const;
  /// Copies `bytes` bytes of packed data (at most count * size) into `count` instances at `base`.
  void unpack(const std::byte* in, std::int64_t bytes, std::int64_t count, std::byte* base) const;
  /// Basic elements in the first `bytes` bytes of a packed stream, or -1 if that ends inside an
  /// element.
  [[nodiscard]] std::int64_t elements_in(std::int64_t bytes) const;

  /// Most blocks one type may have (16 bytes each): a type that would need more is refused
  /// with std::bad_alloc (MPI_ERR_NO_MEM) before the memory is taken.
  static constexpr std::size_t kMaxBlocks = std::size_t{1} << 26;

  // --- constructors (MPI semantics; arguments are validated by the caller) ----------------
  // Sizes, extents and offsets that would not fit in 64 bits throw sempi::Error (class arg).
  static std::shared_ptr<const TypeMap> basic(Basic b, std::int64_t size, std::int64_t align);
  /// A pair { value; int } with the value's size and the int's offset in the C struct.
  static std::shared_ptr<const TypeMap> pair(Basic b, Basic value, std::int64_t value_size,
                                             std::int64_t int_offset, std::int64_t extent,
                                             std::int64_t align);
  /// `count` blocks of `blocklength` instances of `old`, `stride` bytes apart.
  static std::shared_ptr<const TypeMap> hvector(std::int64_t count, std::int64_t blocklength,
                                                std::int64_t stride, const TypeMap& old);
  static std::shared_ptr<const TypeMap> hindexed(std::span<const std::int64_t> blocklengths,
                                                 std::span<const std::int64_t> displacements,
                                                 const TypeMap& old);
  static std::shared_ptr<const TypeMap> structure(std::span<const std::int64_t> blocklengths,
                                                  std::span<const std::int64_t> displacements,
                                                  std::span<const TypeMap* const> types);
  static std::shared_ptr<const TypeMap> resized(const TypeMap& old, std::int64_t lb,
                                                std::int64_t extent);

 private:
  void append_block(std::int64_t offset, std::int64_t length);
  void append_run(const Run& run);
  void append_instance(const TypeMap& old, std::int64_t displacement);
  /// `count` instances of `old` laid end to end from `displacement`.
  void append_instances(const TypeMap& old, std::int64_t displacement, std::int64_t count);
};

/// a * b, a + b and a - b, or sempi::Error (class arg) if the result does not fit in 64 bits.
std::int64_t checked_mul(std::int64_t a, std::int64_t b);
std::int64_t checked_add(std::int64_t a, std::int64_t b);
std::int64_t checked_sub(std::int64_t a, std::int64_t b);

/// Size in bytes and name ("MPI_INT") of a basic type.
const char* basic_name(Basic b) noexcept;

}  // namespace sempi::mpi
