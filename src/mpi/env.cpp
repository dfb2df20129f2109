// Environment management, error classes and handlers, predefined objects, info and attributes.

#include <unistd.h>

#include <complex>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <thread>

#include "coll/schedule.hpp"
#include "common/env_number.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "mpi/datatype_envelope.hpp"
#include "mpi/errhandler.hpp"
#include "mpi/mpi_impl.hpp"
#include "sempi/environment.hpp"
#include "sempi/version.hpp"

// --- predefined objects -------------------------------------------------------------------------

extern "C" {
sempi_mpi_comm sempi_mpi_comm_world;
sempi_mpi_comm sempi_mpi_comm_self;
sempi_mpi_group sempi_mpi_group_empty;
sempi_mpi_errhandler sempi_mpi_errors_are_fatal{true};
sempi_mpi_errhandler sempi_mpi_errors_return{false};

sempi_mpi_datatype sempi_mpi_type_char;
sempi_mpi_datatype sempi_mpi_type_signed_char;
sempi_mpi_datatype sempi_mpi_type_unsigned_char;
sempi_mpi_datatype sempi_mpi_type_byte;
sempi_mpi_datatype sempi_mpi_type_packed;
sempi_mpi_datatype sempi_mpi_type_short;
sempi_mpi_datatype sempi_mpi_type_unsigned_short;
sempi_mpi_datatype sempi_mpi_type_int;
sempi_mpi_datatype sempi_mpi_type_unsigned;
sempi_mpi_datatype sempi_mpi_type_long;
sempi_mpi_datatype sempi_mpi_type_unsigned_long;
sempi_mpi_datatype sempi_mpi_type_long_long;
sempi_mpi_datatype sempi_mpi_type_unsigned_long_long;
sempi_mpi_datatype sempi_mpi_type_float;
sempi_mpi_datatype sempi_mpi_type_double;
sempi_mpi_datatype sempi_mpi_type_long_double;
sempi_mpi_datatype sempi_mpi_type_wchar;
sempi_mpi_datatype sempi_mpi_type_c_bool;
sempi_mpi_datatype sempi_mpi_type_int8_t;
sempi_mpi_datatype sempi_mpi_type_int16_t;
sempi_mpi_datatype sempi_mpi_type_int32_t;
sempi_mpi_datatype sempi_mpi_type_int64_t;
sempi_mpi_datatype sempi_mpi_type_uint8_t;
sempi_mpi_datatype sempi_mpi_type_uint16_t;
sempi_mpi_datatype sempi_mpi_type_uint32_t;
sempi_mpi_datatype sempi_mpi_type_uint64_t;
sempi_mpi_datatype sempi_mpi_type_aint;
sempi_mpi_datatype sempi_mpi_type_offset;
sempi_mpi_datatype sempi_mpi_type_count;
sempi_mpi_datatype sempi_mpi_type_c_float_complex;
sempi_mpi_datatype sempi_mpi_type_c_double_complex;
sempi_mpi_datatype sempi_mpi_type_c_long_double_complex;
sempi_mpi_datatype sempi_mpi_type_float_int;
sempi_mpi_datatype sempi_mpi_type_double_int;
sempi_mpi_datatype sempi_mpi_type_long_int;
sempi_mpi_datatype sempi_mpi_type_2int;
sempi_mpi_datatype sempi_mpi_type_short_int;
sempi_mpi_datatype sempi_mpi_type_long_double_int;

sempi_mpi_op sempi_mpi_op_max;
sempi_mpi_op sempi_mpi_op_min;
sempi_mpi_op sempi_mpi_op_sum;
sempi_mpi_op sempi_mpi_op_prod;
sempi_mpi_op sempi_mpi_op_land;
sempi_mpi_op sempi_mpi_op_band;
sempi_mpi_op sempi_mpi_op_lor;
sempi_mpi_op sempi_mpi_op_bor;
sempi_mpi_op sempi_mpi_op_lxor;
sempi_mpi_op sempi_mpi_op_bxor;
sempi_mpi_op sempi_mpi_op_minloc;
sempi_mpi_op sempi_mpi_op_maxloc;
}

namespace sempi::mpi {
namespace {

template <class T>
void basic_type(sempi_mpi_datatype& h, Basic b, const char* name) {
  h.map = TypeMap::basic(b, sizeof(T), alignof(T));
  h.predefined = true;
  h.committed = true;
  h.name = name;
}

template <class V>
void pair_type(sempi_mpi_datatype& h, Basic b, Basic value, const char* name) {
  struct Pair {
    V value;
    int index;
  };
  h.map = TypeMap::pair(b, value, sizeof(V), offsetof(Pair, index), sizeof(Pair), alignof(Pair));
  h.predefined = true;
  h.committed = true;
  h.name = name;
}

void builtin_op(sempi_mpi_op& h, sempi::BuiltinOp op) {
  h.builtin = true;
  h.op = sempi::Op(op);
  h.commute = true;
}

// Fills the predefined objects before main (they are defined above, in this file, so they are
// constructed first).
struct PredefinedInit {
  PredefinedInit() {
    sempi_mpi_comm_world.predefined_name = "MPI_COMM_WORLD";
    sempi_mpi_comm_self.predefined_name = "MPI_COMM_SELF";
    sempi_mpi_group_empty.predefined = true;

    basic_type<char>(sempi_mpi_type_char, Basic::char_, "MPI_CHAR");
    basic_type<signed char>(sempi_mpi_type_signed_char, Basic::schar, "MPI_SIGNED_CHAR");
    basic_type<unsigned char>(sempi_mpi_type_unsigned_char, Basic::uchar, "MPI_UNSIGNED_CHAR");
    basic_type<unsigned char>(sempi_mpi_type_byte, Basic::byte, "MPI_BYTE");
    basic_type<unsigned char>(sempi_mpi_type_packed, Basic::packed, "MPI_PACKED");
    basic_type<short>(sempi_mpi_type_short, Basic::short_, "MPI_SHORT");
    basic_type<unsigned short>(sempi_mpi_type_unsigned_short, Basic::ushort,
                               "MPI_UNSIGNED_SHORT");
    basic_type<int>(sempi_mpi_type_int, Basic::int_, "MPI_INT");
    basic_type<unsigned>(sempi_mpi_type_unsigned, Basic::uint, "MPI_UNSIGNED");
    basic_type<long>(sempi_mpi_type_long, Basic::long_, "MPI_LONG");
    basic_type<unsigned long>(sempi_mpi_type_unsigned_long, Basic::ulong, "MPI_UNSIGNED_LONG");
    basic_type<long long>(sempi_mpi_type_long_long, Basic::llong, "MPI_LONG_LONG");
    basic_type<unsigned long long>(sempi_mpi_type_unsigned_long_long, Basic::ullong,
                                   "MPI_UNSIGNED_LONG_LONG");
    basic_type<float>(sempi_mpi_type_float, Basic::float_, "MPI_FLOAT");
    basic_type<double>(sempi_mpi_type_double, Basic::double_, "MPI_DOUBLE");
    basic_type<long double>(sempi_mpi_type_long_double, Basic::ldouble, "MPI_LONG_DOUBLE");
    basic_type<wchar_t>(sempi_mpi_type_wchar, Basic::wchar, "MPI_WCHAR");
    basic_type<bool>(sempi_mpi_type_c_bool, Basic::bool_, "MPI_C_BOOL");
    basic_type<std::int8_t>(sempi_mpi_type_int8_t, Basic::i8, "MPI_INT8_T");
    basic_type<std::int16_t>(sempi_mpi_type_int16_t, Basic::i16, "MPI_INT16_T");
    basic_type<std::int32_t>(sempi_mpi_type_int32_t, Basic::i32, "MPI_INT32_T");
    basic_type<std::int64_t>(sempi_mpi_type_int64_t, Basic::i64, "MPI_INT64_T");
    basic_type<std::uint8_t>(sempi_mpi_type_uint8_t, Basic::u8, "MPI_UINT8_T");
    basic_type<std::uint16_t>(sempi_mpi_type_uint16_t, Basic::u16, "MPI_UINT16_T");
    basic_type<std::uint32_t>(sempi_mpi_type_uint32_t, Basic::u32, "MPI_UINT32_T");
    basic_type<std::uint64_t>(sempi_mpi_type_uint64_t, Basic::u64, "MPI_UINT64_T");
    basic_type<MPI_Aint>(sempi_mpi_type_aint, Basic::aint, "MPI_AINT");
    basic_type<MPI_Offset>(sempi_mpi_type_offset, Basic::offset, "MPI_OFFSET");
    basic_type<MPI_Count>(sempi_mpi_type_count, Basic::count, "MPI_COUNT");
    basic_type<std::complex<float>>(sempi_mpi_type_c_float_complex, Basic::cfloat,
                                    "MPI_C_FLOAT_COMPLEX");
    basic_type<std::complex<double>>(sempi_mpi_type_c_double_complex, Basic::cdouble,
                                     "MPI_C_DOUBLE_COMPLEX");
    basic_type<std::complex<long double>>(sempi_mpi_type_c_long_double_complex,
                                          Basic::cldouble, "MPI_C_LONG_DOUBLE_COMPLEX");
    pair_type<float>(sempi_mpi_type_float_int, Basic::float_int, Basic::float_, "MPI_FLOAT_INT");
    pair_type<double>(sempi_mpi_type_double_int, Basic::double_int, Basic::double_,
                      "MPI_DOUBLE_INT");
    pair_type<long>(sempi_mpi_type_long_int, Basic::long_int, Basic::long_, "MPI_LONG_INT");
    pair_type<int>(sempi_mpi_type_2int, Basic::two_int, Basic::int_, "MPI_2INT");
    pair_type<short>(sempi_mpi_type_short_int, Basic::short_int, Basic::short_, "MPI_SHORT_INT");
    pair_type<long double>(sempi_mpi_type_long_double_int, Basic::ldouble_int, Basic::ldouble,
                           "MPI_LONG_DOUBLE_INT");

    builtin_op(sempi_mpi_op_max, sempi::BuiltinOp::max);
    builtin_op(sempi_mpi_op_min, sempi::BuiltinOp::min);
    builtin_op(sempi_mpi_op_sum, sempi::BuiltinOp::sum);
    builtin_op(sempi_mpi_op_prod, sempi::BuiltinOp::prod);
    builtin_op(sempi_mpi_op_land, sempi::BuiltinOp::land);
    builtin_op(sempi_mpi_op_band, sempi::BuiltinOp::band);
    builtin_op(sempi_mpi_op_lor, sempi::BuiltinOp::lor);
    builtin_op(sempi_mpi_op_bor, sempi::BuiltinOp::bor);
    builtin_op(sempi_mpi_op_lxor, sempi::BuiltinOp::lxor);
    builtin_op(sempi_mpi_op_bxor, sempi::BuiltinOp::bxor);
    builtin_op(sempi_mpi_op_minloc, sempi::BuiltinOp::minloc);
    builtin_op(sempi_mpi_op_maxloc, sempi::BuiltinOp::maxloc);
  }
};
const PredefinedInit g_predefined_init;

// The environment lives from MPI_Init to MPI_Finalize (sempi allows one per process).
std::unique_ptr<Environment> g_environment;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<bool> g_active{false};
// The thread level the program asked for: what MPI_Init_thread and MPI_Query_thread report,
// as Open MPI and MPICH do (programs compare it with what they asked for). The runtime is
// thread-safe whatever the level.
std::atomic<int> g_thread_level{MPI_THREAD_SINGLE};
std::thread::id g_main_thread;
int g_universe_size = 1;
pid_t g_init_pid = 0;  // the process that called MPI_Init

// Values of the predefined attributes (MPI_Comm_get_attr returns pointers to them).
const int kAttrTagUb = TAG_UB;
const int kAttrHost = MPI_PROC_NULL;
const int kAttrIo = MPI_ANY_SOURCE;  // every rank can do I/O
const int kAttrWtimeIsGlobal = 0;
int g_appnum = 0;  // MPI_APPNUM: this rank's program among sempirun's ':'-separated ones

// The index sempirun gives the rank's program (SEMPI_APPNUM); 0 for a program started
// otherwise. Called before init removes SEMPI_BOOTSTRAP_FD: a process a rank started inherits
// SEMPI_APPNUM, not its rank. A value sempirun would not set fails init, as other SEMPI_*
// numbers do.
int appnum_from_launcher() {
  if (std::getenv(launch::kBootstrapFdVariable) == nullptr) return 0;
  return static_cast<int>(env_long(launch::kAppnumVariable, 0, std::numeric_limits<int>::max()));
}

void copy_string(const std::string& s, char* out, int max_len, int* resultlen) {
  const std::size_t n = std::min(s.size(), static_cast<std::size_t>(max_len - 1));
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
  if (resultlen != nullptr) *resultlen = static_cast<int>(n);
}

}  // namespace

// --- errors ------------------------------------------------------------------------------------

void fail(int code, const std::string& message) { throw MpiError(code, message); }

int to_mpi_class(ErrorClass cls) noexcept {
  switch (cls) {
    case ErrorClass::success: return MPI_SUCCESS;
    case ErrorClass::buffer: return MPI_ERR_BUFFER;
    case ErrorClass::count: return MPI_ERR_COUNT;
    case ErrorClass::type: return MPI_ERR_TYPE;
    case ErrorClass::tag: return MPI_ERR_TAG;
    case ErrorClass::comm: return MPI_ERR_COMM;
    case ErrorClass::rank: return MPI_ERR_RANK;
    case ErrorClass::request: return MPI_ERR_REQUEST;
    case ErrorClass::root: return MPI_ERR_ROOT;
    case ErrorClass::group: return MPI_ERR_GROUP;
    case ErrorClass::op: return MPI_ERR_OP;
    case ErrorClass::arg: return MPI_ERR_ARG;
    case ErrorClass::unknown: return MPI_ERR_UNKNOWN;
    case ErrorClass::truncate: return MPI_ERR_TRUNCATE;
    case ErrorClass::other: return MPI_ERR_OTHER;
    case ErrorClass::intern: return MPI_ERR_INTERN;
    case ErrorClass::pending: return MPI_ERR_PENDING;
    case ErrorClass::policy: return SEMPI_ERR_POLICY;
    case ErrorClass::security: return SEMPI_ERR_SECURITY;
    case ErrorClass::io: return MPI_ERR_IO;
    case ErrorClass::timeout: return SEMPI_ERR_TIMEOUT;
    case ErrorClass::peer_failed: return SEMPI_ERR_PEER_FAILED;
    case ErrorClass::config: return SEMPI_ERR_CONFIG;
  }
  return MPI_ERR_UNKNOWN;
}

ErrorClass error_class_of(int code) noexcept {
  for (int c = 1; c <= static_cast<int>(ErrorClass::config); ++c) {  // codes are classes here
    if (to_mpi_class(static_cast<ErrorClass>(c)) == code) return static_cast<ErrorClass>(c);
  }
  return ErrorClass::other;
}

int raise_code(MPI_Errhandler handler, const char* function, int code,
               const std::string& message) noexcept {
  if (handler != nullptr && handler->user != nullptr) return call_user_errhandler(*handler, code);
  if (handler == nullptr || handler->fatal) {
    // MPI_ERRORS_ARE_FATAL: take the whole job down, saying what failed (on one line, which
    // names the rank, and in the launcher's report and the audit record of the abort).
    try {
      Environment::abort(code, std::string(function) + " failed: " + mpi_class_name(code) +
                                   ": " + message);
    } catch (...) {
      std::_Exit(code);
    }
  }
  return code;
}

int current_error_code(std::string* message) noexcept {
  int code = MPI_ERR_UNKNOWN;
  const char* text = "unknown exception";
  try {
    throw;
  } catch (const MpiError& e) {
    code = e.code();
    text = e.what();
  } catch (const Error& e) {
    code = to_mpi_class(e.error_class());
    text = e.what();
  } catch (const std::bad_alloc&) {
    code = MPI_ERR_NO_MEM;
    text = "out of memory";
  } catch (const std::exception& e) {
    code = MPI_ERR_INTERN;
    text = e.what();
  } catch (...) {
  }
  if (message != nullptr) {
    try {
      *message = text;
    } catch (...) {
    }
  }
  return code;
}

int raise_current(MPI_Errhandler handler, const char* function) noexcept {
  std::string message;
  const int code = current_error_code(&message);
  return raise_code(handler, function, code, message);
}

const int* predefined_attribute(int keyval) noexcept {
  switch (keyval) {
    case MPI_TAG_UB: return &kAttrTagUb;
    case MPI_HOST: return &kAttrHost;
    case MPI_IO: return &kAttrIo;
    case MPI_WTIME_IS_GLOBAL: return &kAttrWtimeIsGlobal;
    case MPI_UNIVERSE_SIZE: return &g_universe_size;
    case MPI_APPNUM:
      return &g_appnum;
    default: return nullptr;
  }
}

MPI_Errhandler handler_of(MPI_Comm comm) noexcept {
  return errhandler_slot_of(comm)->load();
}

ErrhandlerSlot errhandler_slot_of(MPI_Comm comm) noexcept {
  if (comm != nullptr && comm->magic == kCommMagic) return comm->errhandler;
  return sempi_mpi_comm_world.errhandler;
}

// --- handle checks -----------------------------------------------------------------------------

void require_initialized(const char* function) {
  if (!g_active.load()) {
    fail(MPI_ERR_OTHER, std::string(function) +
                            (Environment::finalized() ? " called after MPI_Finalize"
                                                      : " called before MPI_Init"));
  }
}

void require_comm_handle(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) fail(MPI_ERR_COMM, "the communicator is MPI_COMM_NULL");
  if (comm->magic != kCommMagic) fail(MPI_ERR_COMM, "not a valid communicator handle");
}

sempi_mpi_comm& comm_handle(MPI_Comm comm) {
  require_comm_handle(comm);
  // Also for a communicator the program made: after MPI_Finalize it is a handle to nothing.
  require_initialized("the call");
  return *comm;
}

const Communicator& comm_of(MPI_Comm comm) { return comm_handle(comm).comm; }

const std::shared_ptr<const TypeMap>& type_of(MPI_Datatype type, bool for_communication) {
  if (type == MPI_DATATYPE_NULL) fail(MPI_ERR_TYPE, "the datatype is MPI_DATATYPE_NULL");
  if (type->magic != kTypeMagic) fail(MPI_ERR_TYPE, "not a valid datatype handle");
  if (for_communication && !type->committed.load()) {
    fail(MPI_ERR_TYPE, "the datatype is not committed (call MPI_Type_commit first)");
  }
  return type->map;
}

std::shared_ptr<sempi_mpi_datatype> retain_type(MPI_Datatype type) {
  type_of(type, false);
  if (type->predefined) return {type, [](sempi_mpi_datatype*) {}};  // never freed
  type->references.fetch_add(1, std::memory_order_relaxed);
  return {type, release_type};
}

void release_type(MPI_Datatype type) {
  if (type->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    type->magic = 0;
    forget_envelope(type);
    delete type;
  }
}

sempi_mpi_group& group_of(MPI_Group group) {
  if (group == MPI_GROUP_NULL) fail(MPI_ERR_GROUP, "the group is MPI_GROUP_NULL");
  if (group->magic != kGroupMagic) fail(MPI_ERR_GROUP, "not a valid group handle");
  return *group;
}

sempi_mpi_op& op_of(MPI_Op op) {
  if (op == MPI_OP_NULL) fail(MPI_ERR_OP, "the operation is MPI_OP_NULL");
  if (op->magic != kOpMagic) fail(MPI_ERR_OP, "not a valid operation handle");
  return *op;
}

void require_info_key(const char* key) {
  if (key == nullptr) fail(MPI_ERR_INFO_KEY, "the info key is a null pointer");
}

sempi_mpi_info& info_of(MPI_Info info) {
  if (info == MPI_INFO_NULL) fail(MPI_ERR_INFO, "the info object is MPI_INFO_NULL");
  if (info->magic != kInfoMagic) fail(MPI_ERR_INFO, "not a valid info handle");
  return *info;
}

void check_count(int count, const char* what) {
  if (count < 0) fail(MPI_ERR_COUNT, std::string("negative ") + what + " " + std::to_string(count));
}

namespace {

// The one null-pointer check behind require_output and require_input.
void require_non_null(const void* argument_value, const char* direction, const char* argument) {
  if (argument_value == nullptr) {
    fail(MPI_ERR_ARG,
         std::string("the ") + direction + " argument '" + argument + "' is a null pointer");
  }
}

}  // namespace

void require_output(const void* argument_value, const char* argument) {
  require_non_null(argument_value, "output", argument);
}

void require_input(const void* argument_value, const char* argument) {
  require_non_null(argument_value, "input", argument);
}

const TypeMap& basic_map(Basic b) {
  switch (b) {
    case Basic::char_: return *sempi_mpi_type_char.map;
    case Basic::schar: return *sempi_mpi_type_signed_char.map;
    case Basic::uchar: return *sempi_mpi_type_unsigned_char.map;
    case Basic::byte: return *sempi_mpi_type_byte.map;
    case Basic::packed: return *sempi_mpi_type_packed.map;
    case Basic::short_: return *sempi_mpi_type_short.map;
    case Basic::ushort: return *sempi_mpi_type_unsigned_short.map;
    case Basic::int_: return *sempi_mpi_type_int.map;
    case Basic::uint: return *sempi_mpi_type_unsigned.map;
    case Basic::long_: return *sempi_mpi_type_long.map;
    case Basic::ulong: return *sempi_mpi_type_unsigned_long.map;
    case Basic::llong: return *sempi_mpi_type_long_long.map;
    case Basic::ullong: return *sempi_mpi_type_unsigned_long_long.map;
    case Basic::float_: return *sempi_mpi_type_float.map;
    case Basic::double_: return *sempi_mpi_type_double.map;
    case Basic::ldouble: return *sempi_mpi_type_long_double.map;
    case Basic::wchar: return *sempi_mpi_type_wchar.map;
    case Basic::bool_: return *sempi_mpi_type_c_bool.map;
    case Basic::i8: return *sempi_mpi_type_int8_t.map;
    case Basic::i16: return *sempi_mpi_type_int16_t.map;
    case Basic::i32: return *sempi_mpi_type_int32_t.map;
    case Basic::i64: return *sempi_mpi_type_int64_t.map;
    case Basic::u8: return *sempi_mpi_type_uint8_t.map;
    case Basic::u16: return *sempi_mpi_type_uint16_t.map;
    case Basic::u32: return *sempi_mpi_type_uint32_t.map;
    case Basic::u64: return *sempi_mpi_type_uint64_t.map;
    case Basic::aint: return *sempi_mpi_type_aint.map;
    case Basic::offset: return *sempi_mpi_type_offset.map;
    case Basic::count: return *sempi_mpi_type_count.map;
    case Basic::cfloat: return *sempi_mpi_type_c_float_complex.map;
    case Basic::cdouble: return *sempi_mpi_type_c_double_complex.map;
    case Basic::cldouble: return *sempi_mpi_type_c_long_double_complex.map;
    case Basic::float_int: return *sempi_mpi_type_float_int.map;
    case Basic::double_int: return *sempi_mpi_type_double_int.map;
    case Basic::long_int: return *sempi_mpi_type_long_int.map;
    case Basic::two_int: return *sempi_mpi_type_2int.map;
    case Basic::short_int: return *sempi_mpi_type_short_int.map;
    case Basic::ldouble_int: return *sempi_mpi_type_long_double_int.map;
    case Basic::none: break;
  }
  fail(MPI_ERR_TYPE, "not a basic datatype");
}

MPI_Comm new_comm_handle(Communicator comm, MPI_Errhandler inherited) {
  if (comm.is_null()) return MPI_COMM_NULL;
  auto* h = new sempi_mpi_comm;
  h->comm = std::move(comm);
  h->errhandler->store(bind_errhandler(inherited, h));
  return h;
}

// --- buffers -----------------------------------------------------------------------------------

namespace {

std::mutex g_kept_mu;
// Never destroyed: the engine may use these until the process ends.
std::vector<std::unique_ptr<std::byte[]>>& kept_staging() {
  static auto* kept = new std::vector<std::unique_ptr<std::byte[]>>();
  return *kept;
}

}  // namespace

void Staging::note_birth() noexcept {
  retired_at_birth_ = sempi::detail::coll::schedules_retired_by_this_thread();
}

void Staging::keep_if_collective_failed() noexcept {
  if (sempi::detail::coll::schedules_retired_by_this_thread() != retired_at_birth_) keep_until_exit();
}

void Staging::keep_until_exit() noexcept {
  if (!data) return;
  try {
    std::lock_guard lock(g_kept_mu);
    kept_staging().push_back(std::move(data));
  } catch (...) {
    static_cast<void>(data.release());  // leaked rather than freed under the engine
  }
}

void Staging::allocate(std::size_t n) {
  data = std::make_unique_for_overwrite<std::byte[]>(n == 0 ? 1 : n);
  size = n;
}

bool missing_buffer(const void* buf, std::int64_t count, const TypeMap& type,
                    std::int64_t displacement) {
  constexpr std::int64_t kLowestMappedAddress = 4096;
  return buf == nullptr && count > 0 && type.size > 0 &&
         displacement + type.true_lb < kLowestMappedAddress;
}

std::int64_t data_bytes(std::int64_t count, const TypeMap& type) {
  std::int64_t bytes = 0;
  std::int64_t span = 0;
  if (count > 0 && (__builtin_mul_overflow(count, type.size, &bytes) ||
                    __builtin_mul_overflow(count - 1, type.extent(), &span) ||
                    __builtin_add_overflow(span, type.true_ub, &span))) {
    fail(MPI_ERR_COUNT, std::to_string(count) + " elements of a type of " +
                            std::to_string(type.size) + " bytes and extent " +
                            std::to_string(type.extent()) + " do not fit in 64 bits");
  }
  return bytes;
}

void refuse_in_place(const void* buf) {
  if (buf == MPI_IN_PLACE) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is not valid for this buffer");
}

void check_data_buffer(const void* buf, std::int64_t count, const TypeMap& type,
                       std::int64_t displacement) {
  refuse_in_place(buf);
  if (missing_buffer(buf, count, type, displacement)) {
    fail(MPI_ERR_BUFFER, "null buffer for " + std::to_string(count) + " elements");
  }
}

SendBuffer::SendBuffer(const void* buf, std::int64_t count, const TypeMap& type) {
  check_data_buffer(buf, count, type);
  bytes = static_cast<std::size_t>(data_bytes(count, type));
  if (type.contiguous()) {
    ptr = bytes == 0 ? buf : at(buf, type.blocks[0].offset);
    return;
  }
  staging.allocate(bytes);
  type.pack(at(buf, 0), count, staging.data.get());
  ptr = staging.data.get();
}

RecvBuffer::RecvBuffer(void* buf, std::int64_t n, std::shared_ptr<const TypeMap> t)
    : user(buf), count(n), type(std::move(t)) {
  check_data_buffer(buf, count, *type);
  capacity = static_cast<std::size_t>(data_bytes(count, *type));
  if (type->contiguous()) {
    ptr = capacity == 0 ? buf : at(buf, type->blocks[0].offset);
    return;
  }
  staging.allocate(capacity);
  ptr = staging.data.get();
}

void RecvBuffer::finish(std::size_t bytes) {
  if (!staging.data || !type) return;
  type->unpack(staging.data.get(), static_cast<std::int64_t>(std::min(bytes, capacity)), count,
               at(user, 0));
}

void to_mpi_status(const Status& in, MPI_Status* out) noexcept {
  if (out == MPI_STATUS_IGNORE) return;
  out->MPI_SOURCE = in.source;
  out->MPI_TAG = in.tag;
  out->sempi_cancelled = in.cancelled ? 1 : 0;
  out->sempi_bytes = static_cast<MPI_Count>(in.bytes);
}

void empty_status(MPI_Status* out) noexcept {
  if (out == MPI_STATUS_IGNORE) return;
  out->MPI_SOURCE = MPI_ANY_SOURCE;
  out->MPI_TAG = MPI_ANY_TAG;
  out->sempi_cancelled = 0;
  out->sempi_bytes = 0;
}

}  // namespace sempi::mpi

// --- the C interface ---------------------------------------------------------------------------

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

namespace {

// A program that returns from main without MPI_Finalize (exit status 0) is finalized at exit,
// as a sempi::Environment is at the end of its scope. Not by g_environment's static
// destructor: that runs after OpenSSL's own exit handler (registered later, during MPI_Init)
// has torn libcrypto down, and finalizing then crashed the rank and lost its audit log. An
// exit handler registered at the end of MPI_Init runs before OpenSSL's.
// One that exits with another status (exit(1) on an error) has failed, and is not finalized:
// its peers see it fail and the job ends with its status, as under Open MPI, and as a
// sempi::Environment's program that calls exit() (core/runtime.cpp). Finalizing would make
// the job wait for every other rank to reach finalize.
// Not in a child made by fork(): it is not a rank (core/runtime.cpp).
void finalize_at_exit(int status, void* /*unused*/) noexcept {
  const bool succeeded = (status & 0xff) == 0;  // what the parent sees: exit(256) is success
  if (succeeded && g_active.load() && ::getpid() == g_init_pid) (void)MPI_Finalize();
}

}  // namespace

extern "C" {

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return guarded(MPI_COMM_WORLD, "MPI_Init", [&] {
    require_output(provided, "provided");
    if (sempi::Environment::initialized()) {
      fail(MPI_ERR_OTHER, "MPI_Init may be called only once per process");
    }
    if (required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE) {
      fail(MPI_ERR_ARG, "invalid thread level " + std::to_string(required));
    }
    const int appnum = appnum_from_launcher();
    if (argc != nullptr && argv != nullptr) {
      g_environment = std::make_unique<sempi::Environment>(*argc, *argv);
    } else {
      g_environment = std::make_unique<sempi::Environment>();
    }
    sempi_mpi_comm_world.comm = sempi::world();
    sempi_mpi_comm_self.comm = sempi::self();
    g_universe_size = sempi_mpi_comm_world.comm.size();
    g_appnum = appnum;
    g_main_thread = std::this_thread::get_id();
    g_active = true;
    g_init_pid = ::getpid();
    ::on_exit(finalize_at_exit, nullptr);  // glibc: atexit with the exit status
    g_thread_level = required;
    if (provided != nullptr) *provided = required;
  });
}

int MPI_Init(int* argc, char*** argv) {
  int provided = 0;
  return MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
}

int MPI_Finalize(void) {
  return guarded(MPI_COMM_WORLD, "MPI_Finalize", [&] {
    require_initialized("MPI_Finalize");
    // As if MPI_COMM_SELF were freed first (MPI 3.1 section 8.7): its attributes' delete
    // callbacks run while MPI is still fully usable; then world's. A failing callback is
    // reported (the first), but every other callback still runs and the job still finalizes.
    int callback_error = MPI_SUCCESS;
    std::string callback_message;
    for (MPI_Comm predefined : {MPI_COMM_SELF, MPI_COMM_WORLD}) {
      try {
        delete_attributes(predefined);
      } catch (...) {
        if (callback_error == MPI_SUCCESS) callback_error = current_error_code(&callback_message);
      }
    }
    drain_buffered_sends();
    settle_detached_at_finalize();
    g_active = false;
    sempi_mpi_comm_world.comm = sempi::Communicator();
    sempi_mpi_comm_self.comm = sempi::Communicator();
    sempi_mpi_comm_world.cart.reset();
    g_environment.reset();  // waits until every rank has reached finalize
    discard_detached();  // freed sends no receive took, freed collectives never finished
    const int result = callback_error == MPI_SUCCESS
                           ? MPI_SUCCESS
                           : raise_code(handler_of(MPI_COMM_WORLD), "MPI_Finalize",
                                        callback_error, callback_message);
    reset_predefined_comm_errhandlers();
    return result;
  });
}

int MPI_Initialized(int* flag) {
  return guarded(MPI_COMM_WORLD, "MPI_Initialized", [&] {
    require_output(flag, "flag");
    *flag = sempi::Environment::initialized() ? 1 : 0;
  });
}

int MPI_Finalized(int* flag) {
  return guarded(MPI_COMM_WORLD, "MPI_Finalized", [&] {
    require_output(flag, "flag");
    *flag = sempi::Environment::finalized() ? 1 : 0;
  });
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  std::string name = "MPI_COMM_WORLD";
  if (comm != MPI_COMM_NULL && comm->magic == kCommMagic && !comm->comm.is_null()) {
    try {
      name = comm->comm.name();
    } catch (...) {  // the name only decorates the message
    }
  }
  sempi::Environment::abort(errorcode, "MPI_Abort on communicator " + name);
}

int MPI_Query_thread(int* provided) {
  return guarded(MPI_COMM_WORLD, "MPI_Query_thread", [&] {
    require_output(provided, "provided");
    *provided = g_thread_level.load();
  });
}

int MPI_Is_thread_main(int* flag) {
  return guarded(MPI_COMM_WORLD, "MPI_Is_thread_main", [&] {
    require_output(flag, "flag");
    require_initialized("MPI_Is_thread_main");
    *flag = std::this_thread::get_id() == g_main_thread ? 1 : 0;
  });
}

int MPI_Get_version(int* version, int* subversion) {
  return guarded(MPI_COMM_WORLD, "MPI_Get_version", [&] {
    require_output(version, "version");
    require_output(subversion, "subversion");
    *version = MPI_VERSION;
    *subversion = MPI_SUBVERSION;
  });
}

int MPI_Get_library_version(char* version, int* resultlen) {
  const std::string text = std::string("sempi ") + sempi::library_version() +
                           " (MPI 3.1 over mutually authenticated TLS 1.3)";
  return guarded(MPI_COMM_WORLD, "MPI_Get_library_version", [&] {
    require_output(version, "version");
    require_output(resultlen, "resultlen");
    copy_string(text, version, MPI_MAX_LIBRARY_VERSION_STRING, resultlen);
  });
}

int MPI_Get_processor_name(char* name, int* resultlen) {
  return guarded(MPI_COMM_WORLD, "MPI_Get_processor_name", [&] {
    require_output(name, "name");
    require_output(resultlen, "resultlen");
    copy_string(sempi::Environment::processor_name(), name, MPI_MAX_PROCESSOR_NAME, resultlen);
  });
}

double MPI_Wtime(void) { return sempi::Environment::wtime(); }

double MPI_Wtick(void) { return 1e-9; }  // steady_clock counts nanoseconds

// A hook for profiling tools (MPI 3.1 section 14.2.4): MPI libraries themselves ignore it.
int MPI_Pcontrol(const int /*level*/, ...) { return MPI_SUCCESS; }

int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  return guarded(MPI_COMM_WORLD, "MPI_Error_string", [&] {
    require_output(string, "string");
    require_output(resultlen, "resultlen");
    const char* text = mpi_class_description(errorcode);
    if (text == nullptr) {
      copy_string("unknown error code", string, MPI_MAX_ERROR_STRING, resultlen);
      fail(MPI_ERR_ARG, "unknown error code " + std::to_string(errorcode));
    }
    copy_string(std::string(mpi_class_name(errorcode)) + ": " + text, string, MPI_MAX_ERROR_STRING,
                resultlen);
  });
}

int MPI_Error_class(int errorcode, int* errorclass) {
  return guarded(MPI_COMM_WORLD, "MPI_Error_class", [&] {
    require_output(errorclass, "errorclass");
    if (mpi_class_description(errorcode) == nullptr) {
      fail(MPI_ERR_ARG, "unknown error code " + std::to_string(errorcode));
    }
    *errorclass = errorcode;  // codes are classes
  });
}

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  return guarded(MPI_COMM_WORLD, "MPI_Alloc_mem", [&] {
    require_output(baseptr, "baseptr");
    if (info != MPI_INFO_NULL) info_of(info);
    if (size < 0) fail(MPI_ERR_ARG, "negative size " + std::to_string(size));
    void* p = std::malloc(size == 0 ? 1 : static_cast<std::size_t>(size));
    if (p == nullptr) fail(MPI_ERR_NO_MEM, "cannot allocate " + std::to_string(size) + " bytes");
    std::memcpy(baseptr, &p, sizeof p);  // baseptr is really a void**
  });
}

int MPI_Free_mem(void* base) {
  std::free(base);
  return MPI_SUCCESS;
}

// --- info --------------------------------------------------------------------------------------

int MPI_Info_create(MPI_Info* info) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_create", [&] {
    require_output(info, "info");
    *info = new sempi_mpi_info;
  });
}

int MPI_Info_set(MPI_Info info, const char* key, const char* value) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_set", [&] {
    auto& h = info_of(info);
    require_info_key(key);
    if (value == nullptr) fail(MPI_ERR_INFO_VALUE, "the info value is a null pointer");
    const std::string k = key;
    const std::string v = value;
    if (k.empty() || k.size() > MPI_MAX_INFO_KEY) fail(MPI_ERR_INFO_KEY, "invalid info key");
    if (v.empty() || v.size() > MPI_MAX_INFO_VAL) fail(MPI_ERR_INFO_VALUE, "invalid info value");
    std::lock_guard lock(h.mu);
    h.entries[k] = v;
  });
}

int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_get", [&] {
    auto& h = info_of(info);
    require_info_key(key);
    require_output(value, "value");
    require_output(flag, "flag");
    if (valuelen < 0) fail(MPI_ERR_ARG, "negative valuelen");
    std::lock_guard lock(h.mu);
    const auto it = h.entries.find(key);
    *flag = it == h.entries.end() ? 0 : 1;
    if (it == h.entries.end()) return;
    // valuelen excludes the terminating NUL (MPI 3.1 section 9).
    const std::size_t n = std::min(it->second.size(), static_cast<std::size_t>(valuelen));
    std::memcpy(value, it->second.data(), n);
    value[n] = '\0';
  });
}

int MPI_Info_delete(MPI_Info info, const char* key) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_delete", [&] {
    auto& h = info_of(info);
    require_info_key(key);
    std::lock_guard lock(h.mu);
    if (h.entries.erase(key) == 0) fail(MPI_ERR_INFO_NOKEY, std::string("no info key ") + key);
  });
}

int MPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_get_nkeys", [&] {
    auto& h = info_of(info);
    require_output(nkeys, "nkeys");
    std::lock_guard lock(h.mu);
    *nkeys = static_cast<int>(h.entries.size());
  });
}

int MPI_Info_free(MPI_Info* info) {
  return guarded(MPI_COMM_WORLD, "MPI_Info_free", [&] {
    require_output(info, "info");
    auto& h = info_of(*info);
    h.magic = 0;
    delete &h;
    *info = MPI_INFO_NULL;
  });
}

}  // extern "C"
