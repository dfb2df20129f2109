// Ring algorithms for long messages (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms
// for clusters of workstations", JPDC 2009; Thakur, Rabenseifner & Gropp 2005, section 4.2 for
// the allgather). Every rank only talks to its two neighbours, so each link carries the minimum
// volume whatever p is -- no power-of-two fold.
//   allreduce (reduce-scatter ring + allgather ring):
//                  2 (p-1) * alpha + 2 n (p-1)/p * beta + n (p-1)/p * gamma
//   allgather(v):  (p-1) * alpha + n (p-1)/p * beta          (n = the gathered total)
// Allreduce determinism: chunk c is accumulated along the ring starting at rank c, each chunk
// once, and the results are then copied around: every rank gets bitwise the same bytes. The
// order wraps around the ring, so the allreduce is only used for commutative operations.

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void allreduce_ring(Schedule& s, const Reduction& red, std::byte* data, int count) {
  const int p = s.size();
  const int r = s.rank();
  const Blocks b = split_evenly(count, p);
  const auto at = [&](int chunk) { return data + red.bytes(b.displs[static_cast<std::size_t>(chunk)]); };
  const auto len = [&](int chunk) { return b.counts[static_cast<std::size_t>(chunk)]; };
  std::byte* tmp = s.scratch(red.bytes(len(0)));
  const int left = (r - 1 + p) % p;
  const int right = (r + 1) % p;
  for (int step = 0; step < p - 1; ++step) {
    const int send_chunk = (r - step + p) % p;
    const int recv_chunk = (r - step - 1 + 2 * p) % p;
    s.recv(tmp, red.bytes(len(recv_chunk)), left, step);
    s.send(at(send_chunk), red.bytes(len(send_chunk)), right, step);
    s.sync();
    combine(s, red, tmp, at(recv_chunk), len(recv_chunk));
  }
  // Rank r now owns the finished chunk r + 1.
  for (int step = 0; step < p - 1; ++step) {
    const int send_chunk = (r - step + 1 + p) % p;
    const int recv_chunk = (r - step + p) % p;
    s.recv(at(recv_chunk), red.bytes(len(recv_chunk)), left, p + step);
    s.send(at(send_chunk), red.bytes(len(send_chunk)), right, p + step);
    s.sync();
  }
}

void allgatherv_ring(Schedule& s, std::byte* recv, std::span<const std::size_t> bytes,
                     std::span<const std::size_t> displs) {
  const int p = s.size();
  const int r = s.rank();
  const int left = (r - 1 + p) % p;
  const int right = (r + 1) % p;
  for (int step = 0; step < p - 1; ++step) {
    const auto send_block = static_cast<std::size_t>((r - step + p) % p);
    const auto recv_block = static_cast<std::size_t>((r - step - 1 + 2 * p) % p);
    s.recv(recv + displs[recv_block], bytes[recv_block], left, step);
    s.send(recv + displs[send_block], bytes[send_block], right, step);
    s.sync();
  }
}

}  // namespace sempi::detail::coll
