#pragma once
// What an MPI_Request points to: a sempi::Request plus what has to happen when it completes
// (unpacking a staged receive, finishing a nonblocking collective) and, for persistent
// requests, the arguments to start it again.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "mpi/mpi_impl.hpp"

struct sempi_mpi_request {
  enum class Kind { send, recv, collective };
  enum class Mode { send, ssend, bsend, recv };

  std::uint32_t magic = sempi::mpi::kRequestMagic;
  Kind kind = Kind::send;
  sempi::Request request;
  sempi::mpi::ErrhandlerSlot errhandler;  // the communicator's

  /// The handler errors go to now (the communicator's current one).
  [[nodiscard]] MPI_Errhandler handler() const {
    return errhandler ? errhandler->load() : MPI_ERRORS_ARE_FATAL;
  }

  std::unique_ptr<sempi::mpi::SendBuffer> staged_send;  // packed send data, kept to completion
  std::unique_ptr<sempi::mpi::RecvBuffer> staged_recv;  // receive area, unpacked at completion
  std::vector<sempi::mpi::Staging> scratch;  // a nonblocking collective's buffers
  /// Runs once when the operation completes successfully (collectives: unpack, reduce, ...).
  std::function<void()> on_complete;

  /// The last call that checked an array holding this request (a number no other call uses):
  /// the same number seen twice in one array is a request listed twice. Atomic only so that an
  /// erroneous program listing it in two threads' calls at once is no data race.
  std::atomic<std::uint64_t> listed_in_call{0};

  // Persistent requests: inactive until MPI_Start; completion makes them inactive again.
  bool persistent = false;
  bool active = true;
  struct Arguments {
    Mode mode = Mode::send;
    const void* buf = nullptr;
    int count = 0;
    std::shared_ptr<const sempi::mpi::TypeMap> type;
    int peer = 0;
    int tag = 0;
    sempi::Communicator comm;
  } args;
};

namespace sempi::mpi {

/// Checks a request handle (null allowed if `allow_null`).
sempi_mpi_request* request_of(MPI_Request request, bool allow_null = true);
/// A new active request running `request`, reporting errors through the handler in
/// `errhandler` at the time they are raised.
MPI_Request make_request(sempi_mpi_request::Kind kind, Request request,
                         ErrhandlerSlot errhandler);

/// Completes a blocking receive into `area`: runs `receive` (which returns the sempi::Status),
/// unpacks what arrived and fills `status`. A truncated message is unpacked as far as it fits
/// and still described in `status` before its error propagates.
template <class Receive>
void receive_into(RecvBuffer& area, MPI_Status* status, Receive&& receive) {
  try {
    const Status s = receive();
    area.finish(s.bytes);
    to_mpi_status(s, status);
  } catch (const RequestError& e) {
    area.finish(e.status().bytes);
    to_mpi_status(e.status(), status);
    throw;
  }
}

}  // namespace sempi::mpi
