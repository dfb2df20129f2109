// Matched probe and receive (MPI 3.1 section 3.8.2): MPI_Mprobe, MPI_Improbe, MPI_Mrecv,
// MPI_Imrecv. The message handle wraps a sempi::Message, which the engine has already taken
// out of matching.

#include "mpi/request_impl.hpp"
#include "sempi/message.hpp"

namespace sempi::mpi {
inline constexpr std::uint32_t kMessageMagic = 0x4d736721;  // "Msg!"
}  // namespace sempi::mpi

struct sempi_mpi_message {
  std::uint32_t magic = sempi::mpi::kMessageMagic;
  sempi::Message message;
  // The communicator's handler slot: errors of the receive go to the handler it has then, also
  // if the program freed the communicator after the probe.
  sempi::mpi::ErrhandlerSlot errhandler;
};
#if defined(__x86_64__) && defined(__GLIBCXX__)
// MPI_MESSAGE_NO_PROC is an exported object: its size is ABI (see abi_guard.cpp).
static_assert(sizeof(sempi_mpi_message) == 64, "ABI change: bump SEMPI_MPI_ABI (abi_guard.cpp)");
#endif

extern "C" {
// MPI_MESSAGE_NO_PROC: never received through its `message` (start_matched_receive knows it).
sempi_mpi_message sempi_mpi_message_no_proc;
}

namespace sempi::mpi {
namespace {

MPI_Message new_message_handle(std::pair<Message, Status>& probed, MPI_Comm comm) {
  if (probed.first.is_no_proc()) return MPI_MESSAGE_NO_PROC;
  return new sempi_mpi_message{kMessageMagic, std::move(probed.first),
                               errhandler_slot_of(comm)};
}

sempi_mpi_message& message_of(MPI_Message message) {
  if (message == MPI_MESSAGE_NULL) fail(MPI_ERR_REQUEST, "the message is MPI_MESSAGE_NULL");
  if (message->magic != kMessageMagic) fail(MPI_ERR_REQUEST, "not a valid message handle");
  return *message;
}

// Starts the receive of *handle into `area` and releases the handle (MPI_MESSAGE_NULL after).
Request start_matched_receive(MPI_Message* handle, RecvBuffer& area) {
  sempi_mpi_message& m = message_of(*handle);
  if (*handle == MPI_MESSAGE_NO_PROC) {
    *handle = MPI_MESSAGE_NULL;
    return Message::no_proc().irecv_bytes(area.ptr, area.capacity);
  }
  Request r = m.message.irecv_bytes(area.ptr, area.capacity);
  m.magic = 0;
  delete &m;
  *handle = MPI_MESSAGE_NULL;
  return r;
}

// Where the handler for a receive on `message` is (MPI_COMM_WORLD's for an invalid handle).
ErrhandlerSlot errhandler_slot_of_message(MPI_Message message) {
  if (message == MPI_MESSAGE_NULL || message->magic != kMessageMagic ||
      message == MPI_MESSAGE_NO_PROC) {
    return errhandler_slot_of(MPI_COMM_WORLD);
  }
  return message->errhandler;
}

}  // namespace
}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  return guarded(comm, "MPI_Mprobe", [&] {
    require_output(message, "message");
    auto probed = comm_of(comm).mprobe(source, tag);
    *message = new_message_handle(probed, comm);
    to_mpi_status(probed.second, status);
  });
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                MPI_Status* status) {
  return guarded(comm, "MPI_Improbe", [&] {
    require_output(flag, "flag");
    require_output(message, "message");
    auto probed = comm_of(comm).improbe(source, tag);
    *flag = probed ? 1 : 0;
    if (!probed) return;
    *message = new_message_handle(*probed, comm);
    to_mpi_status(probed->second, status);
  });
}

int MPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message,
              MPI_Status* status) {
  // A null `message` is refused by require_output, with the world's handler.
  const ErrhandlerSlot slot =
      errhandler_slot_of_message(message != nullptr ? *message : MPI_MESSAGE_NULL);
  return guarded_handler(slot->load(), "MPI_Mrecv", [&] {
    require_output(message, "message");
    check_count(count);
    RecvBuffer area(buf, count, type_of(datatype));
    sempi::Request r = start_matched_receive(message, area);
    receive_into(area, status, [&] { return r.wait(); });
  });
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message,
               MPI_Request* request) {
  // A null `message` is refused by require_output, with the world's handler.
  const ErrhandlerSlot slot =
      errhandler_slot_of_message(message != nullptr ? *message : MPI_MESSAGE_NULL);
  return guarded_handler(slot->load(), "MPI_Imrecv", [&] {
    require_output(message, "message");
    require_output(request, "request");
    check_count(count);
    auto area = std::make_unique<RecvBuffer>(buf, count, type_of(datatype));
    sempi::Request r = start_matched_receive(message, *area);
    *request = make_request(sempi_mpi_request::Kind::recv, std::move(r), slot);
    if (area->staging.data) (*request)->staged_recv = std::move(area);
  });
}

}  // extern "C"
