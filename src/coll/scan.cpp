// Inclusive and exclusive scan by recursive doubling (as in MPICH; the simultaneous binomial
// prefix of Hillis & Steele / Kogge-Stone): in step k rank r exchanges its partial reduction of
// its aligned block of 2^k ranks with rank r XOR 2^k; the result takes in the partner's partial
// only if the partner is lower. Every combination puts the lower block first, so the prefix is
// in rank order (non-commutative operations work) and deterministic.
// Cost: ceil(log2 p) * (alpha + n beta) + up to 2 ceil(log2 p) * n gamma.

#include <utility>

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void scan_recursive_doubling(Schedule& s, const Reduction& red, const std::byte* input,
                             std::byte* recv, int count, bool exclusive) {
  const int p = s.size();
  const int r = s.rank();
  const std::size_t bytes = red.bytes(count);
  std::byte* partial = s.scratch(bytes);
  std::byte* tmp = s.scratch(bytes);
  s.copy(partial, input, bytes);
  if (!exclusive) s.copy(recv, input, bytes);
  bool have_result = !exclusive;
  for (int mask = 1, step = 0; mask < p; mask <<= 1, ++step) {
    const int dst = r ^ mask;
    if (dst >= p) continue;
    s.recv(tmp, bytes, dst, step);
    s.send(partial, bytes, dst, step);
    s.sync();
    if (r > dst) {
      combine(s, red, tmp, partial, count);
      if (have_result) {
        combine(s, red, tmp, recv, count);
      } else {
        s.copy(recv, tmp, bytes);
        have_result = true;
      }
    } else if (red.op.commutative()) {
      combine(s, red, tmp, partial, count);
    } else {
      combine(s, red, partial, tmp, count);
      std::swap(partial, tmp);
    }
  }
}

}  // namespace sempi::detail::coll
