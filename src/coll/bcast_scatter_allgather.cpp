// Broadcast of long messages as a scatter followed by an allgather (van de Geijn; Barnett,
// Gupta, Payne, Shuler, van de Geijn & Watts, "Interprocessor collective communication library
// (InterCom)", SHPCC 1994; as in MPICH, Thakur, Rabenseifner & Gropp 2005, section 4.1): the
// root's n bytes are cut into p chunks, scattered down a binomial tree, then every rank collects
// the others' chunks around a ring.
// Cost: (ceil(log2 p) + p - 1) * alpha + 2 n (p-1)/p * beta, against ceil(log2 p) (alpha + n beta)
// for the binomial tree: it wins for long messages once log2 p > 2, i.e. from about 5 ranks.
// Works in the user's buffer (no scratch); any p.

#include <algorithm>

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void bcast_scatter_allgather(Schedule& s, std::byte* buf, std::size_t bytes, int root) {
  const int p = s.size();
  const int rel = relative_rank(s.rank(), root, p);
  const std::size_t chunk = (bytes + static_cast<std::size_t>(p) - 1) / static_cast<std::size_t>(p);
  // Byte range of `n` chunks starting at relative chunk `first` (the last ones may be short or
  // empty when p does not divide the message).
  const auto range = [&](int first, int n) {
    const std::size_t begin = std::min(bytes, static_cast<std::size_t>(first) * chunk);
    const std::size_t end = std::min(bytes, static_cast<std::size_t>(first + n) * chunk);
    return std::pair<std::size_t, std::size_t>{begin, end - begin};
  };

  // Scatter down a binomial tree; a subtree's chunks are contiguous in the buffer.
  int mask = 1;
  if (rel == 0) {
    while (mask < p) mask <<= 1;
  } else {
    while (mask < p) {
      if ((rel & mask) != 0) {
        const auto [off, len] = range(rel, std::min(mask, p - rel));
        s.recv(buf + off, len, absolute_rank(rel - mask, root, p), 0);
        s.sync();
        break;
      }
      mask <<= 1;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (rel + mask < p) {
      const auto [off, len] = range(rel + mask, std::min(mask, p - rel - mask));
      s.send(buf + off, len, absolute_rank(rel + mask, root, p), 0);
    }
  }
  s.sync();

  // Ring allgather of the chunks, in relative numbering.
  const int left = absolute_rank((rel - 1 + p) % p, root, p);
  const int right = absolute_rank((rel + 1) % p, root, p);
  for (int step = 0; step < p - 1; ++step) {
    const auto [send_off, send_len] = range((rel - step + p) % p, 1);
    const auto [recv_off, recv_len] = range((rel - step - 1 + 2 * p) % p, 1);
    s.recv(buf + recv_off, recv_len, left, 1 + step);
    s.send(buf + send_off, send_len, right, 1 + step);
    s.sync();
  }
}

}  // namespace sempi::detail::coll
