// Pairwise exchange (as in MPICH's long-message alltoall and reduce-scatter, Thakur,
// Rabenseifner & Gropp 2005, sections 4.3 and 4.5): in step i every rank sends to one partner and
// receives from one, so no rank is flooded and each step is a perfect matching.
//   alltoall(v):    (p-1) * alpha + n (p-1)/p * beta         (n = a rank's whole send vector)
//   reduce-scatter: (p-1) * alpha + n (p-1)/p * beta + n (p-1)/p * gamma
// Partners: rank XOR i when p is a power of two, otherwise send to rank + i and receive from
// rank - i; in place, partner = (i - rank) mod p, which is symmetric, so the block can be sent
// and replaced in the same step through a scratch buffer.
// The reduce-scatter collects all p contributions to its block first and combines them in rank
// order (x0 op x1 op ... op x(p-1)): deterministic, and valid for non-commutative operations.

#include <algorithm>
#include <vector>

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void alltoallv_pairwise(Schedule& s, const std::byte* send, std::span<const std::size_t> send_bytes,
                        std::span<const std::size_t> send_displs, std::byte* recv,
                        std::span<const std::size_t> recv_bytes,
                        std::span<const std::size_t> recv_displs) {
  const int p = s.size();
  const int r = s.rank();
  const auto me = static_cast<std::size_t>(r);
  if (send == nullptr) {  // in place
    std::byte* tmp = s.scratch(*std::max_element(recv_bytes.begin(), recv_bytes.end()));
    for (int i = 0; i < p; ++i) {
      const int partner = (i - r + p) % p;
      if (partner == r) continue;
      const auto q = static_cast<std::size_t>(partner);
      s.recv(tmp, recv_bytes[q], partner, i);
      s.send(recv + recv_displs[q], recv_bytes[q], partner, i);
      s.sync();
      s.copy(recv + recv_displs[q], tmp, recv_bytes[q]);
    }
    return;
  }
  s.copy(recv + recv_displs[me], send + send_displs[me], recv_bytes[me]);
  const bool pof2 = (p & (p - 1)) == 0;
  for (int i = 1; i < p; ++i) {
    const int dst = pof2 ? r ^ i : (r + i) % p;
    const int src = pof2 ? r ^ i : (r - i + p) % p;
    const auto d = static_cast<std::size_t>(dst);
    const auto sr = static_cast<std::size_t>(src);
    s.recv(recv + recv_displs[sr], recv_bytes[sr], src, i);
    s.send(send + send_displs[d], send_bytes[d], dst, i);
    s.sync();
  }
}

void reduce_scatter_pairwise(Schedule& s, const Reduction& red, const std::byte* input,
                             std::byte* recv, std::span<const int> counts) {
  const int p = s.size();
  const int r = s.rank();
  std::vector<std::size_t> displs(counts.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    displs[i] = offset;
    offset += red.bytes(counts[i]);
  }
  const int mine = counts[static_cast<std::size_t>(r)];
  const std::size_t block = red.bytes(mine);
  // parts + j * block: rank j's contribution to this rank's block.
  std::byte* parts = s.scratch(block * static_cast<std::size_t>(p));
  const auto part = [&](int j) { return parts + block * static_cast<std::size_t>(j); };
  s.copy(part(r), input + displs[static_cast<std::size_t>(r)], block);
  for (int i = 1; i < p; ++i) {
    const int dst = (r + i) % p;
    const int src = (r - i + p) % p;
    s.recv(part(src), block, src, i);
    s.send(input + displs[static_cast<std::size_t>(dst)],
           red.bytes(counts[static_cast<std::size_t>(dst)]), dst, i);
    s.sync();
  }
  for (int j = 1; j < p; ++j) combine(s, red, part(j - 1), part(j), mine);
  s.copy(recv, part(p - 1), block);
}

}  // namespace sempi::detail::coll
