#include "mpi/datatype_engine.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "sempi/error.hpp"

namespace sempi::mpi {

namespace {

[[noreturn]] void too_large(std::int64_t a, const char* op, std::int64_t b) {
  throw Error(ErrorClass::arg, "the datatype's size or extent does not fit in 64 bits (" +
                                   std::to_string(a) + " " + op + " " + std::to_string(b) + ")");
}

}  // namespace

std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) too_large(a, "*", b);
  return r;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) too_large(a, "+", b);
  return r;
}

std::int64_t checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) too_large(a, "-", b);
  return r;
}

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

// One bound of a type under construction. Explicit candidates (markers) override implicit
// ones (data); among candidates of the same kind the extreme one wins.
struct Bound {
  std::int64_t value = 0;
  bool is_explicit = false;
  bool empty = true;
  template <class Pick>
  void add(std::int64_t candidate, bool candidate_explicit, Pick pick) {
    if (empty || (candidate_explicit && !is_explicit)) {
      value = candidate;
      is_explicit = candidate_explicit;
      empty = false;
    } else if (candidate_explicit == is_explicit) {
      value = pick(value, candidate);
    }  // an implicit candidate cannot move an explicit bound
  }
};

// Bounds of `count` instances of `old` placed at displacement, displacement + extent, ...
struct Bounds {
  Bound lb, ub;
  std::int64_t true_lb = kMax, true_ub = kMin;
  void add(const TypeMap& old, std::int64_t displacement, std::int64_t count) {
    if (count <= 0) return;
    const std::int64_t last = checked_add(displacement, checked_mul(count - 1, old.extent()));
    const auto lower = [](std::int64_t a, std::int64_t b) { return std::min(a, b); };
    const auto upper = [](std::int64_t a, std::int64_t b) { return std::max(a, b); };
    lb.add(std::min(checked_add(displacement, old.lb), checked_add(last, old.lb)),
           old.explicit_lb, lower);
    ub.add(std::max(checked_add(displacement, old.ub), checked_add(last, old.ub)),
           old.explicit_ub, upper);
    // The true bounds are those of the bytes the type touches: a member without data (an
    // empty type, markers only) moves lb and ub but not them (MPI 3.1 section 4.1.8, and
    // Open MPI). Reductions and MPI_BOTTOM checks find a contiguous type's data by them.
    if (old.size == 0) return;
    true_lb = std::min({true_lb, checked_add(displacement, old.true_lb),
                        checked_add(last, old.true_lb)});
    true_ub = std::max({true_ub, checked_add(displacement, old.true_ub),
                        checked_add(last, old.true_ub)});
  }
  void store(TypeMap& t) const {
    if (lb.empty) return;  // empty typemap: all bounds stay 0
    t.lb = lb.value;
    t.ub = ub.value;
    t.explicit_lb = lb.is_explicit;
    t.explicit_ub = ub.is_explicit;
    (void)checked_sub(t.ub, t.lb);  // extent() must not overflow
    if (true_lb <= true_ub) {  // else no member has data: they stay 0
      (void)checked_sub(true_ub, true_lb);  // nor may the true extent overflow
      t.true_lb = true_lb;
      t.true_ub = true_ub;
    }
  }
};

// MPI 3.1 section 4.1.6: without an explicit upper bound, a derived type's extent is rounded
// up to a multiple of the strictest alignment of the entries in its typemap (the epsilon of
// ub), whatever constructor made it. Open MPI pads too, but after each block it adds, so with
// unaligned displacements out of order its extent can come out larger than this one.
void pad_extent_to_alignment(TypeMap& t) {
  const std::int64_t ext = t.extent();
  if (!t.explicit_ub && ext > 0 && t.align > 1 && ext % t.align != 0) {
    t.ub = checked_add(t.ub, t.align - ext % t.align);
  }
}

}  // namespace

std::int64_t TypeMap::elements() const {
  std::int64_t n = 0;
  for (const auto& r : runs) n += r.count;  // bounded: size is, and each element has a byte
  return n;
}

void TypeMap::append_block(std::int64_t offset, std::int64_t length) {
  if (length == 0) return;
  const std::int64_t end = checked_add(offset, length);
  size = checked_add(size, length);
  if (!blocks.empty() && blocks.back().offset + blocks.back().length == offset) {
    blocks.back().length = end - blocks.back().offset;
  } else {
    if (blocks.size() >= kMaxBlocks) throw std::bad_alloc();
    blocks.push_back({offset, length});
  }
}

void TypeMap::append_run(const Run& run) {
  if (run.count == 0) return;
  if (!runs.empty() && runs.back().basic == run.basic) {
    runs.back().count = checked_add(runs.back().count, run.count);
  } else {
    if (runs.size() >= kMaxBlocks) throw std::bad_alloc();
    runs.push_back(run);
  }
}

void TypeMap::append_instance(const TypeMap& old, std::int64_t displacement) {
  for (const auto& b : old.blocks) append_block(checked_add(displacement, b.offset), b.length);
  for (const auto& r : old.runs) append_run(r);
}

void TypeMap::append_instances(const TypeMap& old, std::int64_t displacement,
                               std::int64_t count) {
  if (count <= 0 || old.size == 0) return;  // nothing but bounds, which Bounds keeps
  // Instances of a contiguous type of one basic type form one block and one run: no loop, so
  // MPI_Type_contiguous(1 << 30, MPI_BYTE), the usual way to send large messages, is cheap.
  if (old.contiguous() && old.runs.size() == 1) {
    append_block(checked_add(displacement, old.blocks[0].offset), checked_mul(count, old.size));
    append_run({old.runs[0].basic, old.runs[0].size, checked_mul(count, old.runs[0].count)});
    return;
  }
  const std::int64_t extent = old.extent();
  (void)checked_add(displacement, checked_mul(count - 1, extent));  // then no step overflows
  for (std::int64_t j = 0; j < count; ++j) append_instance(old, displacement + j * extent);
}

void TypeMap::pack(const std::byte* base, std::int64_t count, std::byte* out) const {
  const std::int64_t ext = extent();
  for (std::int64_t i = 0; i < count; ++i) {
    const std::byte* instance = base + i * ext;
    for (const auto& b : blocks) {
      std::memcpy(out, instance + b.offset, static_cast<std::size_t>(b.length));
      out += b.length;
    }
  }
}

void TypeMap::unpack(const std::byte* in, std::int64_t bytes, std::int64_t count,
                     std::byte* base) const {
  const std::int64_t ext = extent();
  for (std::int64_t i = 0; i < count && bytes > 0; ++i) {
    std::byte* instance = base + i * ext;
    for (const auto& b : blocks) {
      const std::int64_t n = std::min(b.length, bytes);
      std::memcpy(instance + b.offset, in, static_cast<std::size_t>(n));
      in += n;
      bytes -= n;
      if (bytes == 0) return;
    }
  }
}

std::int64_t TypeMap::elements_in(std::int64_t bytes) const {
  if (size == 0) return 0;
  std::int64_t n = (bytes / size) * elements();
  std::int64_t rest = bytes % size;
  for (const auto& r : runs) {
    if (rest == 0) break;
    const std::int64_t run_bytes = r.size * r.count;
    if (rest >= run_bytes) {
      n += r.count;
      rest -= run_bytes;
    } else {
      if (rest % r.size != 0) return -1;
      n += rest / r.size;
      rest = 0;
    }
  }
  return n;
}

std::shared_ptr<const TypeMap> TypeMap::basic(Basic b, std::int64_t size, std::int64_t align) {
  auto t = std::make_shared<TypeMap>();
  t->append_block(0, size);
  t->append_run({b, size, 1});
  t->ub = t->true_ub = size;
  t->align = align;
  t->reduce_basic = b;
  t->reduce_count = 1;
  return t;
}

std::shared_ptr<const TypeMap> TypeMap::pair(Basic b, Basic value, std::int64_t value_size,
                                             std::int64_t int_offset, std::int64_t extent,
                                             std::int64_t align) {
  auto t = std::make_shared<TypeMap>();
  t->append_block(0, value_size);
  t->append_block(int_offset, static_cast<std::int64_t>(sizeof(int)));
  t->append_run({value, value_size, 1});
  t->append_run({Basic::int_, static_cast<std::int64_t>(sizeof(int)), 1});
  t->ub = extent;
  t->true_ub = int_offset + static_cast<std::int64_t>(sizeof(int));
  t->align = align;
  t->reduce_basic = b;
  t->reduce_count = 1;
  return t;
}

std::shared_ptr<const TypeMap> TypeMap::hvector(std::int64_t count, std::int64_t blocklength,
                                                std::int64_t stride, const TypeMap& old) {
  auto t = std::make_shared<TypeMap>();
  Bounds bounds;
  if (count > 0) (void)checked_mul(count - 1, stride);  // then no i * stride overflows
  // Blocks that do not touch stay apart: refuse at once what would pass kMaxBlocks, before
  // gigabytes are spent on the way there.
  const bool blocks_touch = old.contiguous() && stride == checked_mul(blocklength, old.extent());
  if (!blocks_touch && old.size > 0 && blocklength > 0 &&
      static_cast<std::uint64_t>(count) > kMaxBlocks) {
    throw std::bad_alloc();
  }
  if (blocks_touch) {  // the blocks are one run of instances: no loop over them
    const std::int64_t instances = checked_mul(count, blocklength);
    t->append_instances(old, 0, instances);
    bounds.add(old, 0, instances);
  } else {
    for (std::int64_t i = 0; i < count; ++i) {
      t->append_instances(old, i * stride, blocklength);
      bounds.add(old, i * stride, blocklength);
    }
  }
  bounds.store(*t);
  t->align = t->size > 0 ? old.align : 1;  // an empty typemap has no entry to align
  pad_extent_to_alignment(*t);
  t->reduce_basic = old.reduce_basic;
  t->reduce_count = checked_mul(old.reduce_count, checked_mul(count, blocklength));
  return t;
}

std::shared_ptr<const TypeMap> TypeMap::hindexed(std::span<const std::int64_t> blocklengths,
                                                 std::span<const std::int64_t> displacements,
                                                 const TypeMap& old) {
  auto t = std::make_shared<TypeMap>();
  Bounds bounds;
  std::int64_t instances = 0;
  for (std::size_t i = 0; i < blocklengths.size(); ++i) {
    t->append_instances(old, displacements[i], blocklengths[i]);
    bounds.add(old, displacements[i], blocklengths[i]);
    instances = checked_add(instances, blocklengths[i]);
  }
  bounds.store(*t);
  t->align = t->size > 0 ? old.align : 1;  // an empty typemap has no entry to align
  pad_extent_to_alignment(*t);
  t->reduce_basic = old.reduce_basic;
  t->reduce_count = checked_mul(old.reduce_count, instances);
  return t;
}

std::shared_ptr<const TypeMap> TypeMap::structure(std::span<const std::int64_t> blocklengths,
                                                  std::span<const std::int64_t> displacements,
                                                  std::span<const TypeMap* const> types) {
  auto t = std::make_shared<TypeMap>();
  Bounds bounds;
  bool first = true;
  for (std::size_t i = 0; i < blocklengths.size(); ++i) {
    const TypeMap& old = *types[i];
    t->append_instances(old, displacements[i], blocklengths[i]);
    bounds.add(old, displacements[i], blocklengths[i]);
    if (blocklengths[i] == 0) continue;
    if (old.size > 0) t->align = std::max(t->align, old.align);  // entries to align
    if (first) {
      t->reduce_basic = old.reduce_basic;
      first = false;
    } else if (t->reduce_basic != old.reduce_basic) {
      t->reduce_basic = Basic::none;
    }
    t->reduce_count = checked_add(t->reduce_count, checked_mul(old.reduce_count, blocklengths[i]));
  }
  if (t->reduce_basic == Basic::none) t->reduce_count = 0;
  bounds.store(*t);
  pad_extent_to_alignment(*t);  // as a C struct is padded
  return t;
}

std::shared_ptr<const TypeMap> TypeMap::resized(const TypeMap& old, std::int64_t lb,
                                                std::int64_t extent) {
  auto t = std::make_shared<TypeMap>(old);
  t->lb = lb;
  t->ub = checked_add(lb, extent);
  t->explicit_lb = true;
  t->explicit_ub = true;
  return t;
}

const char* basic_name(Basic b) noexcept {
  switch (b) {
    case Basic::none: return "";
    case Basic::char_: return "MPI_CHAR";
    case Basic::schar: return "MPI_SIGNED_CHAR";
    case Basic::uchar: return "MPI_UNSIGNED_CHAR";
    case Basic::byte: return "MPI_BYTE";
    case Basic::packed: return "MPI_PACKED";
    case Basic::short_: return "MPI_SHORT";
    case Basic::ushort: return "MPI_UNSIGNED_SHORT";
    case Basic::int_: return "MPI_INT";
    case Basic::uint: return "MPI_UNSIGNED";
    case Basic::long_: return "MPI_LONG";
    case Basic::ulong: return "MPI_UNSIGNED_LONG";
    case Basic::llong: return "MPI_LONG_LONG";
    case Basic::ullong: return "MPI_UNSIGNED_LONG_LONG";
    case Basic::float_: return "MPI_FLOAT";
    case Basic::double_: return "MPI_DOUBLE";
    case Basic::ldouble: return "MPI_LONG_DOUBLE";
    case Basic::wchar: return "MPI_WCHAR";
    case Basic::bool_: return "MPI_C_BOOL";
    case Basic::i8: return "MPI_INT8_T";
    case Basic::i16: return "MPI_INT16_T";
    case Basic::i32: return "MPI_INT32_T";
    case Basic::i64: return "MPI_INT64_T";
    case Basic::u8: return "MPI_UINT8_T";
    case Basic::u16: return "MPI_UINT16_T";
    case Basic::u32: return "MPI_UINT32_T";
    case Basic::u64: return "MPI_UINT64_T";
    case Basic::aint: return "MPI_AINT";
    case Basic::offset: return "MPI_OFFSET";
    case Basic::count: return "MPI_COUNT";
    case Basic::cfloat: return "MPI_C_FLOAT_COMPLEX";
    case Basic::cdouble: return "MPI_C_DOUBLE_COMPLEX";
    case Basic::cldouble: return "MPI_C_LONG_DOUBLE_COMPLEX";
    case Basic::float_int: return "MPI_FLOAT_INT";
    case Basic::double_int: return "MPI_DOUBLE_INT";
    case Basic::long_int: return "MPI_LONG_INT";
    case Basic::two_int: return "MPI_2INT";
    case Basic::short_int: return "MPI_SHORT_INT";
    case Basic::ldouble_int: return "MPI_LONG_DOUBLE_INT";
  }
  return "";
}

}  // namespace sempi::mpi
