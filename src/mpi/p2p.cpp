// Point-to-point communication, requests and their completion.

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mpi/request_impl.hpp"

namespace sempi::mpi {
namespace {

// Freed-but-active requests (MPI_Request_free): their buffers stay alive until they finish.
std::mutex g_detached_mu;
// Those that write the program's memory when completed (see writes_on_completion): all are
// tested after every call, so that the memory is written by the time the program can know the
// operation finished.
std::list<sempi_mpi_request*>
    g_detached_writing;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
// The others (plain sends and receives, sends holding a packed copy): looked at
// kReapedPerCall at a time after each call, in turn, so that a call's cost stays bounded
// however many are still running.
std::list<sempi_mpi_request*> g_detached;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
constexpr std::size_t kReapedPerCall = 32;
// Their number, read without the lock after every call: a program that frees requests in a
// loop (fire-and-forget sends) must get them back without ever waiting, and a program that
// frees none pays one load.
std::atomic<std::size_t> g_detached_count{0};

// Those that write the program's memory when completed: a staged receive to unpack, a
// collective's result (reaping drives them, as MPI_Test would).
bool writes_on_completion(const sempi_mpi_request& r) {
  return r.staged_recv != nullptr || static_cast<bool>(r.on_complete);
}

void check_tag(int tag, bool allow_any) {
  if (allow_any && tag == MPI_ANY_TAG) return;
  if (tag < 0 || tag > TAG_UB) fail(MPI_ERR_TAG, "invalid tag " + std::to_string(tag));
}

// Starts a send of (buf, count, type); the staged copy, if any, moves into `keep`.
Request start_send(const Communicator& comm, const void* buf, int count, const TypeMap& type,
                   int dest, int tag, bool synchronous, std::unique_ptr<SendBuffer>& keep) {
  check_tag(tag, false);
  // Nothing goes to MPI_PROC_NULL: the buffer is not read (nor packed), as in Open MPI.
  auto data = std::make_unique<SendBuffer>(buf, dest == MPI_PROC_NULL ? 0 : count, type);
  Request r = synchronous ? comm.issend_bytes(data->ptr, data->bytes, dest, tag)
                          : comm.isend_bytes(data->ptr, data->bytes, dest, tag);
  if (data->staging.data) keep = std::move(data);
  return r;
}

Request start_recv(const Communicator& comm, void* buf, int count,
                   const std::shared_ptr<const TypeMap>& type, int source, int tag,
                   std::unique_ptr<RecvBuffer>& keep) {
  auto area = std::make_unique<RecvBuffer>(buf, count, type);
  Request r = comm.irecv_bytes(area->ptr, area->capacity, source, tag);
  if (area->staging.data) keep = std::move(area);
  return r;
}

void release(MPI_Request* handle, sempi_mpi_request& r) {
  r.request = Request();
  r.staged_send.reset();
  r.staged_recv.reset();
  r.on_complete = nullptr;
  if (r.persistent) {
    r.active = false;
    return;
  }
  r.magic = 0;
  delete &r;
  if (handle != nullptr) *handle = MPI_REQUEST_NULL;
}

// MPI_Send, MPI_Ssend and MPI_Rsend.
int blocking_send(const char* function, bool synchronous, const void* buf, int count,
                  MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) noexcept {
  return guarded(comm, function, [&] {
    const auto& c = comm_of(comm);
    check_count(count);
    const SendBuffer data(buf, dest == MPI_PROC_NULL ? 0 : count, *type_of(datatype));
    check_tag(tag, false);
    if (synchronous) {
      c.ssend_bytes(data.ptr, data.bytes, dest, tag);
    } else {
      c.send_bytes(data.ptr, data.bytes, dest, tag);
    }
  });
}

// MPI_Isend, MPI_Issend and MPI_Irsend.
int nonblocking_send(const char* function, bool synchronous, const void* buf, int count,
                     MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                     MPI_Request* request) noexcept {
  return guarded(comm, function, [&] {
    require_output(request, "request");
    const auto& c = comm_of(comm);
    check_count(count);
    std::unique_ptr<SendBuffer> keep;
    Request r = start_send(c, buf, count, *type_of(datatype), dest, tag, synchronous, keep);
    *request = make_request(sempi_mpi_request::Kind::send, std::move(r), errhandler_slot_of(comm));
    (*request)->staged_send = std::move(keep);
  });
}

// The outcome of one request completion.
struct Outcome {
  int code = MPI_SUCCESS;
  std::string message;
};

// Completes an active request (blocking until it finishes if `block`): unpacks staged data,
// runs the completion hook, fills the status and releases the request. Returns nullopt if it
// has not finished and `block` is false. Never throws: failures come back in the Outcome.
std::optional<Outcome> complete(MPI_Request* handle, sempi_mpi_request& r, bool block,
                                MPI_Status* status) noexcept {
  if (!r.active) {  // inactive persistent request
    empty_status(status);
    return Outcome{};
  }
  Outcome outcome;
  bool failed = true;  // until the operation is known to have succeeded
  try {
    std::optional<Status> s;
    if (block) {
      s = r.request.wait();
    } else {
      s = r.request.test();
      if (!s) return std::nullopt;
    }
    if (r.staged_recv && !s->cancelled) r.staged_recv->finish(s->bytes);
    if (r.on_complete && !s->cancelled) r.on_complete();
    to_mpi_status(*s, status);
    failed = false;
  } catch (const RequestError& e) {
    // A truncated receive has still matched a message: the status names it and counts what
    // was kept, and the kept part is unpacked like a complete message.
    outcome.code = current_error_code(&outcome.message);
    if (r.staged_recv) r.staged_recv->finish(e.status().bytes);
    to_mpi_status(e.status(), status);
  } catch (...) {
    outcome.code = current_error_code(&outcome.message);
    empty_status(status);
  }
  // A failed collective's transfers may still use its staging (see Staging).
  if (failed) {
    for (Staging& s : r.scratch) s.keep_until_exit();
  }
  release(handle, r);
  return outcome;
}

int report(MPI_Errhandler handler, const char* function, const Outcome& o) noexcept {
  if (o.code == MPI_SUCCESS) return MPI_SUCCESS;
  return raise_code(handler, function, o.code, o.message);
}

bool is_active(MPI_Request h) { return h != MPI_REQUEST_NULL && h->active; }

// Index of the first active request that completes; blocks. -1 if none is active.
int wait_for_any(int count, MPI_Request requests[]) {
  std::vector<Request> pending;
  std::vector<int> index;
  for (int i = 0; i < count; ++i) {
    if (!is_active(requests[i])) continue;
    if (requests[i]->request.is_null()) return i;  // nothing to wait for
    pending.push_back(requests[i]->request);
    index.push_back(i);
  }
  if (pending.empty()) return -1;
  try {
    const std::size_t which = Request::wait_any(pending);
    return index[which];
  } catch (const Error&) {
    // The failed request was moved out of `pending`: its copy is the null one.
    for (std::size_t k = 0; k < pending.size(); ++k) {
      if (pending[k].is_null()) return index[k];
    }
    throw;
  }
}

// The completion step of MPI_Waitsome / MPI_Testsome: completes every active request that
// has finished (request `finished`, if not negative, is known to have), reporting them in
// indices and statuses; errors per request go into the statuses (MPI 3.1 section 3.7.5).
int complete_some(const char* function, int incount, MPI_Request requests[], int finished,
                  int* outcount, int indices[], MPI_Status statuses[]) {
  int n = 0;
  MPI_Errhandler handler = MPI_ERRORS_RETURN;
  Outcome failed;
  for (int i = 0; i < incount; ++i) {
    if (!is_active(requests[i])) continue;
    MPI_Status* status = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[n];
    const MPI_Errhandler h = requests[i]->handler();
    const auto outcome = complete(&requests[i], *requests[i], i == finished, status);
    if (!outcome) continue;
    if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = outcome->code;
    if (outcome->code != MPI_SUCCESS && failed.code == MPI_SUCCESS) {
      failed = *outcome;
      handler = h;
    }
    indices[n++] = i;
  }
  *outcount = n;
  if (failed.code == MPI_SUCCESS) return MPI_SUCCESS;
  return raise_code(handler, function,
                    statuses == MPI_STATUSES_IGNORE ? failed.code : MPI_ERR_IN_STATUS,
                    failed.message);
}

}  // namespace

sempi_mpi_request* request_of(MPI_Request request, bool allow_null) {
  if (request == MPI_REQUEST_NULL) {
    if (!allow_null) fail(MPI_ERR_REQUEST, "the request is MPI_REQUEST_NULL");
    return nullptr;
  }
  if (request->magic != kRequestMagic) fail(MPI_ERR_REQUEST, "not a valid request handle");
  return request;
}

namespace {

// Fails with MPI_ERR_REQUEST; `index` >= 0 names the entry of MPI_Startall's array.
[[noreturn]] void fail_request(int index, const char* why) {
  fail(MPI_ERR_REQUEST,
       (index < 0 ? std::string() : "array_of_requests[" + std::to_string(index) + "]: ") + why);
}

// A persistent request that MPI_Start may start (`index` as for fail_request). Builds no
// string unless it fails: MPI_Startall runs it on every entry of every call.
sempi_mpi_request* startable(MPI_Request request, int index) {
  if (request == MPI_REQUEST_NULL) fail_request(index, "the request is MPI_REQUEST_NULL");
  sempi_mpi_request* r = request_of(request, false);
  if (!r->persistent) fail_request(index, "not a persistent request");
  if (r->active) fail_request(index, "the persistent request is already active");
  return r;
}

// The first entry of `requests` that repeats an earlier one, or -1; no allocation once this
// thread has sorted an array as long (persistent exchanges call MPI_Startall every step).
int first_repeated(int count, const MPI_Request requests[]) {
  thread_local std::vector<MPI_Request> sorted;
  sorted.assign(requests, requests + count);
  std::sort(sorted.begin(), sorted.end(), std::less<MPI_Request>());  // a total order
  if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) return -1;
  for (int i = 1; i < count; ++i) {
    if (std::find(requests, requests + i, requests[i]) != requests + i) return i;
  }
  return -1;
}

}  // namespace

MPI_Request make_request(sempi_mpi_request::Kind kind, Request request,
                         ErrhandlerSlot errhandler) {
  auto* r = new sempi_mpi_request;
  r->kind = kind;
  r->request = std::move(request);
  r->errhandler = std::move(errhandler);
  return r;
}

namespace {
// Set while this thread reaps: completing a request may run the program's code (a user
// reduction querying its datatype), whose MPI calls must not reap again under the same lock.
thread_local bool t_reaping = false;

// Finished: completed (and freed) now. Progress is driven only for those that write the
// program's memory on completion, or when `progress` is asked for (Wait and Test calls): the
// others are only looked at, so that a pending one does not cost every call a progress round.
bool reap_if_finished(sempi_mpi_request* r, bool progress) {
  bool done = true;
  try {
    done = progress || writes_on_completion(*r) ? r->request.test().has_value()
                                                : r->request.completed();
  } catch (...) {  // nobody is left to report a freed request's error to
  }
  if (done) complete(nullptr, *r, true, MPI_STATUS_IGNORE);  // frees it (not persistent)
  return done;
}

// Reaps every finished one of `list`.
void reap_all(std::list<sempi_mpi_request*>& list, bool progress) {
  for (auto it = list.begin(); it != list.end();) {
    if (reap_if_finished(*it, progress)) {
      it = list.erase(it);
    } else {
      ++it;
    }
  }
}

// All of them (Wait and Test calls), or after every other call those that write memory and
// the next kReapedPerCall others in turn.
void reap(bool all) {
  if (t_reaping) return;
  std::lock_guard lock(g_detached_mu);
  t_reaping = true;
  struct Reset {
    ~Reset() { t_reaping = false; }
  } reset;
  reap_all(g_detached_writing, true);
  if (all) {
    reap_all(g_detached, true);
  } else {
    for (std::size_t i = std::min(kReapedPerCall, g_detached.size()); i > 0; --i) {
      if (reap_if_finished(g_detached.front(), false)) {
        g_detached.pop_front();
      } else {
        g_detached.splice(g_detached.end(), g_detached, g_detached.begin());  // next call: others
      }
    }
  }
  g_detached_count.store(g_detached_writing.size() + g_detached.size(), std::memory_order_relaxed);
}
}  // namespace

void reap_detached() { reap(true); }

void reap_detached_per_call() {
  if (g_detached_count.load(std::memory_order_relaxed) != 0) reap(false);
}

void settle_detached_at_finalize() {
  {
    std::lock_guard lock(g_detached_mu);
    for (auto* list : {&g_detached_writing, &g_detached}) {
      for (sempi_mpi_request* r : *list) {
        // A freed receive nothing matched will never complete: cancelled, as MPI_Finalize
        // does with any receive still posted. Sends run on: finalize flushes what is queued.
        if (r->kind == sempi_mpi_request::Kind::recv) r->request.cancel();
      }
    }
  }
  reap_detached();
}

void discard_detached() noexcept {
  std::lock_guard lock(g_detached_mu);
  for (auto* list : {&g_detached_writing, &g_detached}) {
    for (sempi_mpi_request* r : *list) {
      r->persistent = false;
      release(nullptr, *r);
    }
    list->clear();
  }
  g_detached_count.store(0, std::memory_order_relaxed);
}

namespace {

// The common start of the calls that complete an array of requests: the array (null only when
// empty), its count and every handle are checked before anything completes, and finished
// detached requests are reaped.
void check_request_array(int count, MPI_Request requests[]) {
  if (count > 0) require_output(requests, "array_of_requests");
  check_count(count);
  for (int i = 0; i < count; ++i) request_of(requests[i]);
  // A nonpersistent request twice would be completed, and freed, twice (erroneous, and cheap
  // to refuse: one pass, each request stamped with this call's number). A persistent one twice
  // is harmless: the second finds it inactive.
  static std::atomic<std::uint64_t> calls{0};
  const std::uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL || requests[i]->persistent) continue;
    if (requests[i]->listed_in_call.exchange(call, std::memory_order_relaxed) == call) {
      fail(MPI_ERR_REQUEST,
           "the same request appears twice in the array (index " + std::to_string(i) + ")");
    }
  }
  reap_detached();
}

}  // namespace

}  // namespace sempi::mpi

using namespace sempi::mpi;  // NOLINT(google-build-using-namespace): this file implements it
using Kind = sempi_mpi_request::Kind;
using Mode = sempi_mpi_request::Mode;

extern "C" {

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
             MPI_Comm comm) {
  return blocking_send("MPI_Send", false, buf, count, datatype, dest, tag, comm);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm) {
  return blocking_send("MPI_Ssend", true, buf, count, datatype, dest, tag, comm);
}

// Ready mode (MPI 3.1 section 3.4) promises that the receive is already posted; a standard
// send is a correct implementation of it.
int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm) {
  return blocking_send("MPI_Rsend", false, buf, count, datatype, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  return guarded(comm, "MPI_Recv", [&] {
    const auto& c = comm_of(comm);
    check_count(count);
    check_tag(tag, true);
    RecvBuffer area(buf, count, type_of(datatype));
    receive_into(area, status, [&] { return c.recv_bytes(area.ptr, area.capacity, source, tag); });
  });
}

int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return nonblocking_send("MPI_Isend", false, buf, count, datatype, dest, tag, comm, request);
}

int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request* request) {
  return nonblocking_send("MPI_Issend", true, buf, count, datatype, dest, tag, comm, request);
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request* request) {
  return nonblocking_send("MPI_Irsend", false, buf, count, datatype, dest, tag, comm, request);
}

int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return guarded(comm, "MPI_Irecv", [&] {
    require_output(request, "request");
    const auto& c = comm_of(comm);
    check_count(count);
    check_tag(tag, true);
    std::unique_ptr<RecvBuffer> keep;
    sempi::Request r = start_recv(c, buf, count, type_of(datatype), source, tag, keep);
    *request = make_request(Kind::recv, std::move(r), errhandler_slot_of(comm));
    (*request)->staged_recv = std::move(keep);
  });
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  return guarded(comm, "MPI_Sendrecv", [&] {
    const auto& c = comm_of(comm);
    check_count(sendcount, "send count");
    check_count(recvcount, "receive count");
    check_tag(sendtag, false);
    check_tag(recvtag, true);
    const SendBuffer out(sendbuf, sendcount, *type_of(sendtype));
    RecvBuffer in(recvbuf, recvcount, type_of(recvtype));
    receive_into(in, status, [&] {
      // Both halves checked first, started together (no deadlock between pairs), and
      // neither left pending when the other fails.
      return c.sendrecv_bytes(out.ptr, out.bytes, dest, sendtag, in.ptr, in.capacity, source,
                              recvtag);
    });
  });
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return guarded(comm, "MPI_Sendrecv_replace", [&] {
    const auto& c = comm_of(comm);
    check_count(count);
    check_tag(sendtag, false);
    check_tag(recvtag, true);
    const auto& type = type_of(datatype);
    // The outgoing data is always copied: the same buffer receives meanwhile. Both stagings
    // are freed even on failure: sendrecv_bytes returns only once neither transfer runs.
    Staging out{false};
    const auto bytes = static_cast<std::size_t>(data_bytes(count, *type));
    out.allocate(bytes);
    {
      const SendBuffer view(buf, count, *type);
      if (bytes > 0) std::memcpy(out.data.get(), view.ptr, bytes);
    }
    Staging in{false};
    in.allocate(bytes);
    sempi::Status got;
    try {
      got = c.sendrecv_bytes(out.data.get(), bytes, dest, sendtag, in.data.get(), bytes, source,
                             recvtag);
    } catch (const sempi::RequestError& e) {  // truncated: the status still describes the message
      type->unpack(in.data.get(), static_cast<std::int64_t>(e.status().bytes), count, at(buf, 0));
      to_mpi_status(e.status(), status);
      throw;
    }
    type->unpack(in.data.get(), static_cast<std::int64_t>(got.bytes), count, at(buf, 0));
    to_mpi_status(got, status);
  });
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return guarded(comm, "MPI_Probe", [&] {
    const auto& c = comm_of(comm);
    check_tag(tag, true);
    to_mpi_status(c.probe(source, tag), status);
  });
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  return guarded(comm, "MPI_Iprobe", [&] {
    require_output(flag, "flag");
    const auto& c = comm_of(comm);
    check_tag(tag, true);
    const auto s = c.iprobe(source, tag);
    *flag = s ? 1 : 0;
    if (s) to_mpi_status(*s, status);
  });
}

int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return guarded(MPI_COMM_WORLD, "MPI_Get_count", [&] {
    const auto& type = type_of(datatype, false);
    require_input(status, "status");
    require_output(count, "count");
    const MPI_Count bytes = status->sempi_bytes;
    if (type->size == 0) {
      *count = 0;
    } else if (bytes % type->size != 0 || bytes / type->size > INT_MAX) {
      *count = MPI_UNDEFINED;  // not whole elements, or more than an int holds (MPI 3.1 3.2.5)
    } else {
      *count = static_cast<int>(bytes / type->size);
    }
  });
}

int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return guarded(MPI_COMM_WORLD, "MPI_Get_elements", [&] {
    const auto& type = type_of(datatype, false);
    require_input(status, "status");
    require_output(count, "count");
    const auto n = type->elements_in(status->sempi_bytes);
    *count = n < 0 || n > INT_MAX ? MPI_UNDEFINED : static_cast<int>(n);
  });
}

int MPI_Test_cancelled(const MPI_Status* status, int* flag) {
  return guarded(MPI_COMM_WORLD, "MPI_Test_cancelled", [&] {
    require_input(status, "status");
    require_output(flag, "flag");
    *flag = status->sempi_cancelled;
  });
}


int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return guarded(MPI_COMM_WORLD, "MPI_Wait", [&] {
    require_output(request, "request");
    sempi_mpi_request* r = request_of(*request);
    reap_detached();
    if (r == nullptr) {
      empty_status(status);
      return MPI_SUCCESS;
    }
    const MPI_Errhandler handler = r->handler();
    return report(handler, "MPI_Wait", *complete(request, *r, true, status));
  });
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return guarded(MPI_COMM_WORLD, "MPI_Test", [&] {
    require_output(request, "request");
    require_output(flag, "flag");
    sempi_mpi_request* r = request_of(*request);
    reap_detached();
    if (r == nullptr) {
      *flag = 1;
      empty_status(status);
      return MPI_SUCCESS;
    }
    const MPI_Errhandler handler = r->handler();
    const auto outcome = complete(request, *r, false, status);
    *flag = outcome ? 1 : 0;
    return outcome ? report(handler, "MPI_Test", *outcome) : MPI_SUCCESS;
  });
}

namespace {

// MPI_Waitall's completion of every request, for MPI_Waitall and for MPI_Testall once all are
// complete: errors name `function`, the call the program made.
int complete_all(const char* function, int count, MPI_Request requests[], MPI_Status statuses[]) {
  MPI_Errhandler handler = MPI_ERRORS_RETURN;
  Outcome first;
  for (int i = 0; i < count; ++i) {
    MPI_Status* status = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
    if (requests[i] == MPI_REQUEST_NULL) {
      empty_status(status);
      if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = MPI_SUCCESS;
      continue;
    }
    const MPI_Errhandler h = requests[i]->handler();
    const Outcome o = *complete(&requests[i], *requests[i], true, status);
    if (o.code != MPI_SUCCESS && first.code == MPI_SUCCESS) {
      first = o;
      handler = h;
    }
    if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = o.code;
  }
  if (first.code == MPI_SUCCESS) return MPI_SUCCESS;
  // With statuses, the per-request codes are in them (MPI 3.1 section 3.7.5).
  return raise_code(handler, function,
                    statuses == MPI_STATUSES_IGNORE ? first.code : MPI_ERR_IN_STATUS,
                    first.message);
}

}  // namespace

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Waitall", [&] {
    check_request_array(count, requests);
    return complete_all("MPI_Waitall", count, requests, statuses);
  });
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Testall", [&] {
    require_output(flag, "flag");
    check_request_array(count, requests);
    // Complete nothing unless everything is complete (MPI 3.1 section 3.7.5). Stopping at the
    // first incomplete one leaves no collective behind: every test advances all of them.
    for (int i = 0; i < count; ++i) {
      if (!is_active(requests[i])) continue;
      try {
        if (!requests[i]->request.test()) {
          *flag = 0;
          return MPI_SUCCESS;
        }
      } catch (const sempi::Error&) {  // finished with an error: reported below
      }
    }
    *flag = 1;
    return complete_all("MPI_Testall", count, requests, statuses);
  });
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  return guarded(MPI_COMM_WORLD, "MPI_Waitany", [&] {
    require_output(index, "index");
    check_request_array(count, requests);
    const int which = wait_for_any(count, requests);
    if (which < 0) {
      *index = MPI_UNDEFINED;
      empty_status(status);
      return MPI_SUCCESS;
    }
    *index = which;
    const MPI_Errhandler handler = requests[which]->handler();
    return report(handler, "MPI_Waitany",
                  *complete(&requests[which], *requests[which], true, status));
  });
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  return guarded(MPI_COMM_WORLD, "MPI_Testany", [&] {
    require_output(index, "index");
    require_output(flag, "flag");
    check_request_array(count, requests);
    bool any_active = false;
    for (int i = 0; i < count; ++i) {
      if (!is_active(requests[i])) continue;
      any_active = true;
      const MPI_Errhandler handler = requests[i]->handler();
      const auto outcome = complete(&requests[i], *requests[i], false, status);
      if (outcome) {
        *index = i;
        *flag = 1;
        return report(handler, "MPI_Testany", *outcome);
      }
    }
    *index = MPI_UNDEFINED;
    *flag = any_active ? 0 : 1;
    if (!any_active) empty_status(status);
    return MPI_SUCCESS;
  });
}

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Waitsome", [&] {
    require_output(outcount, "outcount");
    if (incount > 0) require_output(indices, "array_of_indices");
    check_request_array(incount, requests);
    const int first = wait_for_any(incount, requests);
    if (first < 0) {
      *outcount = MPI_UNDEFINED;
      return MPI_SUCCESS;
    }
    return complete_some("MPI_Waitsome", incount, requests, first, outcount, indices, statuses);
  });
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Testsome", [&] {
    require_output(outcount, "outcount");
    if (incount > 0) require_output(indices, "array_of_indices");
    check_request_array(incount, requests);
    if (std::none_of(requests, requests + incount, is_active)) {
      *outcount = MPI_UNDEFINED;
      return MPI_SUCCESS;
    }
    return complete_some("MPI_Testsome", incount, requests, -1, outcount, indices, statuses);
  });
}

int MPI_Cancel(MPI_Request* request) {
  return guarded(MPI_COMM_WORLD, "MPI_Cancel", [&] {
    require_output(request, "request");
    sempi_mpi_request* r = request_of(*request, false);
    // Only receives that have not matched can be cancelled; a send runs to completion and
    // MPI_Test_cancelled then reports false, as MPI allows.
    if (r->active && r->kind == Kind::recv) r->request.cancel();
  });
}

int MPI_Request_free(MPI_Request* request) {
  return guarded(MPI_COMM_WORLD, "MPI_Request_free", [&] {
    require_output(request, "request");
    sempi_mpi_request* r = request_of(*request, false);
    *request = MPI_REQUEST_NULL;
    if (!r->active || r->request.is_null()) {
      r->persistent = false;
      release(nullptr, *r);
      return;
    }
    // Still running: it completes in the background; its buffers live until then.
    r->persistent = false;  // so completion frees it
    std::lock_guard lock(g_detached_mu);
    (writes_on_completion(*r) ? g_detached_writing : g_detached).push_back(r);
    g_detached_count.store(g_detached_writing.size() + g_detached.size(),
                           std::memory_order_relaxed);
  });
}

namespace {

int persistent_init(const char* function, Mode mode, const void* buf, int count,
                    MPI_Datatype datatype, int peer, int tag, MPI_Comm comm,
                    MPI_Request* request) {
  return guarded(comm, function, [&] {
    require_output(request, "request");
    const auto& c = comm_of(comm);
    check_count(count);
    check_tag(tag, mode == Mode::recv);
    const int size = c.size();
    const bool any = mode == Mode::recv && peer == MPI_ANY_SOURCE;
    if (peer != MPI_PROC_NULL && !any && (peer < 0 || peer >= size)) {
      fail(MPI_ERR_RANK, "rank " + std::to_string(peer) + " is out of range for a communicator "
                         "of size " + std::to_string(size));
    }
    auto* r = new sempi_mpi_request;
    r->kind = mode == Mode::recv ? Kind::recv : Kind::send;
    r->persistent = true;
    r->active = false;
    r->errhandler = errhandler_slot_of(comm);
    r->args = {mode, buf, count, type_of(datatype), peer, tag, c};
    *request = r;
  });
}

}  // namespace

int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request* request) {
  return persistent_init("MPI_Send_init", Mode::send, buf, count, datatype, dest, tag, comm,
                         request);
}

int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request) {
  return persistent_init("MPI_Ssend_init", Mode::ssend, buf, count, datatype, dest, tag, comm,
                         request);
}

int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request) {
  return persistent_init("MPI_Bsend_init", Mode::bsend, buf, count, datatype, dest, tag, comm,
                         request);
}

// A ready send is a standard send here, as MPI_Rsend (the receive is posted by contract).
int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request) {
  return persistent_init("MPI_Rsend_init", Mode::send, buf, count, datatype, dest, tag, comm,
                         request);
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag,
                  MPI_Comm comm, MPI_Request* request) {
  return persistent_init("MPI_Recv_init", Mode::recv, buf, count, datatype, source, tag, comm,
                         request);
}

int MPI_Start(MPI_Request* request) {
  return guarded(MPI_COMM_WORLD, "MPI_Start", [&] {
    require_output(request, "request");
    sempi_mpi_request* r = startable(*request, -1);
    const auto& a = r->args;
    return guarded_handler(r->handler(), "MPI_Start", [&] {
      if (a.mode == Mode::recv) {
        r->request = start_recv(a.comm, const_cast<void*>(a.buf), a.count, a.type, a.peer, a.tag,
                                r->staged_recv);
      } else if (a.mode == Mode::bsend) {
        // Complete once the message is in the buffer, as MPI_Ibsend (MPI 3.1 section 3.9).
        buffered_send(a.comm, a.buf, a.count, *a.type, a.peer, a.tag);
        r->request = sempi::Request();
      } else {
        r->request = start_send(a.comm, a.buf, a.count, *a.type, a.peer, a.tag,
                                a.mode == Mode::ssend, r->staged_send);
      }
      r->active = true;
    });
  });
}

int MPI_Startall(int count, MPI_Request requests[]) {
  return guarded(MPI_COMM_WORLD, "MPI_Startall", [&] {
    if (count > 0) require_output(requests, "array_of_requests");
    check_count(count);
    // Every request is checked before any starts: a bad entry leaves none of them active.
    const int repeated = first_repeated(count, requests);
    for (int i = 0; i < count; ++i) {
      startable(requests[i], i);
      if (i == repeated) fail_request(i, "the same request appears twice in the array");
    }
    for (int i = 0; i < count; ++i) {
      const int code = MPI_Start(&requests[i]);
      if (code != MPI_SUCCESS) return code;
    }
    return MPI_SUCCESS;
  });
}

}  // extern "C"
