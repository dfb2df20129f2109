// sempi::Communicator: argument validation (always on, not only in debug builds) and dispatch to
// the progress engine.

#include "sempi/communicator.hpp"

#include <limits>

#include "core/comm_factory.hpp"
#include "core/runtime.hpp"

namespace sempi {
namespace {

using detail::Runtime;

const detail::CommState& checked(const std::shared_ptr<detail::CommState>& state,
                                 const char* operation) {
  if (!state) {
    throw Error(ErrorClass::comm, std::string(operation) + ": null communicator");
  }
  return *state;
}

void check_peer(const detail::CommState& comm, int rank, bool allow_any, const char* operation,
                const char* role) {
  if (rank == PROC_NULL || (allow_any && rank == ANY_SOURCE)) return;
  if (rank < 0 || rank >= comm.size()) {
    throw Error(ErrorClass::rank, std::string(operation) + ": " + role + " rank " +
                                      std::to_string(rank) +
                                      " is out of range for a communicator of size " +
                                      std::to_string(comm.size()));
  }
}

void check_tag(int tag, bool allow_any, const char* operation) {
  if (allow_any && tag == ANY_TAG) return;
  if (tag < 0 || tag > TAG_UB) {
    throw Error(ErrorClass::tag, std::string(operation) + ": invalid tag " + std::to_string(tag) +
                                     " (valid: 0.." + std::to_string(TAG_UB) + ")");
  }
}

void check_buffer(const void* buf, std::size_t bytes, const char* operation) {
  if (buf == nullptr && bytes > 0) {
    throw Error(ErrorClass::buffer, std::string(operation) + ": null buffer for " +
                                        std::to_string(bytes) + " bytes");
  }
}

// Completed request for operations with PROC_NULL.
Request null_peer_request() {
  auto state = std::make_shared<detail::RequestState>(detail::RequestKind::recv);
  state->status.source = PROC_NULL;
  state->status.tag = ANY_TAG;
  state->done = true;
  return Request(std::move(state));
}

Status wait_or_throw(Request request) { return request.wait(); }

// The arguments of a send, and of a receive, on `comm`: the error of the first bad one.
void check_send(const detail::CommState& comm, const void* buf, std::size_t bytes, int dest,
                int tag, const char* operation) {
  check_peer(comm, dest, false, operation, "destination");
  check_tag(tag, false, operation);
  check_buffer(buf, bytes, operation);
}

void check_recv(const detail::CommState& comm, const void* buf, std::size_t capacity, int source,
                int tag, const char* operation) {
  check_peer(comm, source, true, operation, "source");
  check_tag(tag, true, operation);
  check_buffer(buf, capacity, operation);
}

// Starts a checked send or receive.
Request post_send(const detail::CommState& comm, const void* buf, std::size_t bytes, int dest,
                  int tag, bool synchronous) {
  if (dest == PROC_NULL) return null_peer_request();
  return Request(Runtime::get().engine().isend(comm, detail::OpKind::p2p, buf, bytes, dest, tag, synchronous));
}

Request post_recv(const std::shared_ptr<detail::CommState>& state, void* buf,
                  std::size_t capacity, int source, int tag) {
  if (source == PROC_NULL) return null_peer_request();
  return Request(Runtime::get().engine().irecv(state, false, buf, capacity, source, tag));
}

Request start_send(const std::shared_ptr<detail::CommState>& state, const void* buf,
                   std::size_t bytes, int dest, int tag, bool synchronous, const char* operation) {
  const auto& comm = checked(state, operation);
  check_send(comm, buf, bytes, dest, tag, operation);
  return post_send(comm, buf, bytes, dest, tag, synchronous);
}

Request start_recv(const std::shared_ptr<detail::CommState>& state, void* buf,
                   std::size_t capacity, int source, int tag, const char* operation) {
  check_recv(checked(state, operation), buf, capacity, source, tag, operation);
  return post_recv(state, buf, capacity, source, tag);
}

// Waits for `request` and ignores how it ended: clean-up on the way out of a call that is
// already failing with another error.
void wait_quietly(Request& request) noexcept {
  try {
    (void)request.wait();
  } catch (...) {
  }
}

}  // namespace

int Communicator::rank() const { return checked(state_, "rank").rank; }
int Communicator::size() const { return checked(state_, "size").size(); }

std::string Communicator::name() const { return checked(state_, "name").name(); }

void Communicator::set_name(const std::string& name) const {
  // Now, not at this rank's next operation: messages that arrive meanwhile are judged by the
  // policy rules for the new name (or the name stays, if its rule refuses these members).
  Runtime::get().engine().rename_comm(checked(state_, "set_name"), name);
}

int Communicator::world_rank_of(int rank) const {
  const auto& comm = checked(state_, "world_rank_of");
  check_peer(comm, rank, false, "world_rank_of", "");
  if (rank == PROC_NULL) {  // a valid peer for sends and receives, but no process
    throw Error(ErrorClass::rank, "world_rank_of: PROC_NULL is no rank of a communicator");
  }
  return comm.world_ranks[static_cast<std::size_t>(rank)];
}

int Communicator::to_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw Error(ErrorClass::count, "buffer has more than INT_MAX elements");
  }
  return static_cast<int>(n);
}

void Communicator::send_bytes(const void* buf, std::size_t bytes, int dest, int tag) const {
  wait_or_throw(start_send(state_, buf, bytes, dest, tag, false, "send"));
}

void Communicator::ssend_bytes(const void* buf, std::size_t bytes, int dest, int tag) const {
  wait_or_throw(start_send(state_, buf, bytes, dest, tag, true, "ssend"));
}

Status Communicator::recv_bytes(void* buf, std::size_t capacity, int source, int tag) const {
  return wait_or_throw(start_recv(state_, buf, capacity, source, tag, "recv"));
}

Request Communicator::isend_bytes(const void* buf, std::size_t bytes, int dest, int tag) const {
  return start_send(state_, buf, bytes, dest, tag, false, "isend");
}

Request Communicator::issend_bytes(const void* buf, std::size_t bytes, int dest, int tag) const {
  return start_send(state_, buf, bytes, dest, tag, true, "issend");
}

Request Communicator::irecv_bytes(void* buf, std::size_t capacity, int source, int tag) const {
  return start_recv(state_, buf, capacity, source, tag, "irecv");
}

Status Communicator::sendrecv_bytes(const void* sendbuf, std::size_t sendbytes, int dest,
                                    int sendtag, void* recvbuf, std::size_t capacity, int source,
                                    int recvtag) const {
  // Every argument first: a receive posted before a send refused for its destination would
  // take a message into the caller's buffer for a call that fails.
  const auto& comm = checked(state_, "sendrecv");
  check_send(comm, sendbuf, sendbytes, dest, sendtag, "sendrecv");
  check_recv(comm, recvbuf, capacity, source, recvtag, "sendrecv");
  // The send first: one the policy refuses fails at once (the engine checks it as it starts),
  // and then no receive is posted to take a message for a call that fails.
  Request s = post_send(comm, sendbuf, sendbytes, dest, sendtag, false);
  // Without a progress round: a refusal by the peer arrives after the receive is posted, and
  // the message received is then reported with it (below).
  if (!s.is_null() && s.completed()) (void)s.test();
  Request r;
  try {
    r = post_recv(state_, recvbuf, capacity, source, recvtag);
  } catch (...) {
    wait_quietly(s);
    throw;
  }
  Status status;
  try {
    status = r.wait();
  } catch (...) {
    // A large send may still read sendbuf (it waits for the peer's receive): it finishes
    // before the caller gets its buffers back, as MPI_Sendrecv's would.
    wait_quietly(s);
    throw;
  }
  try {
    s.wait();
  } catch (const Error& e) {
    // The message did arrive: the caller must still learn what it received (MPI_Sendrecv
    // unpacks and describes it) with the send's error.
    Status received = status;
    received.error = e.error_class();
    throw RequestError(received, e.what());
  }
  return status;
}

std::optional<Status> Communicator::iprobe(int source, int tag) const {
  const auto& comm = checked(state_, "iprobe");
  check_peer(comm, source, true, "iprobe", "source");
  check_tag(tag, true, "iprobe");
  if (source == PROC_NULL) return Status{PROC_NULL, ANY_TAG, 0, false, ErrorClass::success};
  auto status = Runtime::get().engine().iprobe(comm, false, source, tag);
  if (status && status->error != ErrorClass::success) {
    throw Error(status->error,
                "iprobe: the source rank failed or finalized, or the job was aborted");
  }
  return status;
}

Status Communicator::probe(int source, int tag) const {
  const auto& comm = checked(state_, "probe");
  check_peer(comm, source, true, "probe", "source");
  check_tag(tag, true, "probe");
  if (source == PROC_NULL) return Status{PROC_NULL, ANY_TAG, 0, false, ErrorClass::success};
  auto status = Runtime::get().engine().probe(comm, false, source, tag);
  if (status.error != ErrorClass::success) {
    throw Error(status.error, "probe: the source rank failed or finalized, or the job was aborted");
  }
  return status;
}

namespace {

std::pair<Message, Status> checked_probed(const std::shared_ptr<detail::CommState>& state,
                                          detail::Engine::Probed probed, const char* operation) {
  if (probed.status.error != ErrorClass::success) {
    throw Error(
        probed.status.error,
        std::string(operation) + ": the source rank failed or finalized, or the job was aborted");
  }
  return {Message(state, std::move(probed.message)), probed.status};
}

// A probe for source PROC_NULL matches at once: no message, nothing to receive.
std::pair<Message, Status> probed_proc_null() {
  return {Message::no_proc(), Status{PROC_NULL, ANY_TAG, 0, false, {}}};
}

}  // namespace

std::pair<Message, Status> Communicator::mprobe(int source, int tag) const {
  const auto& comm = checked(state_, "mprobe");
  check_peer(comm, source, true, "mprobe", "source");
  check_tag(tag, true, "mprobe");
  if (source == PROC_NULL) return probed_proc_null();
  return checked_probed(state_, Runtime::get().engine().mprobe(comm, source, tag), "mprobe");
}

std::optional<std::pair<Message, Status>> Communicator::improbe(int source, int tag) const {
  const auto& comm = checked(state_, "improbe");
  check_peer(comm, source, true, "improbe", "source");
  check_tag(tag, true, "improbe");
  if (source == PROC_NULL) return probed_proc_null();
  auto probed = Runtime::get().engine().improbe(comm, source, tag);
  if (!probed) return std::nullopt;
  return checked_probed(state_, std::move(*probed), "improbe");
}

Communicator Communicator::dup() const {
  checked(state_, "dup");
  auto created = detail::split_communicator(Runtime::get().engine(), state_, 0, rank(),
                                            state_->name() + ".dup");
  return Communicator(std::const_pointer_cast<detail::CommState>(created));
}

Communicator Communicator::split(int color, int key) const {
  checked(state_, "split");
  if (color < 0 && color != UNDEFINED) {
    throw Error(ErrorClass::arg, "split: color must be non-negative or UNDEFINED, got " +
                                     std::to_string(color));
  }
  auto created = detail::split_communicator(Runtime::get().engine(), state_, color, key,
                                            state_->name() + ".split");
  return created ? Communicator(std::const_pointer_cast<detail::CommState>(created))
                 : Communicator();
}

}  // namespace sempi
