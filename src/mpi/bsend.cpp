// Buffered mode (MPI 3.1 section 3.6): MPI_Bsend copies the message into the buffer the program
// attached and returns; the copy is sent from there. Each message takes its packed size plus
// MPI_BSEND_OVERHEAD bytes of the buffer, handed out first fit, until its send completes.
// MPI_Buffer_detach (and MPI_Finalize) wait until every buffered message has been sent.

#include <cstring>
#include <iterator>
#include <list>
#include <mutex>

#include "mpi/request_impl.hpp"

namespace sempi::mpi {
namespace {

// A message in the attached buffer: bytes [offset, offset + length) until its send completes.
struct Buffered {
  std::size_t offset = 0;
  std::size_t length = 0;
  Request request;
};

struct AttachedBuffer {
  bool attached = false;
  std::byte* base = nullptr;
  std::size_t size = 0;
  std::list<Buffered> messages;  // ordered by offset
};

std::mutex g_mu;
AttachedBuffer g_buffer;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables): g_mu

// Frees the space of messages whose sends have finished (`all`: waits for every one). A send
// that fails now has nobody to report to: MPI_Bsend already returned success for it.
void reap(AttachedBuffer& b, bool all) noexcept {
  for (auto it = b.messages.begin(); it != b.messages.end();) {
    bool done = true;
    try {
      done = all ? (static_cast<void>(it->request.wait()), true) : it->request.test().has_value();
    } catch (...) {
    }
    it = done ? b.messages.erase(it) : std::next(it);
  }
}

}  // namespace

void buffered_send(const Communicator& comm, const void* buf, int count, const TypeMap& type,
                   int dest, int tag) {
  if (dest == MPI_PROC_NULL) {
    // Sends and keeps nothing, so it needs no buffer and no space (as in Open MPI); the checks
    // every send makes (tag, communicator) still apply.
    static_cast<void>(comm.isend_bytes(nullptr, 0, dest, tag));
    return;
  }
  const SendBuffer data(buf, count, type);
  const std::size_t length = data.bytes + MPI_BSEND_OVERHEAD;
  std::lock_guard lock(g_mu);
  auto& b = g_buffer;
  if (!b.attached) fail(MPI_ERR_BUFFER, "no buffer is attached (call MPI_Buffer_attach first)");
  reap(b, false);
  std::size_t offset = 0;
  auto next = b.messages.begin();
  for (; next != b.messages.end() && next->offset - offset < length; ++next) {
    offset = next->offset + next->length;
  }
  if (next == b.messages.end() && b.size - offset < length) {
    fail(MPI_ERR_BUFFER, "a buffered message of " + std::to_string(data.bytes) +
                             " bytes (plus MPI_BSEND_OVERHEAD) does not fit the free space of "
                             "the attached buffer of " + std::to_string(b.size) + " bytes");
  }
  std::byte* copy = b.base + offset;
  if (data.bytes > 0) std::memcpy(copy, data.ptr, data.bytes);
  Request r = comm.isend_bytes(copy, data.bytes, dest, tag);
  // A failure the send knows at once (e.g. the policy refuses it) is reported now.
  static_cast<void>(r.test());
  b.messages.insert(next, Buffered{offset, length, std::move(r)});
}

void drain_buffered_sends() noexcept {
  std::lock_guard lock(g_mu);
  reap(g_buffer, true);
  g_buffer = AttachedBuffer{};
}

}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it

extern "C" {

int MPI_Buffer_attach(void* buffer, int size) {
  return guarded(MPI_COMM_WORLD, "MPI_Buffer_attach", [&] {
    if (size < 0) fail(MPI_ERR_ARG, "negative buffer size " + std::to_string(size));
    if (buffer == nullptr && size > 0) fail(MPI_ERR_BUFFER, "null buffer");
    refuse_in_place(buffer);
    std::lock_guard lock(g_mu);
    if (g_buffer.attached) {
      fail(MPI_ERR_BUFFER, "a buffer is already attached (detach it first)");
    }
    g_buffer.attached = true;
    g_buffer.base = static_cast<std::byte*>(buffer);
    g_buffer.size = static_cast<std::size_t>(size);
  });
}

int MPI_Buffer_detach(void* buffer_addr, int* size) {
  return guarded(MPI_COMM_WORLD, "MPI_Buffer_detach", [&] {
    require_output(buffer_addr, "buffer_addr");
    require_output(size, "size");
    std::lock_guard lock(g_mu);
    if (!g_buffer.attached) fail(MPI_ERR_BUFFER, "no buffer is attached");
    reap(g_buffer, true);
    void* base = g_buffer.base;
    std::memcpy(buffer_addr, &base, sizeof base);  // buffer_addr is really a void**
    *size = static_cast<int>(g_buffer.size);
    g_buffer = AttachedBuffer{};
  });
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm) {
  return guarded(comm, "MPI_Bsend", [&] {
    const auto& c = comm_of(comm);
    check_count(count);
    buffered_send(c, buf, count, *type_of(datatype), dest, tag);
  });
}

int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request* request) {
  return guarded(comm, "MPI_Ibsend", [&] {
    require_output(request, "request");
    const auto& c = comm_of(comm);
    check_count(count);
    buffered_send(c, buf, count, *type_of(datatype), dest, tag);
    // Complete as soon as the message is in the buffer (MPI 3.1 section 3.7.2).
    *request = make_request(sempi_mpi_request::Kind::send, sempi::Request(),
                            errhandler_slot_of(comm));
  });
}

}  // extern "C"
