// Bruck's allgather (Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all
// communications in multiport message-passing systems", IEEE TPDS 1997; as in MPICH, Thakur,
// Rabenseifner & Gropp 2005, section 4.1): in step k every rank sends the blocks it has so far
// (at most 2^k) to rank - 2^k and receives as many from rank + 2^k, so after ceil(log2 p) steps
// it holds all p blocks, rotated by its rank; a local rotation puts them in rank order.
// Cost: ceil(log2 p) * alpha + n (p-1)/p * beta (+ n of local copying), for any p: the latency
// optimum for short blocks, where the ring's p - 1 alphas dominate.

#include <algorithm>

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void allgather_bruck(Schedule& s, std::byte* recv, std::size_t block) {
  const int p = s.size();
  const int r = s.rank();
  const auto blocks = [block](int n) { return static_cast<std::size_t>(n) * block; };
  std::byte* tmp = s.scratch(blocks(p));  // tmp block i = rank (r + i) % p's block
  s.copy(tmp, recv + blocks(r), block);
  for (int k = 0, have = 1; have < p; ++k, have *= 2) {
    const int n = std::min(have, p - have);
    s.recv(tmp + blocks(have), blocks(n), (r + have) % p, k);
    s.send(tmp, blocks(n), (r - have + p) % p, k);
    s.sync();
  }
  s.copy(recv + blocks(r), tmp, blocks(p - r));
  s.copy(recv, tmp + blocks(p - r), blocks(r));
}

}  // namespace sempi::detail::coll
