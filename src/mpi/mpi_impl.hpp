#pragma once
// Internals of the mpi.h layer: what the C handles point to, MPI error classes and handlers, and
// the buffers that move derived datatypes through the byte-level C++ API.
//
// Handles. Every MPI handle is a pointer to one of the structs below (the C header declares
// them incomplete). Each starts with a magic number per kind, checked on every use so a wrong or
// freed handle is reported as MPI_ERR_COMM / _TYPE / ... rather than dereferenced blindly (the
// magic is cleared when a handle is freed). Predefined handles are static objects; world and
// self are bound to the runtime by MPI_Init and unbound by MPI_Finalize.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include <mpi.h>

#include "mpi/datatype_engine.hpp"
#include "sempi/communicator.hpp"
#include "sempi/error.hpp"
#include "sempi/op.hpp"
#include "sempi/request.hpp"
#include "sempi/status.hpp"

namespace sempi::mpi {

inline constexpr std::uint32_t kCommMagic = 0x436f6d6d;  // "Comm"
inline constexpr std::uint32_t kGroupMagic = 0x47727570;
inline constexpr std::uint32_t kTypeMagic = 0x54797065;
inline constexpr std::uint32_t kRequestMagic = 0x52657175;
inline constexpr std::uint32_t kOpMagic = 0x4f707321;
inline constexpr std::uint32_t kInfoMagic = 0x496e666f;

/// A communicator's error handler, shared with the requests started on it: an error is
/// reported through the handler set when it is raised, not when the request was started, and
/// a request that outlives MPI_Comm_free still has one (MPI 3.1 section 8.3).
using ErrhandlerSlot = std::shared_ptr<std::atomic<MPI_Errhandler>>;

/// An attribute key made by MPI_Comm_create_keyval, with its callbacks. Attributes hold it
/// shared, so MPI_Comm_free_keyval leaves existing attributes (and their callbacks) working.
struct Keyval {
  int id = 0;
  MPI_Comm_copy_attr_function* copy = nullptr;
  MPI_Comm_delete_attr_function* destroy = nullptr;
  void* extra_state = nullptr;
};

/// A value cached on a communicator (MPI_Comm_set_attr).
struct Attribute {
  std::shared_ptr<const Keyval> key;
  void* value = nullptr;
};

/// A user-defined error handler (src/mpi/errhandler.cpp).
struct UserErrhandler;

/// Cartesian topology attached to a communicator by MPI_Cart_create.
struct CartTopology {
  std::vector<int> dims;
  std::vector<int> periods;
};

}  // namespace sempi::mpi

struct sempi_mpi_errhandler {
  bool fatal;
  sempi::mpi::UserErrhandler* user = nullptr;  // null for the predefined handlers
};

struct sempi_mpi_comm {
  std::uint32_t magic = sempi::mpi::kCommMagic;
  sempi::Communicator comm;
  sempi::mpi::ErrhandlerSlot errhandler =
      std::make_shared<std::atomic<MPI_Errhandler>>(MPI_ERRORS_ARE_FATAL);
  /// "MPI_COMM_WORLD" / "MPI_COMM_SELF" for the predefined ones until MPI_Comm_set_name.
  const char* predefined_name = nullptr;
  /// MPI_Comm_set_name has named it (the name is then comm's); unnamed ones have an empty name.
  std::atomic<bool> renamed{false};
  std::shared_ptr<const sempi::mpi::CartTopology> cart;
  std::mutex attributes_mu;
  std::vector<sempi::mpi::Attribute> attributes;  // in the order they were set
  ~sempi_mpi_comm();  // detaches a user error handler bound to it (errhandler.cpp)
};

struct sempi_mpi_group {
  std::uint32_t magic = sempi::mpi::kGroupMagic;
  std::vector<int> world_ranks;  // index: rank in the group
  bool predefined = false;
};

struct sempi_mpi_datatype {
  std::uint32_t magic = sempi::mpi::kTypeMagic;
  std::shared_ptr<const sempi::mpi::TypeMap> map;
  bool predefined = false;
  std::atomic<bool> committed{false};
  // The user's handle plus every pending operation that will pass the handle to user code (a
  // user-defined MPI_Op). MPI_Type_free drops the user's; the last one deletes the handle.
  std::atomic<int> references{1};
  std::atomic<bool> freed_by_user{false};
  std::mutex name_mu;
  std::string name;
};

struct sempi_mpi_op {
  std::uint32_t magic = sempi::mpi::kOpMagic;
  bool builtin = false;
  sempi::Op op;                      // the builtin operation
  MPI_User_function* fn = nullptr;   // or the user's function
  bool commute = true;
};

struct sempi_mpi_info {
  std::uint32_t magic = sempi::mpi::kInfoMagic;
  std::mutex mu;
  std::map<std::string, std::string> entries;
};

namespace sempi::mpi {

// --- errors ------------------------------------------------------------------------------------

/// An MPI error raised by this layer's own argument checks.
class MpiError : public std::exception {
 public:
  MpiError(int code, std::string message) : code_(code), message_(std::move(message)) {}
  [[nodiscard]] int code() const noexcept { return code_; }
  [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }

 private:
  int code_;
  std::string message_;
};

[[noreturn]] void fail(int code, const std::string& message);
/// The MPI error class of a sempi error class.
int to_mpi_class(ErrorClass cls) noexcept;
/// The sempi error class of an MPI error code (ErrorClass::other for a class sempi lacks).
ErrorClass error_class_of(int code) noexcept;
/// "MPI_ERR_RANK" etc. ("MPI_ERR_UNKNOWN" for a code that is no class; error_classes.cpp).
const char* mpi_class_name(int code) noexcept;
/// What the class means ("invalid rank"), or null for a code that is no class.
const char* mpi_class_description(int code) noexcept;

/// The MPI error code (and message) of the exception in flight; call inside a catch block.
int current_error_code(std::string* message) noexcept;
/// Reports the exception in flight through `handler` (fatal: prints and aborts the job);
/// returns its MPI error code.
int raise_current(MPI_Errhandler handler, const char* function) noexcept;
/// Reports `code` through `handler` without an exception.
int raise_code(MPI_Errhandler handler, const char* function, int code,
               const std::string& message) noexcept;
/// The handler that errors on `comm` go to (MPI_COMM_WORLD's if comm is not a valid handle).
MPI_Errhandler handler_of(MPI_Comm comm) noexcept;
/// Where `comm`'s handler is kept (MPI_COMM_WORLD's if comm is not a valid handle).
ErrhandlerSlot errhandler_slot_of(MPI_Comm comm) noexcept;

/// MPI_ERR_COMM unless `comm` is a communicator handle (initialized or not): the check every
/// call on a communicator makes before looking at its other arguments.
void require_comm_handle(MPI_Comm comm);

/// reap_detached(), if a freed request would write the program's memory when it completes
/// (a non-contiguous receive, a collective's result) or holds a packed copy of its data (a
/// non-contiguous send): run after every call, so that memory is written once the program can
/// know the operation finished (a later message arrived, a barrier passed), and a copy freed,
/// not only at the next MPI_Wait or MPI_Test. One relaxed load otherwise.
void reap_detached_per_call();

/// Runs `body` (returning void or an MPI code), mapping exceptions to MPI errors on `comm`,
/// then reap_detached_per_call().
/// `comm` is checked first, so an invalid communicator is MPI_ERR_COMM whatever else is wrong
/// (as in Open MPI and MPICH); calls on no communicator pass MPI_COMM_WORLD, whose handler
/// their errors go to.
template <class F>
int guarded(MPI_Comm comm, const char* function, F&& body) noexcept {
  try {
    require_comm_handle(comm);
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      reap_detached_per_call();
      return MPI_SUCCESS;
    } else {
      const int code = body();
      reap_detached_per_call();
      return code;
    }
  } catch (...) {
    return raise_current(handler_of(comm), function);
  }
}

/// Like guarded(), for calls whose errors go to a known handler (e.g. a request's).
template <class F>
int guarded_handler(MPI_Errhandler handler, const char* function, F&& body) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      return MPI_SUCCESS;
    } else {
      return body();
    }
  } catch (...) {
    return raise_current(handler, function);
  }
}

// --- handle checks -----------------------------------------------------------------------------

/// MPI_Init has run and MPI_Finalize has not; else MPI_ERR_OTHER.
void require_initialized(const char* function);
const Communicator& comm_of(MPI_Comm comm);
sempi_mpi_comm& comm_handle(MPI_Comm comm);
/// The type's layout; must be committed (or predefined) if `for_communication`.
const std::shared_ptr<const TypeMap>& type_of(MPI_Datatype type, bool for_communication = true);
/// Keeps a valid datatype handle usable until the returned holder is gone, even if the program
/// frees it meanwhile (MPI: communication already using a freed datatype completes normally).
std::shared_ptr<sempi_mpi_datatype> retain_type(MPI_Datatype type);
/// Drops one reference; the last one deletes the handle.
void release_type(MPI_Datatype type);
sempi_mpi_group& group_of(MPI_Group group);
sempi_mpi_op& op_of(MPI_Op op);
sempi_mpi_info& info_of(MPI_Info info);
/// A key argument of the MPI_Info calls: null is MPI_ERR_INFO_KEY, like any invalid key.
void require_info_key(const char* key);
void check_count(int count, const char* what = "count");
/// An output argument the call must write through (rank, flag, newcomm, request, ...): null is
/// MPI_ERR_ARG naming `argument`. Not for those where null is legal (MPI_STATUS_IGNORE).
void require_output(const void* argument_value, const char* argument);
/// An input argument the call must read (dims, ranks, a status to query, array_of_*): null is
/// MPI_ERR_ARG naming `argument`. Arrays of zero entries may be null: check only if n > 0.
/// Handles are checked before this, so a bad handle is reported as such first.
void require_input(const void* argument_value, const char* argument);
MPI_Comm new_comm_handle(Communicator comm, MPI_Errhandler inherited);
/// The layout of a predefined basic (or pair) type.
const TypeMap& basic_map(Basic b);

// --- buffers -----------------------------------------------------------------------------------

/// Heap bytes that are not zeroed (staging for packed data).
///
/// A collective that fails can leave transfers running that the engine cannot cancel (a matched
/// receive's remaining DATA, a send waiting for its CTS), into or out of its staging. As with
/// the schedule's own scratch (coll/schedule.cpp), staging whose thread retired a failed
/// schedule while it existed is kept until the process ends instead of freed, and so is a
/// failed nonblocking collective's (judged by its request). Point-to-point buffers opt out: the
/// engine lets go of a request it fails.
struct Staging {
  std::unique_ptr<std::byte[]> data;
  std::size_t size = 0;

  Staging() : Staging(true) {}
  /// keep_on_failure false: freed whatever happens (and nothing to note: p2p's hot path).
  explicit Staging(bool keep_on_failure) : keep_on_failure_(keep_on_failure) {
    if (keep_on_failure_) note_birth();
  }
  Staging(Staging&&) noexcept = default;
  Staging& operator=(Staging&&) noexcept = default;
  ~Staging() {
    if (keep_on_failure_ && data) keep_if_collective_failed();
  }
  void allocate(std::size_t n);
  /// Keeps the bytes until the process ends instead of freeing them.
  void keep_until_exit() noexcept;
  /// For staging a request takes over: the request knows its own outcome and keeps the bytes
  /// when it fails (keep_until_exit()). Without this, the destructor would judge a successful
  /// request by whether the thread freeing it saw some other collective fail meanwhile.
  void leave_to_request() noexcept { keep_on_failure_ = false; }

 private:
  void note_birth() noexcept;
  void keep_if_collective_failed() noexcept;
  bool keep_on_failure_ = true;
  std::uint64_t retired_at_birth_ = 0;  // schedules_retired_by_this_thread() then
};

/// `buf` + `offset`, without pointer arithmetic on MPI_BOTTOM (null).
inline std::byte* at(const void* buf, std::int64_t offset) {
  return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(buf) +
                                      static_cast<std::uintptr_t>(offset));
}

/// Contiguous bytes to send for (buf, count, type): the user's memory when the type is
/// contiguous, else a packed copy held in `staging`.
struct SendBuffer {
  const void* ptr = nullptr;
  std::size_t bytes = 0;
  Staging staging{false};
  SendBuffer(const void* buf, std::int64_t count, const TypeMap& type);
};

/// Where to receive (buf, count, type): the user's memory when the type is contiguous, else a
/// staging area unpacked by finish().
struct RecvBuffer {
  void* ptr = nullptr;
  std::size_t capacity = 0;
  Staging staging{false};
  void* user = nullptr;
  std::int64_t count = 0;
  std::shared_ptr<const TypeMap> type;
  RecvBuffer() = default;
  RecvBuffer(void* buf, std::int64_t count, std::shared_ptr<const TypeMap> type);
  /// Unpacks the first `bytes` received bytes if a staging area was used.
  void finish(std::size_t bytes);
};

/// Whether `buf` is a missing buffer for `count` instances of `type` at `displacement` bytes: a
/// null buffer is only valid as MPI_BOTTOM with absolute addresses, so low offsets from null
/// are reported before memory is touched.
bool missing_buffer(const void* buf, std::int64_t count, const TypeMap& type,
                    std::int64_t displacement = 0);
/// MPI_ERR_BUFFER if `buf` is MPI_IN_PLACE: an address (1), not memory. Every call that allows
/// it substitutes the other buffer first, so one that reaches a buffer is in a place the
/// standard does not allow.
void refuse_in_place(const void* buf);
/// MPI_ERR_BUFFER unless `buf` holds `count` elements at `displacement` bytes: not
/// MPI_IN_PLACE, and not missing_buffer() (packing would read address 0, unpacking or the
/// engine write there).
void check_data_buffer(const void* buf, std::int64_t count, const TypeMap& type,
                       std::int64_t displacement = 0);
/// Bytes of data in `count` instances of `type`. MPI_ERR_COUNT if that, or the memory the
/// instances span, does not fit in 64 bits: no staging buffer is then sized by a wrapped
/// product.
std::int64_t data_bytes(std::int64_t count, const TypeMap& type);

/// Source, tag, count and cancellation; MPI_ERROR stays as it was (MPI 3.1 section 3.2.5:
/// only calls returning MPI_ERR_IN_STATUS set it, and the functions completing many requests
/// set it themselves).
void to_mpi_status(const Status& in, MPI_Status* out) noexcept;
/// The empty status (MPI_ANY_SOURCE, MPI_ANY_TAG, no bytes); MPI_ERROR as in to_mpi_status.
void empty_status(MPI_Status* out) noexcept;

// --- runtime hooks -----------------------------------------------------------------------------

/// The value of a predefined attribute (MPI_TAG_UB, ...), or null for other keys.
const int* predefined_attribute(int keyval) noexcept;
/// MPI_Comm_dup's attribute step: runs each attribute's copy callback and caches the copies
/// it asks for on `to`. Throws (the callback's code) if a callback fails.
void copy_attributes(MPI_Comm from, MPI_Comm to);
/// Removes every attribute from `comm`, last set first, running the delete callbacks
/// (MPI_Comm_free, MPI_Finalize). Throws (the callback's code) if a callback fails.
void delete_attributes(MPI_Comm comm);

// The attribute calls, reporting errors under `function`: the MPI_Comm_* names and the MPI-1
// names of MPI 3.1 section 15.2 (MPI_Keyval_create, MPI_Attr_put, ...) share them.
int create_keyval(const char* function, MPI_Comm_copy_attr_function* copy_fn,
                  MPI_Comm_delete_attr_function* delete_fn, int* keyval, void* extra_state);
int free_keyval(const char* function, int* keyval);
int set_attr(const char* function, MPI_Comm comm, int keyval, void* attribute_val);
int get_attr(const char* function, MPI_Comm comm, int keyval, void* attribute_val, int* flag);
int delete_attr(const char* function, MPI_Comm comm, int keyval);

/// Completes freed-but-active requests that have finished (MPI_Request_free).
void reap_detached();
/// MPI_Finalize, before the runtime goes: cancels freed receives that never matched (they
/// would never complete), then reaps what has finished.
void settle_detached_at_finalize();
/// MPI_Finalize, once the runtime is gone: frees what is left without waiting for it.
void discard_detached() noexcept;
/// Buffered mode (MPI_Bsend and its kin): copies the message into the first free stretch of the
/// attached buffer that holds it and starts sending it from there; throws MPI_ERR_BUFFER if no
/// stretch does.
void buffered_send(const Communicator& comm, const void* buf, int count, const TypeMap& type,
                   int dest, int tag);
/// Waits until every buffered message (MPI_Bsend) has been sent, then detaches the buffer.
void drain_buffered_sends() noexcept;

}  // namespace sempi::mpi
