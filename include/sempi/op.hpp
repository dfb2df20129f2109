#pragma once
/// \file
/// Reduction operations (MPI_Op): the builtin ones and user-defined callables.
///
/// Semantics follow MPI: an operation combines two vectors element by element as
/// `inout[i] = in[i] op inout[i]`, where `in` holds the operand of the LOWER-ranked process.
/// Operations must be associative; non-commutative ones are combined in rank order. Builtin
/// operations are commutative. Reductions in sempi are deterministic: for a given
/// communicator size and inputs, every call yields the same bytes, identical on every rank.
///
/// Which builtin operation applies to which BasicType (MPI 3.1 section 5.9.2):
///   sum, prod            integers, floating point, complex
///   min, max             integers, floating point
///   land, lor, lxor      integers, bool
///   band, bor, bxor      integers, byte
///   minloc, maxloc       the ValueIndex pair types; ties keep the lower index
/// ("integers" excludes char_ and wchar, which are text in MPI.) Anything else throws
/// sempi::Error(ErrorClass::op) from the collective, before any communication.
///
/// Thread safety: an Op is an immutable value; copies may be used from any thread. A
/// user-defined callable runs on whichever application thread drives the collective: the
/// caller of a blocking one; for a nonblocking one, any thread inside any sempi wait or test
/// (MPI's progress rule: waits advance every collective in flight), never sempi's own thread.
/// So one stateful callable shared by two nonblocking collectives may run on two threads at
/// once.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "sempi/datatype.hpp"

namespace sempi {

/// The builtin reduction operations.
enum class BuiltinOp : std::uint8_t { sum, prod, min, max, land, lor, lxor, band, bor, bxor, minloc, maxloc };

/// "MPI_SUM", ... for messages.
const char* builtin_op_name(BuiltinOp op) noexcept;

class Op {
 public:
  /// A user-defined operation on raw memory: must compute inout[i] = in[i] op inout[i] for
  /// `count` elements of `type` (MPI_Op_create's semantics, `in` is the lower-ranked operand).
  /// It may throw: a blocking collective rethrows the exception as it is; a nonblocking one's
  /// Request::wait() throws sempi::RequestError(ErrorClass::op) with its message.
  using Function = std::function<void(const void* in, void* inout, int count, const ElementType& type)>;

  Op() : Op(BuiltinOp::sum) {}
  Op(BuiltinOp op) : builtin_(op) {}  // NOLINT: implicit, so Op::sum and BuiltinOp::sum mix

  static Op sum() { return BuiltinOp::sum; }
  static Op prod() { return BuiltinOp::prod; }
  static Op min() { return BuiltinOp::min; }
  static Op max() { return BuiltinOp::max; }
  static Op land() { return BuiltinOp::land; }
  static Op lor() { return BuiltinOp::lor; }
  static Op lxor() { return BuiltinOp::lxor; }
  static Op band() { return BuiltinOp::band; }
  static Op bor() { return BuiltinOp::bor; }
  static Op bxor() { return BuiltinOp::bxor; }
  static Op minloc() { return BuiltinOp::minloc; }
  static Op maxloc() { return BuiltinOp::maxloc; }

  /// A user-defined operation on raw memory (MPI_Op_create). Throws Error(op) if `f` is empty.
  static Op user(Function f, bool commutative, std::string name = "user");

  /// A user-defined operation on elements of T: `f(const T& in, const T& inout) -> T` becomes
  /// inout[i] = f(in[i], inout[i]). Only valid on elements of T (checked by size).
  template <class T, class F>
  static Op elementwise(F f, bool commutative, std::string name = "user") {
    return user(
        [f = std::move(f)](const void* in, void* inout, int count, const ElementType&) {
          const T* a = static_cast<const T*>(in);
          T* b = static_cast<T*>(inout);
          for (int i = 0; i < count; ++i) b[i] = f(a[i], b[i]);
        },
        commutative, std::move(name), sizeof(T));
  }

  [[nodiscard]] bool is_builtin() const noexcept { return user_ == nullptr; }
  /// The builtin operation (meaningful only if is_builtin()).
  [[nodiscard]] BuiltinOp builtin() const noexcept { return builtin_; }
  [[nodiscard]] bool commutative() const noexcept;
  [[nodiscard]] std::string name() const;

  /// Whether this operation is defined on elements of `type` (see the table above).
  [[nodiscard]] bool defined_for(const ElementType& type) const noexcept;
  /// Throws Error(ErrorClass::op) naming the operation and type if !defined_for(type).
  void check(const ElementType& type, const char* operation) const;

  /// inout[i] = in[i] op inout[i] for i < count. `in` and `inout` must not overlap.
  void apply(const void* in, void* inout, int count, const ElementType& type) const;

 private:
  struct User {
    Function function;
    bool commutative = false;
    std::string name;
    std::size_t element_size = 0;  // 0: any
  };
  static Op user(Function f, bool commutative, std::string name, std::size_t element_size);

  BuiltinOp builtin_ = BuiltinOp::sum;
  std::shared_ptr<const User> user_;
};

}  // namespace sempi
