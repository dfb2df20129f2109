#pragma once
/// \file
/// Communicators: a group of ranks with a private context for messages.
///
/// Ownership: a Communicator is a cheap, copyable handle to shared state. The communicator is
/// released when the last handle is destroyed (RAII replaces MPI_Comm_free). Messages sent on
/// one communicator never match receives on another, including its duplicates.
///
/// Thread safety: all member functions may be called concurrently from several threads
/// (MPI_THREAD_MULTIPLE). Matching order between threads is the order in which their calls
/// reach the runtime.
///
/// Errors: invalid arguments (rank out of range, negative count, null buffer with count > 0,
/// invalid tag, null communicator) throw sempi::Error with the matching MPI error class.
/// Failures of the operation itself (peer failed, policy denial, truncation) throw from the
/// blocking call or from Request::wait().

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sempi/constants.hpp"
#include "sempi/datatype.hpp"
#include "sempi/message.hpp"
#include "sempi/op.hpp"
#include "sempi/request.hpp"
#include "sempi/status.hpp"

namespace sempi {

namespace detail {
struct CommState;
}

class Communicator {
 public:
  Communicator() = default;  ///< the null communicator
  explicit Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}

  [[nodiscard]] int rank() const;
  [[nodiscard]] int size() const;
  [[nodiscard]] bool is_null() const noexcept { return !state_; }

  // --- point-to-point, byte level (the typed forms below call these) ---------------------
  void send_bytes(const void* buf, std::size_t bytes, int dest, int tag) const;
  void ssend_bytes(const void* buf, std::size_t bytes, int dest, int tag) const;
  Status recv_bytes(void* buf, std::size_t capacity, int source, int tag) const;
  Request isend_bytes(const void* buf, std::size_t bytes, int dest, int tag) const;
  Request issend_bytes(const void* buf, std::size_t bytes, int dest, int tag) const;
  Request irecv_bytes(void* buf, std::size_t capacity, int source, int tag) const;
  /// Both halves are checked before either starts; the call returns (or throws) only once
  /// both are over, so the caller may reuse both buffers.
  Status sendrecv_bytes(const void* sendbuf, std::size_t sendbytes, int dest, int sendtag,
                        void* recvbuf, std::size_t capacity, int source, int recvtag) const;

  // --- typed point-to-point ---------------------------------------------------------------
  template <Builtin T>
  void send(const T* buf, int count, int dest, int tag) const {
    send_bytes(buf, detail::checked_bytes(buf, count, "send"), dest, tag);
  }
  template <Builtin T>
  void send(std::span<const T> data, int dest, int tag) const {
    send(data.data(), to_count(data.size()), dest, tag);
  }
  template <Builtin T>
  void send(const std::vector<T>& data, int dest, int tag) const {
    send(data.data(), to_count(data.size()), dest, tag);
  }
  template <Builtin T>
  void send(const T& value, int dest, int tag) const {
    send(&value, 1, dest, tag);
  }

  template <Builtin T>
  void ssend(const T* buf, int count, int dest, int tag) const {
    ssend_bytes(buf, detail::checked_bytes(buf, count, "ssend"), dest, tag);
  }
  template <Builtin T>
  void ssend(const std::vector<T>& data, int dest, int tag) const {
    ssend(data.data(), to_count(data.size()), dest, tag);
  }
  template <Builtin T>
  void ssend(const T& value, int dest, int tag) const {
    ssend(&value, 1, dest, tag);
  }

  template <Builtin T>
  Status recv(T* buf, int count, int source, int tag) const {
    return recv_bytes(buf, detail::checked_bytes(buf, count, "recv"), source, tag);
  }
  template <Builtin T>
  Status recv(std::span<T> data, int source, int tag) const {
    return recv(data.data(), to_count(data.size()), source, tag);
  }
  /// Receives into the vector's current elements (resize it first).
  template <Builtin T>
  Status recv(std::vector<T>& data, int source, int tag) const {
    return recv(data.data(), to_count(data.size()), source, tag);
  }
  template <Builtin T>
  Status recv(T& value, int source, int tag) const {
    return recv(&value, 1, source, tag);
  }

  template <Builtin T>
  Request isend(const T* buf, int count, int dest, int tag) const {
    return isend_bytes(buf, detail::checked_bytes(buf, count, "isend"), dest, tag);
  }
  template <Builtin T>
  Request isend(const std::vector<T>& data, int dest, int tag) const {
    return isend(data.data(), to_count(data.size()), dest, tag);
  }
  /// The request reads the vector until it completes: a temporary would be gone by then.
  template <Builtin T>
  Request isend(std::vector<T>&& data, int dest, int tag) const = delete;
  template <Builtin T>
  Request issend(const T* buf, int count, int dest, int tag) const {
    return issend_bytes(buf, detail::checked_bytes(buf, count, "issend"), dest, tag);
  }
  template <Builtin T>
  Request irecv(T* buf, int count, int source, int tag) const {
    return irecv_bytes(buf, detail::checked_bytes(buf, count, "irecv"), source, tag);
  }
  template <Builtin T>
  Request irecv(std::vector<T>& data, int source, int tag) const {
    return irecv(data.data(), to_count(data.size()), source, tag);
  }

  /// Sends and receives at once, without deadlock between pairs of ranks.
  template <Builtin S, Builtin R>
  Status sendrecv(const S* sendbuf, int sendcount, int dest, int sendtag, R* recvbuf,
                  int recvcount, int source, int recvtag) const {
    return sendrecv_bytes(sendbuf, detail::checked_bytes(sendbuf, sendcount, "sendrecv"), dest,
                          sendtag, recvbuf, detail::checked_bytes(recvbuf, recvcount, "sendrecv"),
                          source, recvtag);
  }
  template <Builtin S, Builtin R>
  Status sendrecv(const std::vector<S>& senddata, int dest, int sendtag, std::vector<R>& recvdata,
                  int source, int recvtag) const {
    return sendrecv(senddata.data(), to_count(senddata.size()), dest, sendtag, recvdata.data(),
                    to_count(recvdata.size()), source, recvtag);
  }

  /// Blocks until a matching message is available; does not receive it.
  Status probe(int source, int tag) const;
  /// The status of a matching message if one is available now.
  std::optional<Status> iprobe(int source, int tag) const;
  /// Matched probe (see sempi/message.hpp): blocks until a message matches and takes it out of
  /// matching; only the returned Message can receive it. Source PROC_NULL gives
  /// Message::no_proc() at once.
  std::pair<Message, Status> mprobe(int source, int tag) const;
  /// Like mprobe, if a matching message is available now.
  std::optional<std::pair<Message, Status>> improbe(int source, int tag) const;

  // --- collectives ------------------------------------------------------------------------
  // Every member of the communicator must call the same collectives in the same order (as in
  // MPI); the algorithm (see src/coll/) is chosen from the message size and communicator size
  // with thresholds read from SEMPI_COLL_* environment variables, which must therefore be the
  // same on every rank. Collective traffic is tagged with its operation kind and travels on the
  // communicator's collective context: it never matches point-to-point receives.
  //
  // Errors (sempi::Error): comm (null communicator), root (root out of range), count (negative
  // count), buffer (null buffer with data, or IN_PLACE where MPI does not allow it), op (the
  // operation is not defined on the type), arg (v-variant spans of the wrong length, or a
  // reduce_scatter count list that does not match). Failures of the communication itself
  // (peer failed, policy denial, mismatched sizes between ranks -> truncate) are thrown by the
  // blocking call or by Request::wait()/test() of the nonblocking ones.
  //
  // Thread safety: as for point-to-point, but collectives on ONE communicator must be issued in
  // the same order on every rank, so concurrent threads must not start collectives on the same
  // communicator at the same time (use dup() per thread). Nonblocking collectives progress when
  // their Request is waited on or tested; the buffers belong to the operation until then.
  //
  // Byte-level forms (type-erased, for the mpi.h layer): sizes and displacements in bytes.
  // IN_PLACE is accepted where noted.

  /// Blocks until every member has entered the barrier (dissemination algorithm).
  void barrier() const;
  /// Nonblocking barrier (MPI_Ibarrier).
  Request ibarrier() const;

  /// Broadcasts `bytes` bytes from `root` into `buf` on every rank (MPI_Bcast).
  void bcast_bytes(void* buf, std::size_t bytes, int root) const;
  /// Nonblocking bcast_bytes (MPI_Ibcast).
  Request ibcast_bytes(void* buf, std::size_t bytes, int root) const;
  /// Root sends block r (`bytes` bytes at send + r*bytes) to rank r (MPI_Scatter). `send` is
  /// read only at the root; `recv` may be IN_PLACE at the root (its block stays in `send`).
  void scatter_bytes(const void* send, void* recv, std::size_t bytes, int root) const;
  /// Nonblocking scatter_bytes (MPI_Iscatter).
  Request iscatter_bytes(const void* send, void* recv, std::size_t bytes, int root) const;
  /// Variable blocks: rank r gets send_bytes[r] bytes from send + send_displs[r] (spans of
  /// size() entries, read only at the root); `recv_bytes` must equal send_bytes[rank].
  void scatterv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                      std::span<const std::size_t> send_displs, void* recv,
                      std::size_t recv_bytes, int root) const;
  /// Nonblocking scatterv_bytes (MPI_Iscatterv); the spans are read before it returns.
  Request iscatterv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                          std::span<const std::size_t> send_displs, void* recv,
                          std::size_t recv_bytes, int root) const;
  /// Root receives rank r's `bytes` bytes at recv + r*bytes (MPI_Gather). `send` may be
  /// IN_PLACE at the root (its block is already in place); `recv` is used only at the root.
  void gather_bytes(const void* send, std::size_t bytes, void* recv, int root) const;
  /// Nonblocking gather_bytes (MPI_Igather).
  Request igather_bytes(const void* send, std::size_t bytes, void* recv, int root) const;
  /// Variable blocks: rank r's send_bytes arrive at recv + recv_displs[r] (recv_bytes[r] bytes).
  void gatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                     std::span<const std::size_t> recv_bytes,
                     std::span<const std::size_t> recv_displs, int root) const;
  /// Nonblocking gatherv_bytes (MPI_Igatherv); the spans are read before it returns.
  Request igatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                         std::span<const std::size_t> recv_bytes,
                         std::span<const std::size_t> recv_displs, int root) const;
  /// Every rank receives every rank's `bytes` bytes at recv + r*bytes (MPI_Allgather).
  /// `send` may be IN_PLACE (this rank's block is taken from recv).
  void allgather_bytes(const void* send, std::size_t bytes, void* recv) const;
  /// Nonblocking allgather_bytes (MPI_Iallgather).
  Request iallgather_bytes(const void* send, std::size_t bytes, void* recv) const;
  void allgatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                        std::span<const std::size_t> recv_bytes,
                        std::span<const std::size_t> recv_displs) const;
  /// Nonblocking allgatherv_bytes (MPI_Iallgatherv); the spans are read before it returns.
  Request iallgatherv_bytes(const void* send, std::size_t send_bytes, void* recv,
                            std::span<const std::size_t> recv_bytes,
                            std::span<const std::size_t> recv_displs) const;
  /// Block r of `send` (bytes at send + r*bytes) goes to rank r, arriving at recv + me*bytes
  /// (MPI_Alltoall). `send` may be IN_PLACE (data taken from and replaced in recv).
  void alltoall_bytes(const void* send, std::size_t bytes, void* recv) const;
  /// Nonblocking alltoall_bytes (MPI_Ialltoall).
  Request ialltoall_bytes(const void* send, std::size_t bytes, void* recv) const;
  void alltoallv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                       std::span<const std::size_t> send_displs, void* recv,
                       std::span<const std::size_t> recv_bytes,
                       std::span<const std::size_t> recv_displs) const;
  /// Nonblocking alltoallv_bytes (MPI_Ialltoallv); the spans are read before it returns.
  Request ialltoallv_bytes(const void* send, std::span<const std::size_t> send_bytes,
                           std::span<const std::size_t> send_displs, void* recv,
                           std::span<const std::size_t> recv_bytes,
                           std::span<const std::size_t> recv_displs) const;

  /// Reductions over `count` elements of `type` with `op`. `send` may be IN_PLACE (input taken
  /// from recv; for reduce only at the root). For reduce, `recv` is used only at the root.
  void reduce_raw(const void* send, void* recv, int count, const ElementType& type, const Op& op,
                  int root) const;
  /// Nonblocking reduce_raw (MPI_Ireduce); the Op is copied.
  Request ireduce_raw(const void* send, void* recv, int count, const ElementType& type,
                      const Op& op, int root) const;
  void allreduce_raw(const void* send, void* recv, int count, const ElementType& type,
                     const Op& op) const;
  /// Nonblocking allreduce_raw (MPI_Iallreduce); the Op is copied.
  Request iallreduce_raw(const void* send, void* recv, int count, const ElementType& type,
                         const Op& op) const;
  /// Reduces size()*recv_count elements; rank r gets block r (MPI_Reduce_scatter_block). With
  /// IN_PLACE the input is the full vector in recv and the result is its first block.
  void reduce_scatter_block_raw(const void* send, void* recv, int recv_count,
                                const ElementType& type, const Op& op) const;
  /// Nonblocking reduce_scatter_block_raw (MPI_Ireduce_scatter_block).
  Request ireduce_scatter_block_raw(const void* send, void* recv, int recv_count,
                                    const ElementType& type, const Op& op) const;
  /// Rank r gets recv_counts[r] elements (MPI_Reduce_scatter; recv_counts has size() entries).
  void reduce_scatter_raw(const void* send, void* recv, std::span<const int> recv_counts,
                          const ElementType& type, const Op& op) const;
  /// Nonblocking reduce_scatter_raw (MPI_Ireduce_scatter); recv_counts is read before it returns.
  Request ireduce_scatter_raw(const void* send, void* recv, std::span<const int> recv_counts,
                              const ElementType& type, const Op& op) const;
  /// Inclusive prefix reduction over ranks 0..rank (MPI_Scan).
  void scan_raw(const void* send, void* recv, int count, const ElementType& type,
                const Op& op) const;
  /// Nonblocking scan_raw (MPI_Iscan).
  Request iscan_raw(const void* send, void* recv, int count, const ElementType& type,
                    const Op& op) const;
  /// Exclusive prefix reduction over ranks 0..rank-1 (MPI_Exscan); recv is untouched on rank 0.
  void exscan_raw(const void* send, void* recv, int count, const ElementType& type,
                  const Op& op) const;
  /// Nonblocking exscan_raw (MPI_Iexscan).
  Request iexscan_raw(const void* send, void* recv, int count, const ElementType& type,
                      const Op& op) const;

  // Typed forms. `send` parameters accept IN_PLACE (they do not take part in deducing T).
  template <Element T>
  void bcast(T* buf, int count, int root) const {
    bcast_bytes(buf, collective_bytes(buf, count, "bcast"), root);
  }
  /// Broadcasts the vector's current elements (every rank must have the same size).
  template <Element T>
  void bcast(std::vector<T>& data, int root) const {
    bcast(data.data(), to_count(data.size()), root);
  }
  template <Element T>
  void bcast(T& value, int root) const {
    bcast(&value, 1, root);
  }
  template <Element T>
  Request ibcast(T* buf, int count, int root) const {
    return ibcast_bytes(buf, collective_bytes(buf, count, "ibcast"), root);
  }

  /// `count` elements per rank.
  template <Element T>
  void scatter(const std::type_identity_t<T>* send, T* recv, int count, int root) const {
    scatter_bytes(send, recv, element_bytes<T>(count, "scatter"), root);
  }
  template <Element T>
  Request iscatter(const std::type_identity_t<T>* send, T* recv, int count, int root) const {
    return iscatter_bytes(send, recv, element_bytes<T>(count, "iscatter"), root);
  }
  template <Element T>
  void scatterv(const std::type_identity_t<T>* send, std::span<const int> send_counts,
                std::span<const int> send_displs, T* recv, int recv_count, int root) const {
    scatterv_bytes(send, to_bytes<T>(send_counts, "scatterv"), to_bytes<T>(send_displs, "scatterv"),
                   recv, element_bytes<T>(recv_count, "scatterv"), root);
  }
  template <Element T>
  void gather(const std::type_identity_t<T>* send, T* recv, int count, int root) const {
    gather_bytes(send, element_bytes<T>(count, "gather"), recv, root);
  }
  template <Element T>
  Request igather(const std::type_identity_t<T>* send, T* recv, int count, int root) const {
    return igather_bytes(send, element_bytes<T>(count, "igather"), recv, root);
  }
  template <Element T>
  void gatherv(const std::type_identity_t<T>* send, int send_count, T* recv,
               std::span<const int> recv_counts, std::span<const int> recv_displs, int root) const {
    gatherv_bytes(send, element_bytes<T>(send_count, "gatherv"), recv,
                  to_bytes<T>(recv_counts, "gatherv"), to_bytes<T>(recv_displs, "gatherv"), root);
  }
  template <Element T>
  void allgather(const std::type_identity_t<T>* send, T* recv, int count) const {
    allgather_bytes(send, element_bytes<T>(count, "allgather"), recv);
  }
  template <Element T>
  Request iallgather(const std::type_identity_t<T>* send, T* recv, int count) const {
    return iallgather_bytes(send, element_bytes<T>(count, "iallgather"), recv);
  }
  /// One value from every rank, in rank order.
  template <Element T>
  [[nodiscard]] std::vector<T> allgather(const T& value) const {
    std::vector<T> all(static_cast<std::size_t>(size()));
    allgather(&value, all.data(), 1);
    return all;
  }
  template <Element T>
  void allgatherv(const std::type_identity_t<T>* send, int send_count, T* recv,
                  std::span<const int> recv_counts, std::span<const int> recv_displs) const {
    allgatherv_bytes(send, element_bytes<T>(send_count, "allgatherv"), recv,
                     to_bytes<T>(recv_counts, "allgatherv"), to_bytes<T>(recv_displs, "allgatherv"));
  }
  template <Element T>
  void alltoall(const std::type_identity_t<T>* send, T* recv, int count) const {
    alltoall_bytes(send, element_bytes<T>(count, "alltoall"), recv);
  }
  template <Element T>
  Request ialltoall(const std::type_identity_t<T>* send, T* recv, int count) const {
    return ialltoall_bytes(send, element_bytes<T>(count, "ialltoall"), recv);
  }
  template <Element T>
  void alltoallv(const std::type_identity_t<T>* send, std::span<const int> send_counts,
                 std::span<const int> send_displs, T* recv, std::span<const int> recv_counts,
                 std::span<const int> recv_displs) const {
    alltoallv_bytes(send, to_bytes<T>(send_counts, "alltoallv"),
                    to_bytes<T>(send_displs, "alltoallv"), recv,
                    to_bytes<T>(recv_counts, "alltoallv"), to_bytes<T>(recv_displs, "alltoallv"));
  }

  template <Element T>
  void reduce(const std::type_identity_t<T>* send, T* recv, int count, const Op& op,
              int root) const {
    reduce_raw(send, recv, count, datatype_traits<T>::type, op, root);
  }
  template <Element T>
  Request ireduce(const std::type_identity_t<T>* send, T* recv, int count, const Op& op,
                  int root) const {
    return ireduce_raw(send, recv, count, datatype_traits<T>::type, op, root);
  }
  /// The reduction of every rank's `value`; meaningful only at the root.
  template <Element T>
  [[nodiscard]] T reduce(const T& value, const Op& op, int root) const {
    T result = value;
    reduce(&value, &result, 1, op, root);
    return result;
  }
  template <Element T>
  void allreduce(const std::type_identity_t<T>* send, T* recv, int count, const Op& op) const {
    allreduce_raw(send, recv, count, datatype_traits<T>::type, op);
  }
  template <Element T>
  [[nodiscard]] T allreduce(const T& value, const Op& op) const {
    T result = value;
    allreduce(&value, &result, 1, op);
    return result;
  }
  /// In place on the vector's elements.
  template <Element T>
  void allreduce(std::vector<T>& data, const Op& op) const {
    allreduce<T>(IN_PLACE, data.data(), to_count(data.size()), op);
  }
  template <Element T>
  Request iallreduce(const std::type_identity_t<T>* send, T* recv, int count,
                     const Op& op) const {
    return iallreduce_raw(send, recv, count, datatype_traits<T>::type, op);
  }
  template <Element T>
  void reduce_scatter_block(const std::type_identity_t<T>* send, T* recv, int recv_count,
                            const Op& op) const {
    reduce_scatter_block_raw(send, recv, recv_count, datatype_traits<T>::type, op);
  }
  template <Element T>
  void reduce_scatter(const std::type_identity_t<T>* send, T* recv,
                      std::span<const int> recv_counts, const Op& op) const {
    reduce_scatter_raw(send, recv, recv_counts, datatype_traits<T>::type, op);
  }
  template <Element T>
  void scan(const std::type_identity_t<T>* send, T* recv, int count, const Op& op) const {
    scan_raw(send, recv, count, datatype_traits<T>::type, op);
  }
  template <Element T>
  void exscan(const std::type_identity_t<T>* send, T* recv, int count, const Op& op) const {
    exscan_raw(send, recv, count, datatype_traits<T>::type, op);
  }
  // Nonblocking typed forms of the above; count and displacement spans are read at the call.
  template <Element T>
  Request iscatterv(const std::type_identity_t<T>* send, std::span<const int> send_counts,
                    std::span<const int> send_displs, T* recv, int recv_count, int root) const {
    return iscatterv_bytes(send, to_bytes<T>(send_counts, "iscatterv"),
                           to_bytes<T>(send_displs, "iscatterv"), recv,
                           element_bytes<T>(recv_count, "iscatterv"), root);
  }
  template <Element T>
  Request igatherv(const std::type_identity_t<T>* send, int send_count, T* recv,
                   std::span<const int> recv_counts, std::span<const int> recv_displs,
                   int root) const {
    return igatherv_bytes(send, element_bytes<T>(send_count, "igatherv"), recv,
                          to_bytes<T>(recv_counts, "igatherv"),
                          to_bytes<T>(recv_displs, "igatherv"), root);
  }
  template <Element T>
  Request iallgatherv(const std::type_identity_t<T>* send, int send_count, T* recv,
                      std::span<const int> recv_counts, std::span<const int> recv_displs) const {
    return iallgatherv_bytes(send, element_bytes<T>(send_count, "iallgatherv"), recv,
                             to_bytes<T>(recv_counts, "iallgatherv"),
                             to_bytes<T>(recv_displs, "iallgatherv"));
  }
  template <Element T>
  Request ialltoallv(const std::type_identity_t<T>* send, std::span<const int> send_counts,
                     std::span<const int> send_displs, T* recv, std::span<const int> recv_counts,
                     std::span<const int> recv_displs) const {
    return ialltoallv_bytes(
        send, to_bytes<T>(send_counts, "ialltoallv"), to_bytes<T>(send_displs, "ialltoallv"), recv,
        to_bytes<T>(recv_counts, "ialltoallv"), to_bytes<T>(recv_displs, "ialltoallv"));
  }
  template <Element T>
  Request ireduce_scatter_block(const std::type_identity_t<T>* send, T* recv, int recv_count,
                                const Op& op) const {
    return ireduce_scatter_block_raw(send, recv, recv_count, datatype_traits<T>::type, op);
  }
  template <Element T>
  Request ireduce_scatter(const std::type_identity_t<T>* send, T* recv,
                          std::span<const int> recv_counts, const Op& op) const {
    return ireduce_scatter_raw(send, recv, recv_counts, datatype_traits<T>::type, op);
  }
  template <Element T>
  Request iscan(const std::type_identity_t<T>* send, T* recv, int count, const Op& op) const {
    return iscan_raw(send, recv, count, datatype_traits<T>::type, op);
  }
  template <Element T>
  Request iexscan(const std::type_identity_t<T>* send, T* recv, int count, const Op& op) const {
    return iexscan_raw(send, recv, count, datatype_traits<T>::type, op);
  }
  // --- end of collectives -----------------------------------------------------------------

  // --- communicator management ------------------------------------------------------------
  /// A new communicator with the same group and a new context. Collective over this one.
  [[nodiscard]] Communicator dup() const;
  /// Partitions by color, ordering each part by (key, old rank). Ranks passing
  /// color == UNDEFINED get a null communicator. Collective over this one.
  [[nodiscard]] Communicator split(int color, int key) const;

  /// The communicator's name ("world", "self", "world.dup", ...). Policies refer to
  /// communicators by name; set_name changes the name this rank uses (MPI_Comm_set_name), and
  /// this rank judges every message that arrives afterwards by the new name's rules. Throws
  /// sempi::Error(policy), keeping the old name, if that rule does not admit the members.
  [[nodiscard]] std::string name() const;
  void set_name(const std::string& name) const;

  /// World rank of `rank` in this communicator.
  [[nodiscard]] int world_rank_of(int rank) const;
  [[nodiscard]] const std::shared_ptr<detail::CommState>& state() const { return state_; }

  friend bool operator==(const Communicator& a, const Communicator& b) {
    return a.state_ == b.state_;
  }

 private:
  static int to_count(std::size_t n);
  // Collective helpers: element counts to byte counts, with the count check. A rank whose
  // arguments they refuse takes no part in the collective (refuse_collective).
  template <class T>
  std::size_t element_bytes(int count, const char* operation) const {
    if (count < 0) {
      refuse_collective(
          operation, Error(ErrorClass::count,
                           std::string(operation) + ": negative count " + std::to_string(count)));
    }
    return static_cast<std::size_t>(count) * sizeof(T);
  }
  template <class T>
  std::size_t collective_bytes(const T* buf, int count, const char* operation) const {
    try {
      return detail::checked_bytes(buf, count, operation);
    } catch (const Error& e) {
      refuse_collective(operation, e);
    }
  }
  // Abandons the collective `operation` (one of those above use) on this rank, so the other
  // members fail at once instead of waiting for it, and throws `error`.
  [[noreturn]] void refuse_collective(const char* operation, const Error& error) const;
  template <class T>
  std::vector<std::size_t> to_bytes(std::span<const int> counts, const char* operation) const {
    std::vector<std::size_t> bytes;
    bytes.reserve(counts.size());
    for (const int c : counts) bytes.push_back(element_bytes<T>(c, operation));
    return bytes;
  }
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace sempi
