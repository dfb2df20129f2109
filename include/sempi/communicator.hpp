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
#include <vector>

#include "sempi/constants.hpp"
#include "sempi/datatype.hpp"
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
    Request r = irecv(recvbuf, recvcount, source, recvtag);
    Request s = isend(sendbuf, sendcount, dest, sendtag);
    Status status = r.wait();
    s.wait();
    return status;
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

  // --- communicator management ------------------------------------------------------------
  /// A new communicator with the same group and a new context. Collective over this one.
  [[nodiscard]] Communicator dup() const;
  /// Partitions by color, ordering each part by (key, old rank). Ranks passing
  /// color == UNDEFINED get a null communicator. Collective over this one.
  [[nodiscard]] Communicator split(int color, int key) const;

  /// The communicator's name ("world", "self", "world.dup", ...). Policies refer to
  /// communicators by name; set_name changes the name this rank uses (MPI_Comm_set_name).
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
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace sempi
