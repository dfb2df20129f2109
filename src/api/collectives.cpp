// sempi::Communicator collectives: argument validation (always on), algorithm selection
// (coll/tuning.hpp) and dispatch to the schedule builders in src/coll/.

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>

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

std::shared_ptr<Schedule> make(const std::shared_ptr<const detail::CommState>& comm, OpKind kind,
                               const char* operation) {
  return std::make_shared<Schedule>(comm, kind, operation);
}

std::byte* as_bytes(void* p) { return static_cast<std::byte*>(p); }
const std::byte* as_bytes(const void* p) { return static_cast<const std::byte*>(p); }
// A send buffer in the algorithms' convention: nullptr means in place.
const std::byte* input_or_null(const void* p) { return is_in_place(p) ? nullptr : as_bytes(p); }

// --- per-operation schedule builders (shared by the blocking and nonblocking forms) ---------

std::shared_ptr<Schedule> build_barrier(const std::shared_ptr<const detail::CommState>& comm) {
  auto s = make(comm, OpKind::barrier, "barrier");
  if (s->size() > 1) detail::coll::barrier_dissemination(*s);
  return s;
}

std::shared_ptr<Schedule> build_bcast(const std::shared_ptr<const detail::CommState>& comm,
                                      void* buf, std::size_t bytes, int root,
                                      const char* operation) {
  check_root(*comm, root, operation);
  check_buffer(buf, bytes, operation, "data");
  auto s = make(comm, OpKind::bcast, operation);
  if (s->size() == 1 || bytes == 0) return s;
  const auto t = Thresholds::from_environment();
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

// --- barrier ---------------------------------------------------------------------------------

void Communicator::barrier() const { build_barrier(checked(state_, "barrier"))->run(); }

Request Communicator::ibarrier() const {
  return Request(build_barrier(checked(state_, "ibarrier"))->start());
}

// --- bcast -----------------------------------------------------------------------------------

void Communicator::bcast_bytes(void* buf, std::size_t bytes, int root) const {
  build_bcast(checked(state_, "bcast"), buf, bytes, root, "bcast")->run();
}

Request Communicator::ibcast_bytes(void* buf, std::size_t bytes, int root) const {
  return Request(build_bcast(checked(state_, "ibcast"), buf, bytes, root, "ibcast")->start());
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
  build_scatter(checked(state_, "scatter"), send, recv, bytes, root, "scatter")->run();
}

Request Communicator::iscatter_bytes(const void* send, void* recv, std::size_t bytes,
                                     int root) const {
  return Request(
      build_scatter(checked(state_, "iscatter"), send, recv, bytes, root, "iscatter")->start());
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
  build_scatterv(checked(state_, "scatterv"), send, send_bytes, send_displs, recv, recv_bytes, root,
                 "scatterv")
      ->run();
}

Request Communicator::iscatterv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                                      std::span<const std::size_t> send_displs, void* recv,
                                      std::size_t recv_bytes, int root) const {
  return Request(build_scatterv(checked(state_, "iscatterv"), send, send_bytes, send_displs, recv,
                                recv_bytes, root, "iscatterv")
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
  build_gather(checked(state_, "gather"), send, bytes, recv, root, "gather")->run();
}

Request Communicator::igather_bytes(const void* send, std::size_t bytes, void* recv,
                                    int root) const {
  return Request(
      build_gather(checked(state_, "igather"), send, bytes, recv, root, "igather")->start());
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
  build_gatherv(checked(state_, "gatherv"), send, send_bytes, recv, recv_bytes, recv_displs, root,
                "gatherv")
      ->run();
}

Request Communicator::igatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                                     std::span<const std::size_t> recv_bytes,
                                     std::span<const std::size_t> recv_displs, int root) const {
  return Request(build_gatherv(checked(state_, "igatherv"), send, send_bytes, recv, recv_bytes,
                               recv_displs, root, "igatherv")
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
  auto s = make(comm, OpKind::allgather, op);
  if (bytes > 0) {
    std::byte* out = as_bytes(recv);
    if (!in_place) s->copy(out + bytes * static_cast<std::size_t>(comm->rank), send, bytes);
    if (p > 1) {
      const auto t = Thresholds::from_environment();
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
  build_allgather(checked(state_, "allgather"), send, bytes, recv, "allgather")->run();
}

Request Communicator::iallgather_bytes(const void* send, std::size_t bytes, void* recv) const {
  return Request(
      build_allgather(checked(state_, "iallgather"), send, bytes, recv, "iallgather")->start());
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
  build_allgatherv(checked(state_, "allgatherv"), send, send_bytes, recv, recv_bytes, recv_displs,
                   "allgatherv")
      ->run();
}

Request Communicator::iallgatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                                        std::span<const std::size_t> recv_bytes,
                                        std::span<const std::size_t> recv_displs) const {
  return Request(build_allgatherv(checked(state_, "iallgatherv"), send, send_bytes, recv,
                                  recv_bytes, recv_displs, "iallgatherv")
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
  build_alltoall(checked(state_, "alltoall"), send, bytes, recv, "alltoall")->run();
}

Request Communicator::ialltoall_bytes(const void* send, std::size_t bytes, void* recv) const {
  return Request(
      build_alltoall(checked(state_, "ialltoall"), send, bytes, recv, "ialltoall")->start());
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
  build_alltoallv(checked(state_, "alltoallv"), send, send_bytes, send_displs, recv, recv_bytes,
                  recv_displs, "alltoallv")
      ->run();
}

Request Communicator::ialltoallv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                                       std::span<const std::size_t> send_displs, void* recv,
                                       std::span<const std::size_t> recv_bytes,
                                       std::span<const std::size_t> recv_displs) const {
  return Request(build_alltoallv(checked(state_, "ialltoallv"), send, send_bytes, send_displs, recv,
                                 recv_bytes, recv_displs, "ialltoallv")
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
  auto s = make(comm, OpKind::reduce, name);
  if (count > 0) {
    const std::byte* input = in_place ? nullptr : as_bytes(send);
    std::byte* out = is_root ? as_bytes(recv) : nullptr;
    if (s->size() == 1) {
      if (!in_place) s->copy(recv, send, bytes);
    } else if (detail::coll::choose_reduce(Thresholds::from_environment(), bytes, count,
                                           s->size(), op.commutative()) ==
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
  build_reduce(checked(state_, "reduce"), send, recv, count, type, op, root, "reduce")->run();
}

Request Communicator::ireduce_raw(const void* send, void* recv, int count, const ElementType& type,
                                  const Op& op, int root) const {
  return Request(
      build_reduce(checked(state_, "ireduce"), send, recv, count, type, op, root, "ireduce")
          ->start());
}

void Communicator::allreduce_raw(const void* send, void* recv, int count, const ElementType& type,
                                 const Op& op) const {
  build_allreduce(checked(state_, "allreduce"), send, recv, count, type, op, "allreduce")->run();
}

Request Communicator::iallreduce_raw(const void* send, void* recv, int count,
                                     const ElementType& type, const Op& op) const {
  return Request(
      build_allreduce(checked(state_, "iallreduce"), send, recv, count, type, op, "iallreduce")
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
  build_reduce_scatter(checked(state_, "reduce_scatter"), send, recv, recv_counts, type, op,
                       "reduce_scatter")
      ->run();
}

Request Communicator::ireduce_scatter_raw(const void* send, void* recv,
                                          std::span<const int> recv_counts, const ElementType& type,
                                          const Op& op) const {
  return Request(build_reduce_scatter(checked(state_, "ireduce_scatter"), send, recv, recv_counts,
                                      type, op, "ireduce_scatter")
                     ->start());
}

namespace {

// reduce_scatter_block is reduce_scatter with the same count for every rank.
std::vector<int> equal_counts(int ranks, int count, const char* name) {
  check_count(count, name);
  return std::vector<int>(static_cast<std::size_t>(ranks), count);
}

}  // namespace

void Communicator::reduce_scatter_block_raw(const void* send, void* recv, int recv_count,
                                            const ElementType& type, const Op& op) const {
  reduce_scatter_raw(send, recv, equal_counts(size(), recv_count, "reduce_scatter_block"), type,
                     op);
}

Request Communicator::ireduce_scatter_block_raw(const void* send, void* recv, int recv_count,
                                                const ElementType& type, const Op& op) const {
  return ireduce_scatter_raw(send, recv, equal_counts(size(), recv_count, "ireduce_scatter_block"),
                             type, op);
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
  build_scan(checked(state_, "scan"), send, recv, count, type, op, false, "scan")->run();
}

Request Communicator::iscan_raw(const void* send, void* recv, int count, const ElementType& type,
                                const Op& op) const {
  return Request(
      build_scan(checked(state_, "iscan"), send, recv, count, type, op, false, "iscan")->start());
}

void Communicator::exscan_raw(const void* send, void* recv, int count, const ElementType& type,
                              const Op& op) const {
  build_scan(checked(state_, "exscan"), send, recv, count, type, op, true, "exscan")->run();
}

Request Communicator::iexscan_raw(const void* send, void* recv, int count, const ElementType& type,
                                  const Op& op) const {
  return Request(
      build_scan(checked(state_, "iexscan"), send, recv, count, type, op, true, "iexscan")
          ->start());
}

}  // namespace sempi
