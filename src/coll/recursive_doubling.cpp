// Allreduce by recursive doubling for short messages (Thakur, Rabenseifner & Gropp 2005,
// section 4.4; the non-power-of-two handling is MPICH's): with pof2 = 2^floor(log2 p) and
// rem = p - pof2, the first 2*rem ranks first fold pairwise (even rank -> odd rank), then the
// pof2 remaining ranks exchange and combine with partners at distance 1, 2, 4, ..., and finally
// the odd ranks hand the result back to their even partners.
// Cost: (log2 pof2 + 2 [if p != pof2]) * alpha + same * n beta + (log2 pof2 + 1) * n gamma.
//
// Determinism: in every exchange both partners compute lower_block op upper_block with the same
// operands in the same order (the lower group is always the `in` operand), so every rank ends
// with bitwise the same bytes and non-commutative operations are combined in rank order.

#include <utility>

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void allreduce_recursive_doubling(Schedule& s, const Reduction& red, std::byte* data, int count) {
  const int p = s.size();
  const int r = s.rank();
  const std::size_t bytes = red.bytes(count);
  const int pof2 = floor_pow2(p);
  const int rem = p - pof2;
  std::byte* acc = data;
  std::byte* tmp = s.scratch(bytes);

  int newrank = -1;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      s.send(acc, bytes, r + 1, kFoldInStep);
    } else {
      s.recv(tmp, bytes, r - 1, kFoldInStep);
      s.sync();
      combine(s, red, tmp, acc, count);
      newrank = r / 2;
    }
  } else {
    newrank = r - rem;
  }

  if (newrank != -1) {
    for (int mask = 1, step = 1; mask < pof2; mask <<= 1, ++step) {
      const int newdst = newrank ^ mask;
      const int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;
      s.recv(tmp, bytes, dst, step);
      s.send(acc, bytes, dst, step);
      s.sync();
      if (dst < r) {
        combine(s, red, tmp, acc, count);
      } else {
        combine(s, red, acc, tmp, count);
        std::swap(acc, tmp);
      }
    }
  }

  if (r < 2 * rem) {
    s.sync();
    if (r % 2 == 1) {
      s.send(acc, bytes, r - 1, kFoldOutStep);
    } else {
      s.recv(data, bytes, r + 1, kFoldOutStep);
    }
  }
  if (newrank != -1) s.copy(data, acc, bytes);
}

}  // namespace sempi::detail::coll
