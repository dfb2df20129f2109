// Error handlers on communicators (MPI 3.1 section 8.3): the predefined MPI_ERRORS_ARE_FATAL
// and MPI_ERRORS_RETURN, and user-defined ones (MPI_Comm_create_errhandler), whose function is
// called with the communicator the error is raised on and the error code.
//
// Errors reach raise_code() with only an MPI_Errhandler: the one in the communicator's handler
// slot (which requests share, and which outlives the communicator). So attaching a user handler
// to a communicator stores a *binding* in its slot, a handle of its own that knows the function
// and that communicator; new communicators inherit by getting bindings of their own.
// MPI_Comm_get_errhandler gives back the program's handle, never a binding.
//
// Lifetime: user handles and bindings live until the process exits. Handler slots and callers
// of handler_of() hold handler pointers without reference counts, and MPI keeps a handler alive
// after MPI_Errhandler_free while objects use it; a communicator the program never freed still
// holds its binding after MPI_Finalize, where a call on it raises MPI_ERR_OTHER through it. Each
// is a few dozen bytes: one per MPI_Comm_create_errhandler, and one per MPI_Comm_set_errhandler
// with a user handler or communicator created with one attached (setting the handler a
// communicator had bound last reuses that binding).

#include "mpi/errhandler.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {

inline constexpr std::uint32_t kErrhandlerMagic = 0x45727248;  // "ErrH"

struct UserErrhandler {
  std::uint32_t magic = kErrhandlerMagic;
  MPI_Comm_errhandler_function* function = nullptr;
  MPI_Errhandler created = MPI_ERRHANDLER_NULL;  // the program's handle
  // Bindings: the communicator errors are raised on; MPI_COMM_NULL once it is freed (an error
  // of a request that outlived it still reaches the function).
  std::atomic<MPI_Comm> comm{MPI_COMM_NULL};
};

namespace {

bool is_predefined(MPI_Errhandler h) { return h == MPI_ERRORS_ARE_FATAL || h == MPI_ERRORS_RETURN; }

// A handle the program may pass: predefined, or one MPI_Comm_create_errhandler returned.
MPI_Errhandler checked_errhandler(MPI_Errhandler h) {
  if (h == MPI_ERRHANDLER_NULL) fail(MPI_ERR_ARG, "the error handler is MPI_ERRHANDLER_NULL");
  if (is_predefined(h)) return h;
  if (h->user == nullptr || h->user->magic != kErrhandlerMagic || h->user->created != h) {
    fail(MPI_ERR_ARG, "not a valid error handler handle");
  }
  return h;
}

// Every user handle and binding (see the top of this file), and the latest binding made for
// each communicator, until the communicator goes. Never destroyed: MPI_COMM_WORLD's
// destructor, at exit, still reads its binding (a program that exits without MPI_Finalize
// keeps it), and static objects of other files are destroyed in no set order.
struct Allocated {
  std::unique_ptr<UserErrhandler> user;
  std::unique_ptr<sempi_mpi_errhandler> handle;
};
struct Handles {
  std::mutex mu;
  std::vector<Allocated> all;
  std::unordered_map<MPI_Comm, MPI_Errhandler> latest_binding;
};
Handles& handles() {
  static auto* all = new Handles();
  return *all;
}

// A new user handle (a binding if `created` is given), owned by `owner`, whose mu is held.
MPI_Errhandler new_user_handle(Handles& owner, MPI_Comm_errhandler_function* function,
                               MPI_Errhandler created, MPI_Comm comm) {
  auto user = std::make_unique<UserErrhandler>();
  user->function = function;
  user->comm = comm;
  auto h = std::make_unique<sempi_mpi_errhandler>(sempi_mpi_errhandler{false, user.get()});
  user->created = created == MPI_ERRHANDLER_NULL ? h.get() : created;
  const MPI_Errhandler result = h.get();
  owner.all.push_back({std::move(user), std::move(h)});
  return result;
}

}  // namespace

void forget_latest_binding(MPI_Comm comm) noexcept {
  Handles& owner = handles();
  std::lock_guard lock(owner.mu);
  owner.latest_binding.erase(comm);
}

MPI_Errhandler bind_errhandler(MPI_Errhandler handler, MPI_Comm comm) {
  if (handler == nullptr || handler->user == nullptr) return handler;
  // A library that saves the handler, sets MPI_ERRORS_RETURN and restores it around each of its
  // calls binds the same handler to the same communicator again and again: the latest binding
  // is reused, or memory would grow with every call.
  Handles& owner = handles();
  std::lock_guard lock(owner.mu);
  MPI_Errhandler& latest = owner.latest_binding[comm];
  if (latest == nullptr || latest->user->created != handler->user->created) {
    latest = new_user_handle(owner, handler->user->function, handler->user->created, comm);
  }
  return latest;
}

void reset_predefined_comm_errhandlers() noexcept {
  // A call on MPI_COMM_WORLD or MPI_COMM_SELF after MPI_Finalize runs no program code: a user
  // handler is replaced. A predefined handler stays, so a program that chose MPI_ERRORS_RETURN
  // still gets an error code (not an abort) from a call after MPI_Finalize.
  for (MPI_Comm comm : {MPI_COMM_WORLD, MPI_COMM_SELF}) {
    if (!is_predefined(comm->errhandler->load())) comm->errhandler->store(MPI_ERRORS_ARE_FATAL);
  }
}

int call_user_errhandler(const sempi_mpi_errhandler& handler, int code) noexcept {
  MPI_Comm comm = handler.user->comm.load();
  int raised = code;
  handler.user->function(&comm, &raised);
  return code;
}

}  // namespace sempi::mpi

sempi_mpi_comm::~sempi_mpi_comm() {
  sempi::mpi::forget_latest_binding(this);  // a new communicator may get its address
  const MPI_Errhandler h = errhandler->load();
  if (h != nullptr && h->user != nullptr) {
    MPI_Comm self = this;
    h->user->comm.compare_exchange_strong(self, MPI_COMM_NULL);
  }
}

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* function,
                               MPI_Errhandler* errhandler) {
  return guarded(MPI_COMM_WORLD, "MPI_Comm_create_errhandler", [&] {
    require_output(errhandler, "errhandler");
    if (function == nullptr) fail(MPI_ERR_ARG, "null error handler function");
    Handles& owner = handles();
    std::lock_guard lock(owner.mu);
    *errhandler = new_user_handle(owner, function, MPI_ERRHANDLER_NULL, MPI_COMM_NULL);
  });
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  return guarded(comm, "MPI_Comm_set_errhandler", [&] {
    auto& h = comm_handle(comm);
    h.errhandler->store(bind_errhandler(checked_errhandler(errhandler), comm));
  });
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return guarded(comm, "MPI_Comm_get_errhandler", [&] {
    require_output(errhandler, "errhandler");
    const MPI_Errhandler current = comm_handle(comm).errhandler->load();
    *errhandler = current->user != nullptr ? current->user->created : current;
  });
}

int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  return guarded(comm, "MPI_Comm_call_errhandler", [&] {
    comm_handle(comm);
    // MPI_ERRORS_ARE_FATAL aborts; otherwise the call succeeded once the handler returned.
    raise_code(handler_of(comm), "MPI_Comm_call_errhandler", errorcode,
               "error " + std::to_string(errorcode) + " raised by the program");
  });
}

int MPI_Errhandler_free(MPI_Errhandler* errhandler) {
  return guarded(MPI_COMM_WORLD, "MPI_Errhandler_free", [&] {
    require_output(errhandler, "errhandler");
    checked_errhandler(*errhandler);
    *errhandler = MPI_ERRHANDLER_NULL;  // the handler itself lives on: see the top of this file
  });
}

}  // extern "C"
