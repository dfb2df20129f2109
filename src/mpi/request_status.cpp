// MPI_Request_get_status (MPI 3.1 section 3.7.6): whether a request is complete, and its status,
// without freeing or deactivating it - a later MPI_Wait / MPI_Test still completes it.

#include "mpi/request_impl.hpp"

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  return guarded(MPI_COMM_WORLD, "MPI_Request_get_status", [&] {
    require_output(flag, "flag");
    sempi_mpi_request* r = request_of(request);
    if (r == nullptr || !r->active) {  // null or inactive persistent: complete, empty status
      *flag = 1;
      empty_status(status);
      return MPI_SUCCESS;
    }
    return guarded_handler(r->handler(), "MPI_Request_get_status", [&] {
      *flag = 0;
      std::optional<sempi::Status> s;
      try {
        s = r->request.test();
      } catch (const sempi::RequestError& e) {
        // Completed with an error; report it and leave the request to MPI_Wait. A truncated
        // receive still describes its message, and the part kept is in place (as MPI_Test).
        *flag = 1;
        if (r->staged_recv) r->staged_recv->finish(e.status().bytes);
        r->staged_recv.reset();
        to_mpi_status(e.status(), status);
        throw;
      } catch (...) {
        *flag = 1;
        throw;
      }
      if (!s) return;
      *flag = 1;
      // The data must be in the user's buffer now, as after MPI_Test. Unpack and run the
      // completion hook once, here; releasing them keeps the later MPI_Wait from repeating them
      // (a reduction applied twice would be wrong).
      if (!s->cancelled) {
        if (r->staged_recv) r->staged_recv->finish(s->bytes);
        if (r->on_complete) r->on_complete();
      }
      r->staged_recv.reset();
      r->on_complete = nullptr;
      to_mpi_status(*s, status);
    });
  });
}

}  // extern "C"
