#pragma once
// The collective algorithms: each appends its steps to a Schedule (see schedule.hpp). One
// algorithm family per file; each file's header comment cites the algorithm and states its
// cost in the usual model: alpha = latency per message, beta = time per byte, gamma = time per
// byte of local reduction, for n bytes on p ranks.
//
// Conventions: buffers are raw bytes; `nullptr` for a send buffer means "in place" where the
// operation allows it; callers (src/api/collectives.cpp) validated every argument and handle
// p == 1 and empty messages, so algorithms may assume p >= 2.

#include <cstddef>
#include <span>
#include <vector>

#include "coll/schedule.hpp"
#include "coll/tuning.hpp"
#include "sempi/op.hpp"

namespace sempi::detail::coll {

/// The operation and element type of a reduction.
struct Reduction {
  Op op;
  ElementType type;
  [[nodiscard]] std::size_t bytes(int count) const {
    return static_cast<std::size_t>(count) * type.size;
  }
};

/// Local step inout[i] = in[i] op inout[i] (`in` is the lower-ranked operand).
inline void combine(Schedule& s, const Reduction& r, const std::byte* in, std::byte* inout,
                    int count) {
  if (count <= 0) return;
  s.local([op = r.op, type = r.type, in, inout, count] { op.apply(in, inout, count, type); });
}

/// `count` elements split into `parts` contiguous blocks, the first count % parts one larger.
/// displs has parts + 1 entries (displs[parts] == count).
struct Blocks {
  std::vector<int> counts;
  std::vector<int> displs;
};
Blocks split_evenly(int count, int parts);

/// Position of rank r relative to root, and back.
inline int relative_rank(int r, int root, int p) { return (r - root + p) % p; }
inline int absolute_rank(int rel, int root, int p) { return (rel + root) % p; }

/// Steps reserved for the "fold into a power of two" pre- and post-steps.
inline constexpr int kFoldInStep = 0;
inline constexpr int kFoldOutStep = (1 << kStepBits) - 1;

/// Chunk index that `newrank` owns after the distance-doubling recursive halving of
/// rabenseifner.cpp over `pof2` ranks (the bit reversal of newrank).
int halving_final_chunk(int newrank, int pof2);

// barrier_dissemination.cpp
void barrier_dissemination(Schedule& s);

// binomial.cpp
void bcast_binomial(Schedule& s, std::byte* buf, std::size_t bytes, int root);
void scatter_binomial(Schedule& s, const std::byte* send, std::byte* recv, std::size_t block,
                      int root);
void gather_binomial(Schedule& s, const std::byte* send, std::byte* recv, std::size_t block,
                     int root);
void reduce_binomial(Schedule& s, const Reduction& red, const std::byte* send, std::byte* recv,
                     int count, int root);

// bcast_scatter_allgather.cpp
void bcast_scatter_allgather(Schedule& s, std::byte* buf, std::size_t bytes, int root);

// recursive_doubling.cpp; `data` holds this rank's input and receives the result.
void allreduce_recursive_doubling(Schedule& s, const Reduction& red, std::byte* data, int count);

// rabenseifner.cpp
/// `send`: this rank's input, or nullptr if it is already in `data` (in place).
void allreduce_rabenseifner(Schedule& s, const Reduction& red, const std::byte* send,
                            std::byte* data, int count);
void reduce_rabenseifner(Schedule& s, const Reduction& red, const std::byte* send,
                         std::byte* recv, int count, int root);

// ring.cpp; allgatherv_ring expects this rank's block already in place.
void allreduce_ring(Schedule& s, const Reduction& red, std::byte* data, int count);
void allgatherv_ring(Schedule& s, std::byte* recv, std::span<const std::size_t> bytes,
                     std::span<const std::size_t> displs);

// bruck.cpp; expects this rank's block already at recv + rank * block.
void allgather_bruck(Schedule& s, std::byte* recv, std::size_t block);

// pairwise.cpp
void alltoallv_pairwise(Schedule& s, const std::byte* send, std::span<const std::size_t> send_bytes,
                        std::span<const std::size_t> send_displs, std::byte* recv,
                        std::span<const std::size_t> recv_bytes,
                        std::span<const std::size_t> recv_displs);
void reduce_scatter_pairwise(Schedule& s, const Reduction& red, const std::byte* input,
                             std::byte* recv, std::span<const int> counts);

// linear.cpp
void gatherv_linear(Schedule& s, const std::byte* send, std::size_t send_bytes, std::byte* recv,
                    std::span<const std::size_t> recv_bytes,
                    std::span<const std::size_t> recv_displs, int root);
void scatterv_linear(Schedule& s, const std::byte* send, std::span<const std::size_t> send_bytes,
                     std::span<const std::size_t> send_displs, std::byte* recv,
                     std::size_t recv_bytes, int root);

// scan.cpp; `input` may equal `recv` (in place).
void scan_recursive_doubling(Schedule& s, const Reduction& red, const std::byte* input,
                             std::byte* recv, int count, bool exclusive);

}  // namespace sempi::detail::coll
