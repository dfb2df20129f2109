// sempi::Communicator collectives: argument validation (always on), algorithm selection
// (coll/tuning.hpp) and dispatch to the schedule builders in src/coll/.

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>

#include "coll/abandon.hpp"
#include "coll/algorithms.hpp"
#include "coll/tuning.hpp"
#include "core/runtime.hpp"
#include "sempi/communicator.hpp"

namespace sempi {
namespace {

using detail::OpKind;
using detail::coll::Reduction;
using detail::coll::Schedule;
using detail::coll::Thresholds;

using Bytes = std::span<const std::size_t>;

std::shared_ptr<const detail::CommState> checked(const std::shared_ptr<detail::CommState>& state,
                                                 const char* operation) {
  if (!state) throw Error(ErrorClass::comm, std::string(operation) + ": null communicator");
  return state;
}

void check_root(const detail::CommState& comm, int root, const char* operation) {
  if (root < 0 || root >= comm.size()) {
    throw Error(ErrorClass::root, std::string(operation) + ": root " + std::to_string(root) +
                                      " is out of range for a communicator of size " +
                                      std::to_string(comm.size()));
  }
}

void check_count(int count, const char* operation) {
  if (count < 0) {
    throw Error(ErrorClass::count,
                std::string(operation) + ": negative count " + std::to_string(count));
  }
}

// A buffer that must be a real buffer (not IN_PLACE, not null when it holds data).
void check_buffer(const void* buf, std::size_t bytes, const char* operation, const char* role) {
  if (is_in_place(buf)) {
    throw Error(ErrorClass::buffer, std::string(operation) + ": IN_PLACE is not allowed as the " +
                                        role + " buffer here");
  }
  if (buf == nullptr && bytes > 0) {
    throw Error(ErrorClass::buffer, std::string(operation) + ": null " + role + " buffer for " +
                                        std::to_string(bytes) + " bytes");
  }
}

void check_type(const ElementType& type, const char* operation) {
  if (type.size == 0) {
    throw Error(ErrorClass::type, std::string(operation) + ": element type of size 0");
  }
}

void check_span(Bytes span, std::size_t expected, const char* operation, const char* what) {
  if (span.size() != expected) {
    throw Error(ErrorClass::arg, std::string(operation) + ": " + what + " has " +
                                     std::to_string(span.size()) + " entries, expected " +
                                     std::to_string(expected) + " (one per rank)");
  }
}

std::size_t extent(Bytes bytes, Bytes displs) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] > 0) end = std::max(end, displs[i] + bytes[i]);
  }
  return end;
}

// Checks and builds a collective's schedule with `build(comm, args..., operation)`. A rank whose
// checks fail takes no part in the collective: it abandons it (coll/abandon.hpp), so the other
// members fail at once and the sequence numbers stay in step, and the error goes on. So every
// check that can fail comes before the schedule takes its number (make()).
template <class Build, class... Args>
std::shared_ptr<Schedule> scheduled(OpKind kind, const std::shared_ptr<detail::CommState>& state,
                                    const char* operation, Build build, Args&&... args) {
  const auto comm = checked(state, operation);
  const detail::coll::CollectiveCall call(*comm, kind);
  try {
    return build(comm, std::forward<Args>(args)..., operation);
  } catch (const Error& e) {
    call.failed(e.error_class(), e.what());
    throw;
  } catch (const std::exception& e) {  // out of memory, say
    call.failed(ErrorClass::other, std::string(operation) + ": " + e.what());
    throw;
  }
}

std::shared_ptr<Schedule> make(const std::shared_ptr<const detail::CommState>& comm, OpKind kind,
                               const char* operation) {
  return std::make_shared<Schedule>(comm, kind, operation);
}

std::byte* as_bytes(void* p) { return static_cast<std::byte*>(p); }
const std::byte* as_bytes(const void* p) { return static_cast<const std::byte*>(p); }
// A send buffer in the algorithms' convention: nullptr means in place.
const std::byte* input_or_null(const void* p) { return is_in_place(p) ? nullptr : as_bytes(p); }

// --- per-operation schedule builders (shared by the blocking and nonblocking forms) ---------

std::shared_ptr<Schedule> build_barrier(const std::shared_ptr<const detail::CommState>& comm,
                                        const char* operation) {
  auto s = make(comm, OpKind::barrier, operation);
  if (s->size() > 1) detail::coll::barrier_dissemination(*s);
  return s;
}

std::shared_ptr<Schedule> build_bcast(const std::shared_ptr<const detail::CommState>& comm,
                                      void* buf, std::size_t bytes, int root,
                                      const char* operation) {
  check_root(*comm, root, operation);
  check_buffer(buf, bytes, operation, "data");
  // Before the number: see scheduled().
  const auto t = Thresholds::from_environment(detail::Runtime::get().engine().job_oversubscribed());
  auto s = make(comm, OpKind::bcast, operation);
  if (s->size() == 1 || bytes == 0) return s;
  switch (detail::coll::choose_bcast(t, bytes, s->size())) {
    case detail::coll::BcastAlgorithm::binomial:
      detail::coll::bcast_binomial(*s, as_bytes(buf), bytes, root);
      break;
    case detail::coll::BcastAlgorithm::scatter_allgather:
      detail::coll::bcast_scatter_allgather(*s, as_bytes(buf), bytes, root);
      break;
  }
  return s;
}

std::shared_ptr<Schedule> build_allreduce(const std::shared_ptr<const detail::CommState>& comm,
                                          const void* send, void* recv, int count,
                                          const ElementType& type, const Op& op,
                                          const char* operation) {
  check_count(count, operation);
  check_type(type, operation);
  op.check(type, operation);
  const Reduction red{op, type};
  const std::size_t bytes = red.bytes(count);
  if (!is_in_place(send)) check_buffer(send, bytes, operation, "send");
  check_buffer(recv, bytes, operation, "receive");
  const auto t = Thresholds::from_environment();  // also on one rank: bad settings fail alike
  auto s = make(comm, OpKind::allreduce, operation);
  if (count == 0) return s;
  const auto algorithm =
      detail::coll::choose_allreduce(t, bytes, count, s->size(), op.commutative());
  const bool algorithm_reads_send = s->size() > 1 &&
                                    algorithm == detail::coll::AllreduceAlgorithm::rabenseifner;
  if (!is_in_place(send) && !algorithm_reads_send) s->copy(recv, send, bytes);
  if (s->size() == 1) return s;
  switch (algorithm) {
    case detail::coll::AllreduceAlgorithm::recursive_doubling:
      detail::coll::allreduce_recursive_doubling(*s, red, as_bytes(recv), count);
      break;
    case detail::coll::AllreduceAlgorithm::rabenseifner:
      detail::coll::allreduce_rabenseifner(*s, red, input_or_null(send), as_bytes(recv), count);
      break;
    case detail::coll::AllreduceAlgorithm::ring:
      detail::coll::allreduce_ring(*s, red, as_bytes(recv), count);
      break;
  }
  return s;
}

}  // namespace

void Communicator::refuse_collective(const char* operation, const Error& error) const {
  // The operations whose element counts or buffers the header's templates check.
  static constexpr std::pair<std::string_view, OpKind> kKinds[] = {
      {"bcast", OpKind::bcast},          {"ibcast", OpKind::bcast},
      {"scatter", OpKind::scatter},      {"iscatter", OpKind::scatter},
      {"scatterv", OpKind::scatter},     {"iscatterv", OpKind::scatter},
      {"gather", OpKind::gather},        {"igather", OpKind::gather},
      {"gatherv", OpKind::gather},       {"igatherv", OpKind::gather},
      {"allgather", OpKind::allgather},  {"iallgather", OpKind::allgather},
      {"allgatherv", OpKind::allgather}, {"iallgatherv", OpKind::allgather},
      {"alltoall", OpKind::alltoall},    {"ialltoall", OpKind::alltoall},
      {"alltoallv", OpKind::alltoall},   {"ialltoallv", OpKind::alltoall},
  };
  const auto* entry = std::find_if(std::begin(kKinds), std::end(kKinds),
                                   [&](const auto& k) { return k.first == operation; });
  if (state_ && entry != std::end(kKinds)) {
    detail::coll::CollectiveCall(*state_, entry->second).failed(error.error_class(), error.what());
  }
  throw error;
}

// --- barrier ---------------------------------------------------------------------------------

void Communicator::barrier() const {
  scheduled(OpKind::barrier, state_, "barrier", build_barrier)->run();
}

Request Communicator::ibarrier() const {
  return Request(scheduled(OpKind::barrier, state_, "ibarrier", build_barrier)->start());
}

// --- bcast -----------------------------------------------------------------------------------

void Communicator::bcast_bytes(void* buf, std::size_t bytes, int root) const {
  scheduled(OpKind::bcast, state_, "bcast", build_bcast, buf, bytes, root)->run();
}

Request Communicator::ibcast_bytes(void* buf, std::size_t bytes, int root) const {
  return Request(
      scheduled(OpKind::bcast, state_, "ibcast", build_bcast, buf, bytes, root)->start());
}

// --- scatter / gather ------------------------------------------------------------------------

namespace {

std::shared_ptr<Schedule> build_scatter(const std::shared_ptr<const detail::CommState>& comm,
                                        const void* send, void* recv, std::size_t bytes, int root,
                                        const char* op) {
  check_root(*comm, root, op);
  const bool is_root = comm->rank == root;
  if (is_root) check_buffer(send, bytes * static_cast<std::size_t>(comm->size()), op, "send");
  const bool in_place = is_root && is_in_place(recv);
  if (!in_place) check_buffer(recv, bytes, op, "receive");
  auto s = make(comm, OpKind::scatter, op);
  if (bytes > 0) {
    if (s->size() == 1) {
      if (!in_place) s->copy(recv, send, bytes);
    } else {
      detail::coll::scatter_binomial(*s, as_bytes(send), in_place ? nullptr : as_bytes(recv),
                                     bytes, root);
    }
  }
  return s;
}

}  // namespace

void Communicator::scatter_bytes(const void* send, void* recv, std::size_t bytes, int root) const {
  scheduled(OpKind::scatter, state_, "scatter", build_scatter, send, recv, bytes, root)->run();
}

Request Communicator::iscatter_bytes(const void* send, void* recv, std::size_t bytes,
                                     int root) const {
  return Request(
      scheduled(OpKind::scatter, state_, "iscatter", build_scatter, send, recv, bytes, root)
          ->start());
}

namespace {

std::shared_ptr<Schedule> build_scatterv(const std::shared_ptr<const detail::CommState>& comm,
                                         const void* send, std::span<const std::size_t> send_bytes,
                                         std::span<const std::size_t> send_displs, void* recv,
                                         std::size_t recv_bytes, int root, const char* op) {
  check_root(*comm, root, op);
  const bool is_root = comm->rank == root;
  const auto p = static_cast<std::size_t>(comm->size());
  const bool in_place = is_root && is_in_place(recv);
  if (is_root) {
    check_span(send_bytes, p, op, "send_bytes");
    check_span(send_displs, p, op, "send_displs");
    check_buffer(send, extent(send_bytes, send_displs), op, "send");
    const std::size_t mine = send_bytes[static_cast<std::size_t>(root)];
    if (!in_place && recv_bytes != mine) {
      throw Error(ErrorClass::count, std::string(op) + ": the root sends itself " +
                                         std::to_string(mine) + " bytes but receives " +
                                         std::to_string(recv_bytes));
    }
  }
  if (!in_place) check_buffer(recv, recv_bytes, op, "receive");
  auto s = make(comm, OpKind::scatter, op);
  detail::coll::scatterv_linear(*s, as_bytes(send), send_bytes, send_displs,
                                in_place ? nullptr : as_bytes(recv), recv_bytes, root);
  return s;
}

}  // namespace

void Communicator::scatterv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                                  std::span<const std::size_t> send_displs, void* recv,
                                  std::size_t recv_bytes, int root) const {
  scheduled(OpKind::scatter, state_, "scatterv", build_scatterv, send, send_bytes, send_displs,
            recv, recv_bytes, root)
      ->run();
}

Request Communicator::iscatterv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                                      std::span<const std::size_t> send_displs, void* recv,
                                      std::size_t recv_bytes, int root) const {
  return Request(scheduled(OpKind::scatter, state_, "iscatterv", build_scatterv, send, send_bytes,
                           send_displs, recv, recv_bytes, root)
                     ->start());
}

namespace {

std::shared_ptr<Schedule> build_gather(const std::shared_ptr<const detail::CommState>& comm,
                                       const void* send, std::size_t bytes, void* recv, int root,
                                       const char* op) {
  check_root(*comm, root, op);
  const bool is_root = comm->rank == root;
  const bool in_place = is_root && is_in_place(send);
  if (!in_place) check_buffer(send, bytes, op, "send");
  if (is_root) check_buffer(recv, bytes * static_cast<std::size_t>(comm->size()), op, "receive");
  auto s = make(comm, OpKind::gather, op);
  if (bytes > 0) {
    if (s->size() == 1) {
      if (!in_place) s->copy(recv, send, bytes);
    } else {
      detail::coll::gather_binomial(*s, in_place ? nullptr : as_bytes(send), as_bytes(recv),
                                    bytes, root);
    }
  }
  return s;
}

}  // namespace

void Communicator::gather_bytes(const void* send, std::size_t bytes, void* recv, int root) const {
  scheduled(OpKind::gather, state_, "gather", build_gather, send, bytes, recv, root)->run();
}

Request Communicator::igather_bytes(const void* send, std::size_t bytes, void* recv,
                                    int root) const {
  return Request(
      scheduled(OpKind::gather, state_, "igather", build_gather, send, bytes, recv, root)->start());
}

namespace {

std::shared_ptr<Schedule> build_gatherv(const std::shared_ptr<const detail::CommState>& comm,
                                        const void* send, std::size_t send_bytes, void* recv,
                                        std::span<const std::size_t> recv_bytes,
                                        std::span<const std::size_t> recv_displs, int root,
                                        const char* op) {
  check_root(*comm, root, op);
  const bool is_root = comm->rank == root;
  const auto p = static_cast<std::size_t>(comm->size());
  const bool in_place = is_root && is_in_place(send);
  if (!in_place) check_buffer(send, send_bytes, op, "send");
  if (is_root) {
    check_span(recv_bytes, p, op, "recv_bytes");
    check_span(recv_displs, p, op, "recv_displs");
    check_buffer(recv, extent(recv_bytes, recv_displs), op, "receive");
    const std::size_t mine = recv_bytes[static_cast<std::size_t>(root)];
    if (!in_place && send_bytes != mine) {
      throw Error(ErrorClass::count, std::string(op) + ": the root sends itself " +
                                         std::to_string(send_bytes) + " bytes but expects " +
                                         std::to_string(mine));
    }
  }
  auto s = make(comm, OpKind::gather, op);
  detail::coll::gatherv_linear(*s, in_place ? nullptr : as_bytes(send), send_bytes,
                               as_bytes(recv), recv_bytes, recv_displs, root);
  return s;
}

}  // namespace

void Communicator::gatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                                 std::span<const std::size_t> recv_bytes,
                                 std::span<const std::size_t> recv_displs, int root) const {
  scheduled(OpKind::gather, state_, "gatherv", build_gatherv, send, send_bytes, recv, recv_bytes,
            recv_displs, root)
      ->run();
}

Request Communicator::igatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                                     std::span<const std::size_t> recv_bytes,
                                     std::span<const std::size_t> recv_displs, int root) const {
  return Request(scheduled(OpKind::gather, state_, "igatherv", build_gatherv, send, send_bytes,
                           recv, recv_bytes, recv_displs, root)
                     ->start());
}

// --- allgather -------------------------------------------------------------------------------

namespace {

std::shared_ptr<Schedule> build_allgather(const std::shared_ptr<const detail::CommState>& comm,
                                          const void* send, std::size_t bytes, void* recv,
                                          const char* op) {
  const auto p = static_cast<std::size_t>(comm->size());
  const bool in_place = is_in_place(send);
  if (!in_place) check_buffer(send, bytes, op, "send");
  check_buffer(recv, bytes * p, op, "receive");
  const auto t = Thresholds::from_environment();  // before the number: see scheduled()
  auto s = make(comm, OpKind::allgather, op);
  if (bytes > 0) {
    std::byte* out = as_bytes(recv);
    if (!in_place) s->copy(out + bytes * static_cast<std::size_t>(comm->rank), send, bytes);
    if (p > 1) {
      if (detail::coll::choose_allgather(t, bytes * p, comm->size()) ==
          detail::coll::AllgatherAlgorithm::bruck) {
        detail::coll::allgather_bruck(*s, out, bytes);
      } else {
        std::vector<std::size_t> sizes(p, bytes);
        std::vector<std::size_t> displs(p);
        for (std::size_t i = 0; i < p; ++i) displs[i] = i * bytes;
        detail::coll::allgatherv_ring(*s, out, sizes, displs);
      }
    }
  }
  return s;
}

}  // namespace

void Communicator::allgather_bytes(const void* send, std::size_t bytes, void* recv) const {
  scheduled(OpKind::allgather, state_, "allgather", build_allgather, send, bytes, recv)->run();
}

Request Communicator::iallgather_bytes(const void* send, std::size_t bytes, void* recv) const {
  return Request(
      scheduled(OpKind::allgather, state_, "iallgather", build_allgather, send, bytes, recv)
          ->start());
}

namespace {

std::shared_ptr<Schedule> build_allgatherv(const std::shared_ptr<const detail::CommState>& comm,
                                           const void* send, std::size_t send_bytes, void* recv,
                                           std::span<const std::size_t> recv_bytes,
                                           std::span<const std::size_t> recv_displs,
                                           const char* op) {
  const auto p = static_cast<std::size_t>(comm->size());
  const auto me = static_cast<std::size_t>(comm->rank);
  check_span(recv_bytes, p, op, "recv_bytes");
  check_span(recv_displs, p, op, "recv_displs");
  const bool in_place = is_in_place(send);
  if (!in_place) {
    check_buffer(send, send_bytes, op, "send");
    if (send_bytes != recv_bytes[me]) {
      throw Error(ErrorClass::count, std::string(op) + ": sends " + std::to_string(send_bytes) +
                                         " bytes but recv_bytes[rank] is " +
                                         std::to_string(recv_bytes[me]));
    }
  }
  check_buffer(recv, extent(recv_bytes, recv_displs), op, "receive");
  auto s = make(comm, OpKind::allgather, op);
  if (!in_place) s->copy(as_bytes(recv) + recv_displs[me], send, send_bytes);
  if (p > 1) detail::coll::allgatherv_ring(*s, as_bytes(recv), recv_bytes, recv_displs);
  return s;
}

}  // namespace

void Communicator::allgatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                                    std::span<const std::size_t> recv_bytes,
                                    std::span<const std::size_t> recv_displs) const {
  scheduled(OpKind::allgather, state_, "allgatherv", build_allgatherv, send, send_bytes, recv,
            recv_bytes, recv_displs)
      ->run();
}

Request Communicator::iallgatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                                        std::span<const std::size_t> recv_bytes,
                                        std::span<const std::size_t> recv_displs) const {
  return Request(scheduled(OpKind::allgather, state_, "iallgatherv", build_allgatherv, send,
                           send_bytes, recv, recv_bytes, recv_displs)
                     ->start());
}

// --- alltoall --------------------------------------------------------------------------------

namespace {

std::shared_ptr<Schedule> build_alltoall(const std::shared_ptr<const detail::CommState>& comm,
                                         const void* send, std::size_t bytes, void* recv,
                                         const char* op) {
  const auto p = static_cast<std::size_t>(comm->size());
  const bool in_place = is_in_place(send);
  if (!in_place) check_buffer(send, bytes * p, op, "send");
  check_buffer(recv, bytes * p, op, "receive");
  auto s = make(comm, OpKind::alltoall, op);
  if (bytes > 0) {
    std::vector<std::size_t> sizes(p, bytes);
    std::vector<std::size_t> displs(p);
    for (std::size_t i = 0; i < p; ++i) displs[i] = i * bytes;
    if (p == 1) {
      if (!in_place) s->copy(recv, send, bytes);
    } else {
      detail::coll::alltoallv_pairwise(*s, input_or_null(send), sizes, displs, as_bytes(recv),
                                       sizes, displs);
    }
  }
  return s;
}

}  // namespace

void Communicator::alltoall_bytes(const void* send, std::size_t bytes, void* recv) const {
  scheduled(OpKind::alltoall, state_, "alltoall", build_alltoall, send, bytes, recv)->run();
}

Request Communicator::ialltoall_bytes(const void* send, std::size_t bytes, void* recv) const {
  return Request(
      scheduled(OpKind::alltoall, state_, "ialltoall", build_alltoall, send, bytes, recv)->start());
}

namespace {

std::shared_ptr<Schedule> build_alltoallv(const std::shared_ptr<const detail::CommState>& comm,
                                          const void* send, std::span<const std::size_t> send_bytes,
                                          std::span<const std::size_t> send_displs, void* recv,
                                          std::span<const std::size_t> recv_bytes,
                                          std::span<const std::size_t> recv_displs,
                                          const char* op) {
  const auto p = static_cast<std::size_t>(comm->size());
  const auto me = static_cast<std::size_t>(comm->rank);
  const bool in_place = is_in_place(send);
  check_span(recv_bytes, p, op, "recv_bytes");
  check_span(recv_displs, p, op, "recv_displs");
  if (!in_place) {
    check_span(send_bytes, p, op, "send_bytes");
    check_span(send_displs, p, op, "send_displs");
    check_buffer(send, extent(send_bytes, send_displs), op, "send");
    if (send_bytes[me] != recv_bytes[me]) {
      throw Error(ErrorClass::count, std::string(op) + ": sends itself " +
                                         std::to_string(send_bytes[me]) + " bytes but expects " +
                                         std::to_string(recv_bytes[me]));
    }
  }
  check_buffer(recv, extent(recv_bytes, recv_displs), op, "receive");
  auto s = make(comm, OpKind::alltoall, op);
  if (p == 1) {
    if (!in_place) s->copy(as_bytes(recv) + recv_displs[0], as_bytes(send) + send_displs[0], send_bytes[0]);
  } else {
    detail::coll::alltoallv_pairwise(*s, input_or_null(send), in_place ? recv_bytes : send_bytes,
                                     in_place ? recv_displs : send_displs, as_bytes(recv),
                                     recv_bytes, recv_displs);
  }
  return s;
}

}  // namespace

void Communicator::alltoallv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                                   std::span<const std::size_t> send_displs, void* recv,
                                   std::span<const std::size_t> recv_bytes,
                                   std::span<const std::size_t> recv_displs) const {
  scheduled(OpKind::alltoall, state_, "alltoallv", build_alltoallv, send, send_bytes, send_displs,
            recv, recv_bytes, recv_displs)
      ->run();
}

Request Communicator::ialltoallv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                                       std::span<const std::size_t> send_displs, void* recv,
                                       std::span<const std::size_t> recv_bytes,
                                       std::span<const std::size_t> recv_displs) const {
  return Request(scheduled(OpKind::alltoall, state_, "ialltoallv", build_alltoallv, send,
                           send_bytes, send_displs, recv, recv_bytes, recv_displs)
                     ->start());
}

// --- reductions ------------------------------------------------------------------------------

namespace {

std::shared_ptr<Schedule> build_reduce(const std::shared_ptr<const detail::CommState>& comm,
                                       const void* send, void* recv, int count,
                                       const ElementType& type, const Op& op, int root,
                                       const char* name) {
  check_root(*comm, root, name);
  check_count(count, name);
  check_type(type, name);
  op.check(type, name);
  const Reduction red{op, type};
  const std::size_t bytes = red.bytes(count);
  const bool is_root = comm->rank == root;
  const bool in_place = is_root && is_in_place(send);
  if (!in_place) check_buffer(send, bytes, name, "send");
  if (is_root) check_buffer(recv, bytes, name, "receive");
  // Before the number: see scheduled().
  const auto t = Thresholds::from_environment(detail::Runtime::get().engine().job_oversubscribed());
  auto s = make(comm, OpKind::reduce, name);
  if (count > 0) {
    const std::byte* input = in_place ? nullptr : as_bytes(send);
    std::byte* out = is_root ? as_bytes(recv) : nullptr;
    if (s->size() == 1) {
      if (!in_place) s->copy(recv, send, bytes);
    } else if (detail::coll::choose_reduce(t, bytes, count, s->size(), op.commutative()) ==
               detail::coll::ReduceAlgorithm::binomial) {
      detail::coll::reduce_binomial(*s, red, input, out, count, root);
    } else {
      detail::coll::reduce_rabenseifner(*s, red, input, out, count, root);
    }
  }
  return s;
}

}  // namespace

void Communicator::reduce_raw(const void* send, void* recv, int count, const ElementType& type,
                              const Op& op, int root) const {
  scheduled(OpKind::reduce, state_, "reduce", build_reduce, send, recv, count, type, op, root)
      ->run();
}

Request Communicator::ireduce_raw(const void* send, void* recv, int count, const ElementType& type,
                                  const Op& op, int root) const {
  return Request(
      scheduled(OpKind::reduce, state_, "ireduce", build_reduce, send, recv, count, type, op, root)
          ->start());
}

void Communicator::allreduce_raw(const void* send, void* recv, int count, const ElementType& type,
                                 const Op& op) const {
  scheduled(OpKind::allreduce, state_, "allreduce", build_allreduce, send, recv, count, type, op)
      ->run();
}

Request Communicator::iallreduce_raw(const void* send, void* recv, int count,
                                     const ElementType& type, const Op& op) const {
  return Request(scheduled(OpKind::allreduce, state_, "iallreduce", build_allreduce, send, recv,
                           count, type, op)
                     ->start());
}

namespace {

std::shared_ptr<Schedule> build_reduce_scatter(const std::shared_ptr<const detail::CommState>& comm,
                                               const void* send, void* recv,
                                               std::span<const int> recv_counts,
                                               const ElementType& type, const Op& op,
                                               const char* name) {
  const auto p = static_cast<std::size_t>(comm->size());
  if (recv_counts.size() != p) {
    throw Error(ErrorClass::arg, std::string(name) + ": recv_counts has " +
                                     std::to_string(recv_counts.size()) + " entries, expected " +
                                     std::to_string(p) + " (one per rank)");
  }
  for (const int c : recv_counts) check_count(c, name);
  check_type(type, name);
  op.check(type, name);
  const Reduction red{op, type};
  const long long total = std::accumulate(recv_counts.begin(), recv_counts.end(), 0LL);
  if (total > std::numeric_limits<int>::max()) {
    throw Error(ErrorClass::count, std::string(name) + ": the counts add up to more than INT_MAX");
  }
  const int mine = recv_counts[static_cast<std::size_t>(comm->rank)];
  const bool in_place = is_in_place(send);
  if (!in_place) check_buffer(send, red.bytes(static_cast<int>(total)), name, "send");
  check_buffer(recv, red.bytes(in_place ? static_cast<int>(total) : mine), name, "receive");
  auto s = make(comm, OpKind::reduce_scatter, name);
  if (total > 0) {
    const std::byte* input = in_place ? as_bytes(static_cast<const void*>(recv)) : as_bytes(send);
    if (p == 1) {
      s->copy(recv, input, red.bytes(mine));
    } else {
      detail::coll::reduce_scatter_pairwise(*s, red, input, as_bytes(recv), recv_counts);
    }
  }
  return s;
}

}  // namespace

void Communicator::reduce_scatter_raw(const void* send, void* recv,
                                      std::span<const int> recv_counts, const ElementType& type,
                                      const Op& op) const {
  scheduled(OpKind::reduce_scatter, state_, "reduce_scatter", build_reduce_scatter, send, recv,
            recv_counts, type, op)
      ->run();
}

Request Communicator::ireduce_scatter_raw(const void* send, void* recv,
                                          std::span<const int> recv_counts, const ElementType& type,
                                          const Op& op) const {
  return Request(scheduled(OpKind::reduce_scatter, state_, "ireduce_scatter", build_reduce_scatter,
                           send, recv, recv_counts, type, op)
                     ->start());
}

namespace {

// reduce_scatter_block is reduce_scatter with the same count for every rank (checked there).
std::vector<int> equal_counts(int ranks, int count) {
  return std::vector<int>(static_cast<std::size_t>(ranks), count);
}

}  // namespace

void Communicator::reduce_scatter_block_raw(const void* send, void* recv, int recv_count,
                                            const ElementType& type, const Op& op) const {
  scheduled(OpKind::reduce_scatter, state_, "reduce_scatter_block", build_reduce_scatter, send,
            recv, equal_counts(size(), recv_count), type, op)
      ->run();
}

Request Communicator::ireduce_scatter_block_raw(const void* send, void* recv, int recv_count,
                                                const ElementType& type, const Op& op) const {
  return Request(scheduled(OpKind::reduce_scatter, state_, "ireduce_scatter_block",
                           build_reduce_scatter, send, recv, equal_counts(size(), recv_count), type,
                           op)
                     ->start());
}

namespace {

// scan and exscan differ only in whether a rank's own contribution is part of its result.
std::shared_ptr<Schedule> build_scan(const std::shared_ptr<const detail::CommState>& comm,
                                     const void* send, void* recv, int count,
                                     const ElementType& type, const Op& op, bool exclusive,
                                     const char* name) {
  check_count(count, name);
  check_type(type, name);
  op.check(type, name);
  const Reduction red{op, type};
  const std::size_t bytes = red.bytes(count);
  const bool in_place = is_in_place(send);
  if (!in_place) check_buffer(send, bytes, name, "send");
  check_buffer(recv, bytes, name, "receive");
  auto s = make(comm, exclusive ? OpKind::exscan : OpKind::scan, name);
  if (count > 0) {
    const std::byte* input = in_place ? as_bytes(static_cast<const void*>(recv)) : as_bytes(send);
    if (s->size() > 1) {
      detail::coll::scan_recursive_doubling(*s, red, input, as_bytes(recv), count, exclusive);
    } else if (!exclusive) {
      s->copy(recv, input, bytes);  // exscan leaves rank 0's result undefined, as MPI does
    }
  }
  return s;
}

}  // namespace

void Communicator::scan_raw(const void* send, void* recv, int count, const ElementType& type,
                            const Op& op) const {
  scheduled(OpKind::scan, state_, "scan", build_scan, send, recv, count, type, op, false)->run();
}

Request Communicator::iscan_raw(const void* send, void* recv, int count, const ElementType& type,
                                const Op& op) const {
  return Request(
      scheduled(OpKind::scan, state_, "iscan", build_scan, send, recv, count, type, op, false)
          ->start());
}

void Communicator::exscan_raw(const void* send, void* recv, int count, const ElementType& type,
                              const Op& op) const {
  scheduled(OpKind::exscan, state_, "exscan", build_scan, send, recv, count, type, op, true)->run();
}

Request Communicator::iexscan_raw(const void* send, void* recv, int count, const ElementType& type,
                                  const Op& op) const {
  return Request(
      scheduled(OpKind::exscan, state_, "iexscan", build_scan, send, recv, count, type, op, true)
          ->start());
}

}  // namespace sempi
