#pragma once
// One body for a collective's blocking and nonblocking form (MPI_Gather and MPI_Igather, ...):
// the blocking form runs the operation and unpacks at once; the nonblocking one starts it and
// hands its staging areas and the unpack step to the new request, which owns them until the
// operation completes.

#include <functional>
#include <utility>
#include <vector>

#include "coll/abandon.hpp"
#include "mpi/request_impl.hpp"

namespace sempi::mpi {

/// The step that moves what arrived in the staging areas into the user's layout.
using Unpack = std::function<void(const std::vector<Staging>&)>;

/// The unpack step, only if results were staged: contiguous types land in place and need no
/// step (and no allocation for one).
template <class F>
Unpack if_staged(const Staging& received, F&& unpack) {
  return received.data ? Unpack(std::forward<F>(unpack)) : Unpack{};
}

/// Which form a call is: its name for errors, and where a nonblocking one returns its request.
struct Form {
  const char* name;
  bool nonblocking;
  MPI_Request* request;
};
constexpr Form blocking(const char* name) { return {name, false, nullptr}; }

/// The MPI request of a started collective, owning `staging` and running `unpack` on success.
inline MPI_Request hand_over(Request r, MPI_Comm comm, std::vector<Staging> staging,
                             Unpack unpack) {
  auto* h =
      make_request(sempi_mpi_request::Kind::collective, std::move(r), errhandler_slot_of(comm));
  for (Staging& s : staging) s.leave_to_request();
  h->scratch = std::move(staging);
  if (unpack) h->on_complete = [h, unpack = std::move(unpack)] { unpack(h->scratch); };
  return h;
}

/// Runs (blocking) or starts (nonblocking) the operation: `run()` returns nothing, `start()`
/// the sempi::Request.
template <class Run, class Start>
void run_or_start(const Form& form, MPI_Comm comm, std::vector<Staging>& staging, Unpack unpack,
                  Run&& run, Start&& start) {
  if (!form.nonblocking) {
    run();
    if (unpack) unpack(staging);
  } else {
    *form.request = hand_over(start(), comm, std::move(staging), std::move(unpack));
  }
}

/// guarded() for a collective of `kind` on `comm`: an error before the collective began (this
/// layer's checks, or the C++ API's) makes this rank abandon it (coll/abandon.hpp), so the
/// other members fail at once instead of waiting for the job's timeout.
template <class F>
int guarded_collective(MPI_Comm comm, detail::OpKind kind, const char* function,
                       F&& body) noexcept {
  return guarded(comm, function, [&] {
    const detail::coll::CollectiveCall call(*comm_of(comm).state(), kind);
    try {
      return body();
    } catch (const MpiError& e) {
      call.failed(error_class_of(e.code()), std::string(function) + ": " + e.what());
      throw;
    } catch (const Error& e) {
      call.failed(e.error_class(), std::string(function) + ": " + e.what());
      throw;
    } catch (const std::exception& e) {  // out of memory for a staging area, say
      call.failed(ErrorClass::other, std::string(function) + ": " + e.what());
      throw;
    }
  });
}

inline void check_request(const Form& form) {
  if (form.nonblocking) require_output(form.request, "request");
}

}  // namespace sempi::mpi
