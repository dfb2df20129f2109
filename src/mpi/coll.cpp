// MPI collectives over sempi::Communicator's byte-level collectives.
//
// Data movement: contiguous datatypes go to the collective as they are; others are packed into
// a staging area first and unpacked after (the same engine as point-to-point). Reductions see
// their data as a stream of elements: for builtin operations, the datatype's one basic type in
// its C layout (so MPI_DOUBLE_INT keeps its padding, as sempi::Op expects); for MPI_Op_create
// operations, opaque elements of one packed datatype instance each, which the wrapper unpacks
// into the user's layout around the call of the user's function.

#include <climits>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "mpi/collective_form.hpp"
#include "mpi/request_impl.hpp"

namespace sempi::mpi {
namespace {

std::optional<BasicType> to_basic_type(Basic b) {
  switch (b) {
    case Basic::char_: return BasicType::char_;
    case Basic::schar: return BasicType::signed_char;
    case Basic::uchar: return BasicType::unsigned_char;
    case Basic::byte: return BasicType::byte;
    case Basic::short_: return BasicType::short_;
    case Basic::ushort: return BasicType::unsigned_short;
    case Basic::int_: return BasicType::int_;
    case Basic::uint: return BasicType::unsigned_;
    case Basic::long_: return BasicType::long_;
    case Basic::ulong: return BasicType::unsigned_long;
    case Basic::llong: return BasicType::long_long;
    case Basic::ullong: return BasicType::unsigned_long_long;
    case Basic::float_: return BasicType::float_;
    case Basic::double_: return BasicType::double_;
    case Basic::ldouble: return BasicType::long_double;
    case Basic::wchar: return BasicType::wchar;
    case Basic::bool_: return BasicType::bool_;
    case Basic::i8: return BasicType::int8;
    case Basic::i16: return BasicType::int16;
    case Basic::i32: return BasicType::int32;
    case Basic::i64: return BasicType::int64;
    case Basic::u8: return BasicType::uint8;
    case Basic::u16: return BasicType::uint16;
    case Basic::u32: return BasicType::uint32;
    case Basic::u64: return BasicType::uint64;
    case Basic::aint: return sizeof(MPI_Aint) == sizeof(long) ? BasicType::long_
                                                               : BasicType::long_long;
    case Basic::offset: case Basic::count: return BasicType::long_long;
    case Basic::cfloat: return BasicType::complex_float;
    case Basic::cdouble: return BasicType::complex_double;
    case Basic::cldouble: return BasicType::complex_long_double;
    case Basic::float_int: return BasicType::float_int;
    case Basic::double_int: return BasicType::double_int;
    case Basic::long_int: return BasicType::long_int;
    case Basic::two_int: return BasicType::two_int;
    case Basic::short_int: return BasicType::short_int;
    case Basic::ldouble_int: return BasicType::long_double_int;
    case Basic::packed: case Basic::none: break;
  }
  return std::nullopt;
}

std::size_t bytes_of(std::int64_t count, const TypeMap& t) {
  return static_cast<std::size_t>(data_bytes(count, t));
}

// --- plain data movement -------------------------------------------------------------------------

// The block a rank sends itself goes from its send buffer to its receive buffer: both must
// hold the same bytes (as the v-forms check), or the copy reads past one or truncates.
void check_own_block(std::size_t send_bytes, std::size_t recv_bytes) {
  if (send_bytes != recv_bytes) {
    fail(MPI_ERR_COUNT, "this rank sends itself " + std::to_string(send_bytes) +
                            " bytes but receives " + std::to_string(recv_bytes) +
                            " (sendcount and sendtype must match recvcount and recvtype)");
  }
}

// Data to send: the user's memory if contiguous, else packed into `staging`.
const void* send_view(const void* buf, std::int64_t count, const TypeMap& t, Staging& staging) {
  check_data_buffer(buf, count, t);
  const std::size_t bytes = bytes_of(count, t);
  if (t.contiguous()) return bytes == 0 ? buf : at(buf, t.blocks[0].offset);
  staging.allocate(bytes);
  t.pack(at(buf, 0), count, staging.data.get());
  return staging.data.get();
}

// Where to receive: the user's memory if contiguous, else `staging` (unpack with recv_done).
// With `preload`, the staging area starts with the buffer's current contents (IN_PLACE).
void* recv_view(void* buf, std::int64_t count, const TypeMap& t, Staging& staging,
                bool preload = false) {
  check_data_buffer(buf, count, t);
  const std::size_t bytes = bytes_of(count, t);
  if (t.contiguous()) return bytes == 0 ? buf : at(buf, t.blocks[0].offset);
  staging.allocate(bytes);
  if (preload) t.pack(at(buf, 0), count, staging.data.get());
  return staging.data.get();
}

void recv_done(void* buf, std::int64_t count, const TypeMap& t, const Staging& staging) {
  if (staging.data) t.unpack(staging.data.get(), count * t.size, count, at(buf, 0));
}

// Packed byte counts and displacements of variable blocks, in rank order.
struct Blocks {
  std::vector<std::size_t> bytes;
  std::vector<std::size_t> displs;
  std::size_t total = 0;
  std::vector<int> counts;                // the user's, per block
  std::vector<std::int64_t> user_displs;  // in bytes, in the user's buffer
};

void check_data_buffer(const void* buf, const TypeMap& t, const Blocks& b) {
  refuse_in_place(buf);
  for (std::size_t k = 0; k < b.counts.size(); ++k) {
    check_data_buffer(buf, b.counts[k], t, b.user_displs[k]);
  }
}

// Blocks as the collective sees them: user displacements when the type is contiguous (relative
// to the first data byte), else consecutive in a staging area.
Blocks blocks_of(const int counts[], const int displs[], int n, const TypeMap& t) {
  require_input(counts, "array of counts");
  require_input(displs, "array of displacements");
  Blocks b;
  for (int r = 0; r < n; ++r) {
    check_count(counts[r]);
    b.counts.push_back(counts[r]);
    std::int64_t displ = 0;
    if (__builtin_mul_overflow(static_cast<std::int64_t>(displs[r]), t.extent(), &displ)) {
      fail(MPI_ERR_ARG,
           "displacement " + std::to_string(displs[r]) + " times the type's extent overflows");
    }
    b.user_displs.push_back(displ);
    b.bytes.push_back(bytes_of(counts[r], t));
    if (t.contiguous()) {
      // May be negative (MPI allows it): as an offset it wraps, as pointer arithmetic does. The
      // blocks' span, when it is needed (a copy in place), comes from user_displs.
      b.displs.push_back(static_cast<std::size_t>(displ));
    } else {
      b.displs.push_back(b.total);
      b.total += b.bytes.back();
    }
  }
  return b;
}

const void* send_blocks_view(const void* buf, const int counts[], const int displs[], int n,
                             const TypeMap& t, const Blocks& b, Staging& staging) {
  check_data_buffer(buf, t, b);
  if (t.contiguous()) return t.size == 0 || t.blocks.empty() ? buf : at(buf, t.blocks[0].offset);
  staging.allocate(b.total);
  for (int r = 0; r < n; ++r) {
    const auto k = static_cast<std::size_t>(r);
    t.pack(at(buf, displs[r] * t.extent()), counts[r], staging.data.get() + b.displs[k]);
  }
  return staging.data.get();
}

void* recv_blocks_view(void* buf, const TypeMap& t, const Blocks& b, Staging& staging) {
  check_data_buffer(buf, t, b);
  if (t.contiguous()) return t.size == 0 || t.blocks.empty() ? buf : at(buf, t.blocks[0].offset);
  staging.allocate(b.total);
  return staging.data.get();
}

void recv_blocks_done(void* buf, const int counts[], const int displs[], int n, const TypeMap& t,
                      const Blocks& b, const Staging& staging, int skip = -1) {
  if (!staging.data) return;
  for (int r = 0; r < n; ++r) {
    if (r == skip) continue;
    const auto k = static_cast<std::size_t>(r);
    t.unpack(staging.data.get() + b.displs[k], static_cast<std::int64_t>(b.bytes[k]), counts[r],
             at(buf, displs[r] * t.extent()));
  }
}

// --- reductions ----------------------------------------------------------------------------------

// How one reduction call sees its data (see the file comment).
class Reduction {
 public:
  Reduction(MPI_Datatype datatype, MPI_Op op) : type_(type_of(datatype)) {
    const auto& o = op_of(op);
    if (o.builtin) {
      const auto basic = to_basic_type(type_->reduce_basic);
      if (!basic) {
        fail(MPI_ERR_OP, o.op.name() + " is not defined on this datatype (builtin operations "
                                       "need elements of one basic type)");
      }
      element_ = &basic_map(type_->reduce_basic);
      per_instance_ = type_->reduce_count;
      et_ = ElementType(*basic);
      op_ = o.op;
      op_.check(et_, "reduction");
    } else {
      et_ = ElementType::opaque_of(static_cast<std::size_t>(type_->size));
      op_ = Op::user(user_wrapper(o.fn, type_, retain_type(datatype)), o.commute, "MPI_Op_create");
    }
  }

  /// The count as basic elements (a pair type or a user type's instances hold several). The
  /// reduction engine counts in int: more is MPI_ERR_COUNT, not a silently shorter reduction.
  [[nodiscard]] int elements(std::int64_t count) const {
    std::int64_t n = 0;
    if (__builtin_mul_overflow(count, per_instance_, &n) || n > INT_MAX) {
      fail(MPI_ERR_COUNT, std::to_string(count) + " instances of this datatype are " +
                              "more elements than a reduction takes (at most " +
                              std::to_string(INT_MAX) + ")");
    }
    return static_cast<int>(n);
  }
  [[nodiscard]] const ElementType& element_type() const { return et_; }
  /// Bytes of `count` instances as the element stream the reduction engine works on.
  [[nodiscard]] std::size_t stream_bytes(std::int64_t count) const {
    return static_cast<std::size_t>(elements(count)) * et_.size;
  }
  [[nodiscard]] const Op& op() const { return op_; }

  /// `count` instances at `buf` as an element stream (the user's memory when it already is).
  const void* input(const void* buf, std::int64_t count, Staging& s) const {
    (void)elements(count);  // too many is refused before anything is packed
    if (buf == MPI_IN_PLACE) return InPlaceT::address();
    check_data_buffer(buf, count, *type_);
    if (direct()) return direct_pointer(buf, count);
    to_stream(buf, count, s);
    return s.data.get();
  }
  /// Where the result for `count` instances at `buf` goes; with `preload` it starts with the
  /// buffer's contents (IN_PLACE input).
  void* output(void* buf, std::int64_t count, Staging& s, bool preload) const {
    check_data_buffer(buf, count, *type_);
    (void)elements(count);  // too many is refused before anything is packed
    if (direct()) return const_cast<void*>(direct_pointer(buf, count));
    if (preload) {
      to_stream(buf, count, s);
    } else {
      s.allocate(stream_bytes(count));
    }
    return s.data.get();
  }
  /// Copies a staged result back into the user's layout.
  void finish(void* buf, std::int64_t count, const Staging& s) const {
    if (!s.data) return;
    if (element_ != nullptr && !element_->contiguous()) {
      Staging packed;
      packed.allocate(bytes_of(count, *type_));
      element_->pack(s.data.get(), count * per_instance_, packed.data.get());
      type_->unpack(packed.data.get(), count * type_->size, count, at(buf, 0));
    } else {
      type_->unpack(s.data.get(), count * type_->size, count, at(buf, 0));
    }
  }
  /// Applies the operation locally (MPI_Reduce_local).
  void apply(const void* in, void* inout, std::int64_t count) const {
    op_.apply(in, inout, elements(count), et_);
  }

 private:
  // The function receives the datatype's handle, which it may query: the wrapper holds it, so
  // a program may free the datatype while a nonblocking reduction is still pending.
  static Op::Function user_wrapper(MPI_User_function* fn, std::shared_ptr<const TypeMap> type,
                                   std::shared_ptr<sempi_mpi_datatype> handle) {
    return [fn, type = std::move(type), handle = std::move(handle)](
               const void* in, void* inout, int count, const ElementType&) {
      MPI_Datatype dt = handle.get();
      int len = count;
      if (type->contiguous()) {
        // Element 0's data starts at its true lower bound in the user's layout.
        fn(at(in, -type->true_lb), at(inout, -type->true_lb), &len, &dt);
        return;
      }
      // Lay both operands out as the user's datatype describes them, call, pack the result.
      const std::int64_t span = count == 0 ? 0 : (count - 1) * type->extent();
      const std::int64_t lo = type->true_lb + std::min<std::int64_t>(0, span);
      const std::int64_t hi = type->true_ub + std::max<std::int64_t>(0, span);
      Staging a;
      Staging b;
      a.allocate(static_cast<std::size_t>(hi - lo));
      b.allocate(static_cast<std::size_t>(hi - lo));
      std::byte* base_a = at(a.data.get(), -lo);
      std::byte* base_b = at(b.data.get(), -lo);
      const std::int64_t bytes = count * type->size;
      type->unpack(static_cast<const std::byte*>(in), bytes, count, base_a);
      type->unpack(static_cast<const std::byte*>(inout), bytes, count, base_b);
      fn(base_a, base_b, &len, &dt);
      type->pack(base_b, count, static_cast<std::byte*>(inout));
    };
  }

  // The user's memory is already the element stream: a contiguous type whose elements need no
  // padding, or exactly the padded pair type itself.
  [[nodiscard]] bool direct() const {
    if (element_ == nullptr || element_->contiguous()) return type_->contiguous();
    return type_->reduce_count == 1 && type_->extent() == element_->extent() &&
           type_->blocks.size() == element_->blocks.size() &&
           std::equal(type_->blocks.begin(), type_->blocks.end(), element_->blocks.begin(),
                      [](const Block& x, const Block& y) {
                        return x.offset == y.offset && x.length == y.length;
                      });
  }
  [[nodiscard]] const void* direct_pointer(const void* buf, std::int64_t count) const {
    if (element_ != nullptr && !element_->contiguous()) return buf;
    return count * type_->size == 0 ? buf : at(buf, type_->blocks[0].offset);
  }
  void to_stream(const void* buf, std::int64_t count, Staging& s) const {
    if (element_ != nullptr && !element_->contiguous()) {
      Staging packed;
      packed.allocate(bytes_of(count, *type_));
      type_->pack(at(buf, 0), count, packed.data.get());
      s.allocate(stream_bytes(count));
      element_->unpack(packed.data.get(), count * type_->size, count * per_instance_,
                       s.data.get());
      return;
    }
    s.allocate(bytes_of(count, *type_));
    type_->pack(at(buf, 0), count, s.data.get());
  }

  std::shared_ptr<const TypeMap> type_;
  const TypeMap* element_ = nullptr;  // builtin ops: the basic type's layout
  std::int64_t per_instance_ = 1;
  ElementType et_;
  Op op_;
};

void check_root(const Communicator& c, int root) {
  if (root < 0 || root >= c.size()) {
    fail(MPI_ERR_ROOT, "root " + std::to_string(root) + " is out of range for a communicator of "
                       "size " + std::to_string(c.size()));
  }
}

}  // namespace
}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it
using sempi::InPlaceT;
using sempi::detail::OpKind;

namespace {

int gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
           MPI_Datatype recvtype, int root, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::gather, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is valid only at the root");
    std::vector<Staging> staging(2);  // send, receive
    const void* send = InPlaceT::address();
    std::size_t bytes = 0;
    if (!in_place) {
      check_count(sendcount);
      const auto& st = type_of(sendtype);
      send = send_view(sendbuf, sendcount, *st, staging[0]);
      bytes = bytes_of(sendcount, *st);
    }
    void* recv = nullptr;
    Unpack unpack;
    if (is_root) {
      check_count(recvcount);
      const auto& rt = type_of(recvtype);
      if (!in_place) check_own_block(bytes, bytes_of(recvcount, *rt));
      bytes = bytes_of(recvcount, *rt);
      const std::int64_t total = static_cast<std::int64_t>(recvcount) * c.size();
      recv = recv_view(recvbuf, total, *rt, staging[1], false);
      if (in_place && staging[1].data) {  // the root's own block must survive the unpack
        rt->pack(at(recvbuf, static_cast<std::int64_t>(root) * recvcount * rt->extent()), recvcount,
                 staging[1].data.get() + static_cast<std::size_t>(root) * bytes);
      }
      unpack = if_staged(staging[1], [recvbuf, total, rt](const std::vector<Staging>& s) {
        recv_done(recvbuf, total, *rt, s[1]);
      });
    }
    run_or_start(
        form, comm, staging, std::move(unpack), [&] { c.gather_bytes(send, bytes, recv, root); },
        [&] { return c.igather_bytes(send, bytes, recv, root); });
  });
}

int scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
            MPI_Datatype recvtype, int root, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::scatter, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const bool in_place = recvbuf == MPI_IN_PLACE;
    if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is valid only at the root");
    std::vector<Staging> staging(2);  // send, receive
    const void* send = nullptr;
    std::size_t bytes = 0;
    if (is_root) {
      check_count(sendcount);
      const auto& st = type_of(sendtype);
      send = send_view(sendbuf, static_cast<std::int64_t>(sendcount) * c.size(), *st, staging[0]);
      bytes = bytes_of(sendcount, *st);
    }
    void* recv = InPlaceT::address();
    Unpack unpack;
    if (!in_place) {
      check_count(recvcount);
      const auto& rt = type_of(recvtype);
      if (is_root) check_own_block(bytes, bytes_of(recvcount, *rt));
      recv = recv_view(recvbuf, recvcount, *rt, staging[1]);
      bytes = bytes_of(recvcount, *rt);
      unpack = if_staged(staging[1], [recvbuf, recvcount, rt](const std::vector<Staging>& s) {
        recv_done(recvbuf, recvcount, *rt, s[1]);
      });
    }
    run_or_start(
        form, comm, staging, std::move(unpack), [&] { c.scatter_bytes(send, recv, bytes, root); },
        [&] { return c.iscatter_bytes(send, recv, bytes, root); });
  });
}

int allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::allgather, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    check_count(recvcount);
    const auto& rt = type_of(recvtype);
    const std::size_t bytes = bytes_of(recvcount, *rt);
    const std::int64_t total = static_cast<std::int64_t>(recvcount) * c.size();
    std::vector<Staging> staging(2);  // send, receive
    const void* send = InPlaceT::address();
    if (!in_place) {
      check_count(sendcount);
      const auto& st = type_of(sendtype);
      check_own_block(bytes_of(sendcount, *st), bytes);
      send = send_view(sendbuf, sendcount, *st, staging[0]);
    }
    void* recv = recv_view(recvbuf, total, *rt, staging[1], in_place);
    Unpack unpack = if_staged(staging[1], [recvbuf, total, rt](const std::vector<Staging>& s) {
      recv_done(recvbuf, total, *rt, s[1]);
    });
    run_or_start(
        form, comm, staging, std::move(unpack), [&] { c.allgather_bytes(send, bytes, recv); },
        [&] { return c.iallgather_bytes(send, bytes, recv); });
  });
}

int alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::alltoall, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    check_count(recvcount);
    const auto& rt = type_of(recvtype);
    const std::int64_t total = static_cast<std::int64_t>(recvcount) * c.size();
    std::vector<Staging> staging(2);  // send, receive
    const void* send = InPlaceT::address();
    if (!in_place) {
      check_count(sendcount);
      const auto& st = type_of(sendtype);
      check_own_block(bytes_of(sendcount, *st), bytes_of(recvcount, *rt));
      send = send_view(sendbuf, static_cast<std::int64_t>(sendcount) * c.size(), *st, staging[0]);
    }
    void* recv = recv_view(recvbuf, total, *rt, staging[1], in_place);
    Unpack unpack = if_staged(staging[1], [recvbuf, total, rt](const std::vector<Staging>& s) {
      recv_done(recvbuf, total, *rt, s[1]);
    });
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.alltoall_bytes(send, bytes_of(recvcount, *rt), recv); },
        [&] { return c.ialltoall_bytes(send, bytes_of(recvcount, *rt), recv); });
  });
}

int reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
           int root, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::reduce, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    check_count(count);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    if (sendbuf == MPI_IN_PLACE && !is_root) {
      fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is valid only at the root");
    }
    auto red = std::make_shared<const Reduction>(datatype, op);
    std::vector<Staging> staging(2);  // input, output
    const void* send = red->input(sendbuf, count, staging[0]);
    void* recv =
        is_root ? red->output(recvbuf, count, staging[1], sendbuf == MPI_IN_PLACE) : nullptr;
    Unpack unpack;
    if (is_root) {
      unpack = if_staged(staging[1], [red, recvbuf, count](const std::vector<Staging>& s) {
        red->finish(recvbuf, count, s[1]);
      });
    }
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] {
          c.reduce_raw(send, recv, red->elements(count), red->element_type(), red->op(), root);
        },
        [&] {
          return c.ireduce_raw(send, recv, red->elements(count), red->element_type(), red->op(),
                               root);
        });
  });
}

int gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
            MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::gather, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is valid only at the root");
    std::vector<Staging> staging(2);  // send, receive
    const void* send = InPlaceT::address();
    std::size_t bytes = 0;
    if (!in_place) {
      check_count(sendcount);
      const auto& st = type_of(sendtype);
      send = send_view(sendbuf, sendcount, *st, staging[0]);
      bytes = bytes_of(sendcount, *st);
    }
    void* recv = nullptr;
    Blocks b;
    Unpack unpack;
    if (is_root) {
      const auto& rt = type_of(recvtype);
      b = blocks_of(recvcounts, displs, c.size(), *rt);
      if (in_place) bytes = b.bytes[static_cast<std::size_t>(root)];
      recv = recv_blocks_view(recvbuf, *rt, b, staging[1]);
      const int n = c.size();
      unpack =
          if_staged(staging[1], [recvbuf, counts = std::vector<int>(recvcounts, recvcounts + n),
                                 where = std::vector<int>(displs, displs + n), n, rt, b,
                                 skip = in_place ? root : -1](const std::vector<Staging>& s) {
            recv_blocks_done(recvbuf, counts.data(), where.data(), n, *rt, b, s[1], skip);
          });
    }
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.gatherv_bytes(send, bytes, recv, b.bytes, b.displs, root); },
        [&] { return c.igatherv_bytes(send, bytes, recv, b.bytes, b.displs, root); });
  });
}

int scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
             void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
             const Form& form) {
  return guarded_collective(comm, OpKind::scatter, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    check_root(c, root);
    const bool is_root = c.rank() == root;
    const bool in_place = recvbuf == MPI_IN_PLACE;
    if (in_place && !is_root) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is valid only at the root");
    std::vector<Staging> staging(2);  // send, receive
    Blocks b;
    const void* send = nullptr;
    if (is_root) {
      const auto& st = type_of(sendtype);
      b = blocks_of(sendcounts, displs, c.size(), *st);
      send = send_blocks_view(sendbuf, sendcounts, displs, c.size(), *st, b, staging[0]);
    }
    void* recv = InPlaceT::address();
    std::size_t bytes = is_root ? b.bytes[static_cast<std::size_t>(root)] : 0;
    Unpack unpack;
    if (!in_place) {
      check_count(recvcount);
      const auto& rt = type_of(recvtype);
      if (is_root) check_own_block(bytes, bytes_of(recvcount, *rt));
      recv = recv_view(recvbuf, recvcount, *rt, staging[1]);
      bytes = bytes_of(recvcount, *rt);
      unpack = if_staged(staging[1], [recvbuf, recvcount, rt](const std::vector<Staging>& s) {
        recv_done(recvbuf, recvcount, *rt, s[1]);
      });
    }
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.scatterv_bytes(send, b.bytes, b.displs, recv, bytes, root); },
        [&] { return c.iscatterv_bytes(send, b.bytes, b.displs, recv, bytes, root); });
  });
}

int allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
               const Form& form) {
  return guarded_collective(comm, OpKind::allgather, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const auto& rt = type_of(recvtype);
    const int n = c.size();
    const Blocks b = blocks_of(recvcounts, displs, n, *rt);
    std::vector<Staging> staging(2);  // send, receive
    const void* send = InPlaceT::address();
    std::size_t bytes = b.bytes[static_cast<std::size_t>(c.rank())];
    if (!in_place) {
      check_count(sendcount);
      const auto& st = type_of(sendtype);
      send = send_view(sendbuf, sendcount, *st, staging[0]);
      bytes = bytes_of(sendcount, *st);
    }
    void* recv = recv_blocks_view(recvbuf, *rt, b, staging[1]);
    if (in_place && staging[1].data) {  // this rank's block comes from recvbuf
      const int me = c.rank();
      rt->pack(at(recvbuf, displs[me] * rt->extent()), recvcounts[me],
               staging[1].data.get() + b.displs[static_cast<std::size_t>(me)]);
    }
    Unpack unpack =
        if_staged(staging[1], [recvbuf, counts = std::vector<int>(recvcounts, recvcounts + n),
                               where = std::vector<int>(displs, displs + n), n, rt,
                               b](const std::vector<Staging>& s) {
          recv_blocks_done(recvbuf, counts.data(), where.data(), n, *rt, b, s[1]);
        });
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.allgatherv_bytes(send, bytes, recv, b.bytes, b.displs); },
        [&] { return c.iallgatherv_bytes(send, bytes, recv, b.bytes, b.displs); });
  });
}

int alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
              MPI_Datatype recvtype, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::alltoall, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    const int n = c.size();
    const auto& rt = type_of(recvtype);
    const Blocks rb = blocks_of(recvcounts, rdispls, n, *rt);
    // IN_PLACE: what is sent is the receive buffer's current contents, so copy it first.
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const void* sbuf = in_place ? recvbuf : sendbuf;
    const int* scounts = in_place ? recvcounts : sendcounts;
    const int* sdisp = in_place ? rdispls : sdispls;
    const auto& st = in_place ? rt : type_of(sendtype);
    Blocks sb = blocks_of(scounts, sdisp, n, *st);
    std::vector<Staging> staging(2);  // send, receive
    const void* send = send_blocks_view(sbuf, scounts, sdisp, n, *st, sb, staging[0]);
    if (in_place && !staging[0].data) {
      // Contiguous blocks sent from where they are received: copied first, the whole span
      // from the lowest displacement (negative ones too) to the highest end, and the
      // displacements rebased onto the copy.
      std::int64_t low = std::numeric_limits<std::int64_t>::max();
      std::int64_t high = std::numeric_limits<std::int64_t>::min();
      for (std::size_t k = 0; k < sb.bytes.size(); ++k) {
        if (sb.bytes[k] == 0) continue;
        low = std::min(low, sb.user_displs[k]);
        high = std::max(high, sb.user_displs[k] + static_cast<std::int64_t>(sb.bytes[k]));
      }
      if (low > high) low = high = 0;  // nothing to send
      const auto span = static_cast<std::size_t>(high - low);
      staging[0].allocate(span);
      if (span > 0)
        std::memcpy(staging[0].data.get(), static_cast<const std::byte*>(send) + low, span);
      for (std::size_t k = 0; k < sb.bytes.size(); ++k) {
        sb.displs[k] = sb.bytes[k] == 0 ? 0 : static_cast<std::size_t>(sb.user_displs[k] - low);
      }
      send = staging[0].data.get();
    }
    void* recv = recv_blocks_view(recvbuf, *rt, rb, staging[1]);
    Unpack unpack =
        if_staged(staging[1], [recvbuf, counts = std::vector<int>(recvcounts, recvcounts + n),
                               where = std::vector<int>(rdispls, rdispls + n), n, rt,
                               rb](const std::vector<Staging>& s) {
          recv_blocks_done(recvbuf, counts.data(), where.data(), n, *rt, rb, s[1]);
        });
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.alltoallv_bytes(send, sb.bytes, sb.displs, recv, rb.bytes, rb.displs); },
        [&] { return c.ialltoallv_bytes(send, sb.bytes, sb.displs, recv, rb.bytes, rb.displs); });
  });
}

int reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::reduce_scatter, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    check_count(recvcount);
    auto red = std::make_shared<const Reduction>(datatype, op);
    const std::int64_t total = static_cast<std::int64_t>(recvcount) * c.size();
    const bool in_place = sendbuf == MPI_IN_PLACE;
    std::vector<Staging> staging(2);  // input, output
    const void* send = red->input(sendbuf, total, staging[0]);
    // In place, the whole input vector is in recvbuf and the result is its first block.
    void* recv = red->output(recvbuf, in_place ? total : recvcount, staging[1], in_place);
    Unpack unpack = if_staged(staging[1], [red, recvbuf, recvcount](const std::vector<Staging>& s) {
      red->finish(recvbuf, recvcount, s[1]);
    });
    const int elements = red->elements(recvcount);
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.reduce_scatter_block_raw(send, recv, elements, red->element_type(), red->op()); },
        [&] {
          return c.ireduce_scatter_block_raw(send, recv, elements, red->element_type(), red->op());
        });
  });
}

int reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, const Form& form) {
  return guarded_collective(comm, OpKind::reduce_scatter, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    auto red = std::make_shared<const Reduction>(datatype, op);
    require_input(recvcounts, "recvcounts");
    std::vector<int> counts;
    std::int64_t total = 0;
    for (int r = 0; r < c.size(); ++r) {
      check_count(recvcounts[r]);
      counts.push_back(red->elements(recvcounts[r]));
      total += recvcounts[r];
    }
    const int mine = recvcounts[c.rank()];
    const bool in_place = sendbuf == MPI_IN_PLACE;
    std::vector<Staging> staging(2);  // input, output
    const void* send = red->input(sendbuf, total, staging[0]);
    void* recv = red->output(recvbuf, in_place ? total : mine, staging[1], in_place);
    Unpack unpack = if_staged(staging[1], [red, recvbuf, mine](const std::vector<Staging>& s) {
      red->finish(recvbuf, mine, s[1]);
    });
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] { c.reduce_scatter_raw(send, recv, counts, red->element_type(), red->op()); },
        [&] { return c.ireduce_scatter_raw(send, recv, counts, red->element_type(), red->op()); });
  });
}

// MPI_Scan and MPI_Exscan (and their nonblocking forms) differ only in `exclusive`.
int scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
         MPI_Comm comm, bool exclusive, const Form& form) {
  const OpKind kind = exclusive ? OpKind::exscan : OpKind::scan;
  return guarded_collective(comm, kind, form.name, [&] {
    check_request(form);
    const auto& c = comm_of(comm);
    check_count(count);
    auto red = std::make_shared<const Reduction>(datatype, op);
    std::vector<Staging> staging(2);  // input, output
    const void* send = red->input(sendbuf, count, staging[0]);
    void* recv = nullptr;
    if (exclusive && c.rank() == 0 && recvbuf == nullptr && sendbuf != MPI_IN_PLACE) {
      // Rank 0's recvbuf is not significant for MPI_Exscan, so it may be null; the algorithm
      // still needs a receive area as workspace.
      staging[1].allocate(red->stream_bytes(count));
      recv = staging[1].data.get();
    } else {
      recv = red->output(recvbuf, count, staging[1], sendbuf == MPI_IN_PLACE);
    }
    Unpack unpack;
    if (!exclusive || c.rank() != 0) {  // exscan: rank 0's result is undefined
      unpack = if_staged(staging[1], [red, recvbuf, count](const std::vector<Staging>& s) {
        red->finish(recvbuf, count, s[1]);
      });
    }
    const int elements = red->elements(count);
    const auto t = red->element_type();
    run_or_start(
        form, comm, staging, std::move(unpack),
        [&] {
          if (exclusive) {
            c.exscan_raw(send, recv, elements, t, red->op());
          } else {
            c.scan_raw(send, recv, elements, t, red->op());
          }
        },
        [&] {
          return exclusive ? c.iexscan_raw(send, recv, elements, t, red->op())
                           : c.iscan_raw(send, recv, elements, t, red->op());
        });
  });
}

}  // namespace

extern "C" {

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                blocking("MPI_Gather"));
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                {"MPI_Igather", true, request});
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                 blocking("MPI_Scatter"));
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                 {"MPI_Iscatter", true, request});
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                   blocking("MPI_Allgather"));
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                   {"MPI_Iallgather", true, request});
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                  blocking("MPI_Alltoall"));
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                  {"MPI_Ialltoall", true, request});
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  return reduce(sendbuf, recvbuf, count, datatype, op, root, comm, blocking("MPI_Reduce"));
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  return reduce(sendbuf, recvbuf, count, datatype, op, root, comm, {"MPI_Ireduce", true, request});
}

int MPI_Barrier(MPI_Comm comm) {
  return guarded_collective(comm, OpKind::barrier, "MPI_Barrier", [&] { comm_of(comm).barrier(); });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return guarded_collective(comm, OpKind::bcast, "MPI_Bcast", [&] {
    const auto& c = comm_of(comm);
    check_count(count);
    check_root(c, root);
    const auto& t = type_of(datatype);
    Staging s;
    void* view = c.rank() == root ? const_cast<void*>(send_view(buffer, count, *t, s))
                                  : recv_view(buffer, count, *t, s);
    c.bcast_bytes(view, bytes_of(count, *t), root);
    if (c.rank() != root) recv_done(buffer, count, *t, s);
  });
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  return guarded_collective(comm, OpKind::allreduce, "MPI_Allreduce", [&] {
    const auto& c = comm_of(comm);
    check_count(count);
    const Reduction red(datatype, op);
    Staging in;
    Staging out;
    const void* send = red.input(sendbuf, count, in);
    void* recv = red.output(recvbuf, count, out, sendbuf == MPI_IN_PLACE);
    c.allreduce_raw(send, recv, red.elements(count), red.element_type(), red.op());
    red.finish(recvbuf, count, out);
  });
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  return gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                 blocking("MPI_Gatherv"));
}

int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request) {
  return gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                 {"MPI_Igatherv", true, request});
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
  return scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  blocking("MPI_Scatterv"));
}

int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request) {
  return scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  {"MPI_Iscatterv", true, request});
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  return allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                    blocking("MPI_Allgatherv"));
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  return allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                    {"MPI_Iallgatherv", true, request});
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                   comm, blocking("MPI_Alltoallv"));
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  return alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                   comm, {"MPI_Ialltoallv", true, request});
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm,
                              blocking("MPI_Reduce_scatter_block"));
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request) {
  return reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm,
                              {"MPI_Ireduce_scatter_block", true, request});
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                        blocking("MPI_Reduce_scatter"));
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                        {"MPI_Ireduce_scatter", true, request});
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm) {
  return scan(sendbuf, recvbuf, count, datatype, op, comm, false, blocking("MPI_Scan"));
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request* request) {
  return scan(sendbuf, recvbuf, count, datatype, op, comm, false, {"MPI_Iscan", true, request});
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm) {
  return scan(sendbuf, recvbuf, count, datatype, op, comm, true, blocking("MPI_Exscan"));
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  return scan(sendbuf, recvbuf, count, datatype, op, comm, true, {"MPI_Iexscan", true, request});
}

int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype,
                     MPI_Op op) {
  return guarded(MPI_COMM_WORLD, "MPI_Reduce_local", [&] {
    check_count(count);
    if (inbuf == MPI_IN_PLACE) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is not valid here");
    const Reduction red(datatype, op);
    const auto& type = *type_of(datatype);
    if (missing_buffer(inbuf, count, type)) fail(MPI_ERR_BUFFER, "null input buffer");
    if (missing_buffer(inoutbuf, count, type)) fail(MPI_ERR_BUFFER, "null inout buffer");
    Staging in;
    Staging out;
    const void* a = red.input(inbuf, count, in);
    void* b = red.output(inoutbuf, count, out, true);
    red.apply(a, b, count);
    red.finish(inoutbuf, count, out);
  });
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return guarded_collective(comm, OpKind::barrier, "MPI_Ibarrier", [&] {
    require_output(request, "request");
    const auto& c = comm_of(comm);
    *request = make_request(sempi_mpi_request::Kind::collective, c.ibarrier(),
                            errhandler_slot_of(comm));
  });
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request) {
  return guarded_collective(comm, OpKind::bcast, "MPI_Ibcast", [&] {
    require_output(request, "request");
    const auto& c = comm_of(comm);
    check_count(count);
    check_root(c, root);
    const auto& t = type_of(datatype);
    std::vector<Staging> staging(1);
    const bool is_root = c.rank() == root;
    void* view = is_root ? const_cast<void*>(send_view(buffer, count, *t, staging[0]))
                         : recv_view(buffer, count, *t, staging[0]);
    Unpack unpack;
    if (!is_root) {
      unpack = if_staged(staging[0], [buffer, count, t](const std::vector<Staging>& s) {
        recv_done(buffer, count, *t, s[0]);
      });
    }
    *request = hand_over(c.ibcast_bytes(view, bytes_of(count, *t), root), comm, std::move(staging),
                         std::move(unpack));
  });
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return guarded_collective(comm, OpKind::allreduce, "MPI_Iallreduce", [&] {
    require_output(request, "request");
    const auto& c = comm_of(comm);
    check_count(count);
    auto red = std::make_shared<const Reduction>(datatype, op);
    std::vector<Staging> staging(2);  // input, output
    const void* send = red->input(sendbuf, count, staging[0]);
    void* recv = red->output(recvbuf, count, staging[1], sendbuf == MPI_IN_PLACE);
    Unpack unpack = if_staged(staging[1], [red, recvbuf, count](const std::vector<Staging>& s) {
      red->finish(recvbuf, count, s[1]);
    });
    *request = hand_over(
        c.iallreduce_raw(send, recv, red->elements(count), red->element_type(), red->op()), comm,
        std::move(staging), std::move(unpack));
  });
}

int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  return guarded(MPI_COMM_WORLD, "MPI_Op_create", [&] {
    require_output(op, "op");
    if (user_fn == nullptr) fail(MPI_ERR_ARG, "null user function");
    auto* o = new sempi_mpi_op;
    o->fn = user_fn;
    o->commute = commute != 0;
    *op = o;
  });
}

int MPI_Op_free(MPI_Op* op) {
  return guarded(MPI_COMM_WORLD, "MPI_Op_free", [&] {
    require_output(op, "op");
    auto& o = op_of(*op);
    if (o.builtin) fail(MPI_ERR_OP, "predefined operations cannot be freed");
    o.magic = 0;
    delete &o;
    *op = MPI_OP_NULL;
  });
}

int MPI_Op_commutative(MPI_Op op, int* commute) {
  return guarded(MPI_COMM_WORLD, "MPI_Op_commutative", [&] {
    const bool commutes = op_of(op).commute;
    require_output(commute, "commute");
    *commute = commutes ? 1 : 0;
  });
}

}  // extern "C"
