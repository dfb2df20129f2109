// Dissemination barrier (Hensgen, Finkel & Manber, "Two algorithms for barrier
// synchronization", IJPP 1988): in round k every rank signals rank + 2^k and waits for
// rank - 2^k (mod p). After ceil(log2 p) rounds every rank has transitively heard from all
// others. Unlike a tree barrier it needs no fan-out phase and works for any p.
// Cost: ceil(log2 p) * alpha (zero-byte messages).

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void barrier_dissemination(Schedule& s) {
  const int p = s.size();
  const int r = s.rank();
  for (int k = 0, distance = 1; distance < p; ++k, distance *= 2) {
    s.recv(nullptr, 0, (r - distance + p) % p, k);
    s.send(nullptr, 0, (r + distance) % p, k);
    s.sync();
  }
}

}  // namespace sempi::detail::coll
