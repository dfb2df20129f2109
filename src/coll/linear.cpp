// Linear gatherv/scatterv (as in MPICH): the root exchanges one message with every other rank,
// all posted at once. With irregular block sizes a tree would forward data of unknown size
// through intermediate ranks; the root's link carries the whole volume either way.
// Cost at the root: (p-1) * alpha + n * beta (n = the total of the other ranks' blocks).

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void gatherv_linear(Schedule& s, const std::byte* send, std::size_t send_bytes, std::byte* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_displs, int root) {
  const int p = s.size();
  const int r = s.rank();
  if (r != root) {
    s.send(send, send_bytes, root, 0);
    return;
  }
  for (int j = 0; j < p; ++j) {
    const auto q = static_cast<std::size_t>(j);
    if (j != r) s.recv(recv + recv_displs[q], recv_bytes[q], j, 0);
  }
  if (send != nullptr) {  // nullptr: in place
    s.copy(recv + recv_displs[static_cast<std::size_t>(r)], send, recv_bytes[static_cast<std::size_t>(r)]);
  }
}

void scatterv_linear(Schedule& s, const std::byte* send, std::span<const std::size_t> send_bytes,
                     std::span<const std::size_t> send_displs, std::byte* recv,
                     std::size_t recv_bytes, int root) {
  const int p = s.size();
  const int r = s.rank();
  if (r != root) {
    s.recv(recv, recv_bytes, root, 0);
    return;
  }
  for (int j = 0; j < p; ++j) {
    const auto q = static_cast<std::size_t>(j);
    if (j != r) s.send(send + send_displs[q], send_bytes[q], j, 0);
  }
  if (recv != nullptr) {  // nullptr: in place
    s.copy(recv, send + send_displs[static_cast<std::size_t>(r)], send_bytes[static_cast<std::size_t>(r)]);
  }
}

}  // namespace sempi::detail::coll
