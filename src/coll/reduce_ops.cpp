// The reduction kernels behind sempi::Op, and the BasicType table.
//
// Each kernel is a plain loop `inout[i] = in[i] op inout[i]` the compiler can vectorise. Integer
// arithmetic is done in the unsigned type of the promoted width so that overflow wraps (as in
// every MPI implementation) instead of being undefined behaviour. Floating-point kernels keep the
// operand order fixed (lower rank first); together with fixed reduction trees this makes every
// reduction deterministic.

#include <algorithm>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "sempi/op.hpp"

namespace sempi {
namespace {

enum class Category { none, integer, floating, complex, logical, byte, pair };

Category category(BasicType t) {
  switch (t) {
    case BasicType::byte: return Category::byte;
    case BasicType::char_:
    case BasicType::wchar: return Category::none;
    case BasicType::signed_char:
    case BasicType::unsigned_char:
    case BasicType::short_:
    case BasicType::unsigned_short:
    case BasicType::int_:
    case BasicType::unsigned_:
    case BasicType::long_:
    case BasicType::unsigned_long:
    case BasicType::long_long:
    case BasicType::unsigned_long_long:
    case BasicType::int8:
    case BasicType::int16:
    case BasicType::int32:
    case BasicType::int64:
    case BasicType::uint8:
    case BasicType::uint16:
    case BasicType::uint32:
    case BasicType::uint64: return Category::integer;
    case BasicType::float_:
    case BasicType::double_:
    case BasicType::long_double: return Category::floating;
    case BasicType::bool_: return Category::logical;
    case BasicType::complex_float:
    case BasicType::complex_double:
    case BasicType::complex_long_double: return Category::complex;
    case BasicType::float_int:
    case BasicType::double_int:
    case BasicType::long_double_int:
    case BasicType::two_int:
    case BasicType::long_int:
    case BasicType::short_int: return Category::pair;
  }
  return Category::none;
}

bool op_allowed(BuiltinOp op, Category c) {
  switch (op) {
    case BuiltinOp::sum:
    case BuiltinOp::prod:
      return c == Category::integer || c == Category::floating || c == Category::complex;
    case BuiltinOp::min:
    case BuiltinOp::max: return c == Category::integer || c == Category::floating;
    case BuiltinOp::land:
    case BuiltinOp::lor:
    case BuiltinOp::lxor: return c == Category::integer || c == Category::logical;
    case BuiltinOp::band:
    case BuiltinOp::bor:
    case BuiltinOp::bxor: return c == Category::integer || c == Category::byte;
    case BuiltinOp::minloc:
    case BuiltinOp::maxloc: return c == Category::pair;
  }
  return false;
}

// Wrapping arithmetic for integers: compute in the unsigned type of the promoted width.
template <class T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<decltype(a + b)>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<decltype(a * b)>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

template <class T, class F>
void loop(const void* in, void* inout, int count, F f) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < count; ++i) b[i] = f(a[i], b[i]);
}

template <class T>
void arithmetic(BuiltinOp op, const void* in, void* inout, int count) {
  constexpr bool is_int = std::is_integral_v<T>;
  switch (op) {
    case BuiltinOp::sum:
      if constexpr (is_int) {
        loop<T>(in, inout, count, [](T a, T b) { return wrap_add(a, b); });
      } else {
        loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>(a + b); });
      }
      return;
    case BuiltinOp::prod:
      if constexpr (is_int) {
        loop<T>(in, inout, count, [](T a, T b) { return wrap_mul(a, b); });
      } else {
        loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>(a * b); });
      }
      return;
    case BuiltinOp::min: loop<T>(in, inout, count, [](T a, T b) { return b < a ? b : a; }); return;
    case BuiltinOp::max: loop<T>(in, inout, count, [](T a, T b) { return a < b ? b : a; }); return;
    default: break;
  }
  if constexpr (is_int) {
    switch (op) {
      case BuiltinOp::land:
        loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>(a != 0 && b != 0); });
        return;
      case BuiltinOp::lor:
        loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>(a != 0 || b != 0); });
        return;
      case BuiltinOp::lxor:
        loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>((a != 0) != (b != 0)); });
        return;
      case BuiltinOp::band: loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>(a & b); }); return;
      case BuiltinOp::bor: loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>(a | b); }); return;
      case BuiltinOp::bxor: loop<T>(in, inout, count, [](T a, T b) { return static_cast<T>(a ^ b); }); return;
      default: break;
    }
  }
}

template <class T>
void complex_op(BuiltinOp op, const void* in, void* inout, int count) {
  if (op == BuiltinOp::sum) loop<T>(in, inout, count, [](T a, T b) { return a + b; });
  if (op == BuiltinOp::prod) loop<T>(in, inout, count, [](T a, T b) { return a * b; });
}

void logical_bool(BuiltinOp op, const void* in, void* inout, int count) {
  switch (op) {
    case BuiltinOp::land: loop<bool>(in, inout, count, [](bool a, bool b) { return a && b; }); return;
    case BuiltinOp::lor: loop<bool>(in, inout, count, [](bool a, bool b) { return a || b; }); return;
    case BuiltinOp::lxor: loop<bool>(in, inout, count, [](bool a, bool b) { return a != b; }); return;
    default: return;
  }
}

void bitwise_byte(BuiltinOp op, const void* in, void* inout, int count) {
  using B = unsigned char;
  switch (op) {
    case BuiltinOp::band: loop<B>(in, inout, count, [](B a, B b) { return static_cast<B>(a & b); }); return;
    case BuiltinOp::bor: loop<B>(in, inout, count, [](B a, B b) { return static_cast<B>(a | b); }); return;
    case BuiltinOp::bxor: loop<B>(in, inout, count, [](B a, B b) { return static_cast<B>(a ^ b); }); return;
    default: return;
  }
}

// MINLOC/MAXLOC (MPI 3.1 section 5.9.4): the extreme value; on a tie, the lower index.
template <class T>
void loc_op(BuiltinOp op, const void* in, void* inout, int count) {
  using P = ValueIndex<T>;
  const P* a = static_cast<const P*>(in);
  P* b = static_cast<P*>(inout);
  const bool is_min = op == BuiltinOp::minloc;
  for (int i = 0; i < count; ++i) {
    const bool a_wins = is_min ? a[i].value < b[i].value : b[i].value < a[i].value;
    if (a_wins) {
      b[i].value = a[i].value;
      b[i].index = a[i].index;
    } else if (a[i].value == b[i].value) {
      b[i].index = std::min(a[i].index, b[i].index);
    }
  }
}

void apply_builtin(BuiltinOp op, BasicType type, const void* in, void* inout, int count) {
  switch (type) {
    case BasicType::signed_char:
    case BasicType::int8: return arithmetic<signed char>(op, in, inout, count);
    case BasicType::unsigned_char:
    case BasicType::uint8: return arithmetic<unsigned char>(op, in, inout, count);
    case BasicType::short_:
    case BasicType::int16: return arithmetic<std::int16_t>(op, in, inout, count);
    case BasicType::unsigned_short:
    case BasicType::uint16: return arithmetic<std::uint16_t>(op, in, inout, count);
    case BasicType::int_:
    case BasicType::int32: return arithmetic<std::int32_t>(op, in, inout, count);
    case BasicType::unsigned_:
    case BasicType::uint32: return arithmetic<std::uint32_t>(op, in, inout, count);
    case BasicType::long_: return arithmetic<long>(op, in, inout, count);
    case BasicType::unsigned_long: return arithmetic<unsigned long>(op, in, inout, count);
    case BasicType::long_long: return arithmetic<long long>(op, in, inout, count);
    case BasicType::unsigned_long_long: return arithmetic<unsigned long long>(op, in, inout, count);
    case BasicType::int64: return arithmetic<std::int64_t>(op, in, inout, count);
    case BasicType::uint64: return arithmetic<std::uint64_t>(op, in, inout, count);
    case BasicType::float_: return arithmetic<float>(op, in, inout, count);
    case BasicType::double_: return arithmetic<double>(op, in, inout, count);
    case BasicType::long_double: return arithmetic<long double>(op, in, inout, count);
    case BasicType::bool_: return logical_bool(op, in, inout, count);
    case BasicType::byte: return bitwise_byte(op, in, inout, count);
    case BasicType::complex_float: return complex_op<std::complex<float>>(op, in, inout, count);
    case BasicType::complex_double: return complex_op<std::complex<double>>(op, in, inout, count);
    case BasicType::complex_long_double:
      return complex_op<std::complex<long double>>(op, in, inout, count);
    case BasicType::float_int: return loc_op<float>(op, in, inout, count);
    case BasicType::double_int: return loc_op<double>(op, in, inout, count);
    case BasicType::long_double_int: return loc_op<long double>(op, in, inout, count);
    case BasicType::two_int: return loc_op<int>(op, in, inout, count);
    case BasicType::long_int: return loc_op<long>(op, in, inout, count);
    case BasicType::short_int: return loc_op<short>(op, in, inout, count);
    case BasicType::char_:
    case BasicType::wchar: return;
  }
}

}  // namespace

std::size_t basic_type_size(BasicType type) noexcept {
  switch (type) {
    case BasicType::byte:
    case BasicType::char_:
    case BasicType::signed_char:
    case BasicType::unsigned_char:
    case BasicType::int8:
    case BasicType::uint8: return 1;
    case BasicType::wchar: return sizeof(wchar_t);
    case BasicType::short_:
    case BasicType::unsigned_short:
    case BasicType::int16:
    case BasicType::uint16: return 2;
    case BasicType::int_:
    case BasicType::unsigned_:
    case BasicType::int32:
    case BasicType::uint32: return 4;
    case BasicType::long_:
    case BasicType::unsigned_long: return sizeof(long);
    case BasicType::long_long:
    case BasicType::unsigned_long_long: return sizeof(long long);
    case BasicType::int64:
    case BasicType::uint64: return 8;
    case BasicType::float_: return sizeof(float);
    case BasicType::double_: return sizeof(double);
    case BasicType::long_double: return sizeof(long double);
    case BasicType::bool_: return sizeof(bool);
    case BasicType::complex_float: return sizeof(std::complex<float>);
    case BasicType::complex_double: return sizeof(std::complex<double>);
    case BasicType::complex_long_double: return sizeof(std::complex<long double>);
    case BasicType::float_int: return sizeof(ValueIndex<float>);
    case BasicType::double_int: return sizeof(ValueIndex<double>);
    case BasicType::long_double_int: return sizeof(ValueIndex<long double>);
    case BasicType::two_int: return sizeof(ValueIndex<int>);
    case BasicType::long_int: return sizeof(ValueIndex<long>);
    case BasicType::short_int: return sizeof(ValueIndex<short>);
  }
  return 1;
}

const char* basic_type_name(BasicType type) noexcept {
  static constexpr const char* kNames[kBasicTypeCount] = {
      "MPI_BYTE",          "MPI_CHAR",          "MPI_WCHAR",
      "MPI_SIGNED_CHAR",   "MPI_UNSIGNED_CHAR", "MPI_SHORT",
      "MPI_UNSIGNED_SHORT", "MPI_INT",          "MPI_UNSIGNED",
      "MPI_LONG",          "MPI_UNSIGNED_LONG", "MPI_LONG_LONG",
      "MPI_UNSIGNED_LONG_LONG", "MPI_INT8_T",   "MPI_INT16_T",
      "MPI_INT32_T",       "MPI_INT64_T",       "MPI_UINT8_T",
      "MPI_UINT16_T",      "MPI_UINT32_T",      "MPI_UINT64_T",
      "MPI_FLOAT",         "MPI_DOUBLE",        "MPI_LONG_DOUBLE",
      "MPI_C_BOOL",        "MPI_C_FLOAT_COMPLEX", "MPI_C_DOUBLE_COMPLEX",
      "MPI_C_LONG_DOUBLE_COMPLEX", "MPI_FLOAT_INT", "MPI_DOUBLE_INT",
      "MPI_LONG_DOUBLE_INT", "MPI_2INT",        "MPI_LONG_INT",
      "MPI_SHORT_INT"};
  const auto i = static_cast<int>(type);
  return i >= 0 && i < kBasicTypeCount ? kNames[i] : "unknown type";
}

const char* builtin_op_name(BuiltinOp op) noexcept {
  switch (op) {
    case BuiltinOp::sum: return "MPI_SUM";
    case BuiltinOp::prod: return "MPI_PROD";
    case BuiltinOp::min: return "MPI_MIN";
    case BuiltinOp::max: return "MPI_MAX";
    case BuiltinOp::land: return "MPI_LAND";
    case BuiltinOp::lor: return "MPI_LOR";
    case BuiltinOp::lxor: return "MPI_LXOR";
    case BuiltinOp::band: return "MPI_BAND";
    case BuiltinOp::bor: return "MPI_BOR";
    case BuiltinOp::bxor: return "MPI_BXOR";
    case BuiltinOp::minloc: return "MPI_MINLOC";
    case BuiltinOp::maxloc: return "MPI_MAXLOC";
  }
  return "unknown op";
}

Op Op::user(Function f, bool commutative, std::string name) {
  return user(std::move(f), commutative, std::move(name), 0);
}

Op Op::user(Function f, bool commutative, std::string name, std::size_t element_size) {
  if (!f) throw Error(ErrorClass::op, "Op::user: empty function");
  Op op;
  op.user_ = std::make_shared<const User>(User{std::move(f), commutative, std::move(name), element_size});
  return op;
}

bool Op::commutative() const noexcept { return user_ == nullptr || user_->commutative; }

std::string Op::name() const { return user_ ? user_->name : builtin_op_name(builtin_); }

bool Op::defined_for(const ElementType& type) const noexcept {
  if (user_) return user_->element_size == 0 || user_->element_size == type.size;
  if (type.opaque) return false;
  return op_allowed(builtin_, category(type.basic));
}

void Op::check(const ElementType& type, const char* operation) const {
  if (defined_for(type)) return;
  const std::string type_name =
      type.opaque ? "an opaque " + std::to_string(type.size) + "-byte type"
                  : std::string(basic_type_name(type.basic));
  throw Error(ErrorClass::op, std::string(operation) + ": operation " + name() +
                                  " is not defined on " + type_name +
                                  " (see sempi/op.hpp for which operation applies to which type)");
}

void Op::apply(const void* in, void* inout, int count, const ElementType& type) const {
  if (count <= 0) return;
  if (user_) {
    user_->function(in, inout, count, type);
    return;
  }
  apply_builtin(builtin_, type.basic, in, inout, count);
}

}  // namespace sempi
