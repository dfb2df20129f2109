// Binomial trees for short messages (MPICH; Thakur, Rabenseifner & Gropp, "Optimization of
// collective communication operations in MPICH", IJHPCA 2005, section 3): ranks are numbered
// relative to the root; in the tree, relative rank q's parent is q with its lowest set bit
// cleared, so every subtree is a contiguous range of relative ranks.
//   bcast:   ceil(log2 p) * (alpha + n beta)
//   scatter: ceil(log2 p) * alpha + n (p-1)/p beta        (n = all blocks together)
//   gather:  ceil(log2 p) * alpha + n (p-1)/p beta
//   reduce:  ceil(log2 p) * (alpha + n beta + n gamma)
// Reduce combines a subtree [q, q+2^k) with the one above it as lower op upper, i.e. in rank
// order of the tree. Non-commutative operations therefore use the tree rooted at rank 0 (whose
// relative order is the rank order) and forward the result to the root (one more alpha + n beta).

#include <algorithm>
#include <utility>

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {

void bcast_binomial(Schedule& s, std::byte* buf, std::size_t bytes, int root) {
  const int p = s.size();
  const int rel = relative_rank(s.rank(), root, p);
  int mask = 1;
  while (mask < p) {
    if ((rel & mask) != 0) {
      s.recv(buf, bytes, absolute_rank(rel - mask, root, p), 0);
      s.sync();
      break;
    }
    mask <<= 1;
  }
  // Largest subtree first: it has the longest way to go.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (rel + mask < p) s.send(buf, bytes, absolute_rank(rel + mask, root, p), 0);
  }
}

void scatter_binomial(Schedule& s, const std::byte* send, std::byte* recv, std::size_t block,
                      int root) {
  const int p = s.size();
  const int rel = relative_rank(s.rank(), root, p);
  const std::byte* data = send;  // this rank's subtree's blocks, in relative order
  std::size_t have = 0;          // bytes of them still to hand out or keep
  int mask = 1;
  if (rel == 0) {
    if (root != 0) {  // rotate so that relative rank q's block is at q * block
      std::byte* rotated = s.scratch(static_cast<std::size_t>(p) * block);
      const std::size_t upper = static_cast<std::size_t>(p - root) * block;
      s.copy(rotated, send + static_cast<std::size_t>(root) * block, upper);
      s.copy(rotated + upper, send, static_cast<std::size_t>(root) * block);
      data = rotated;
    }
    have = static_cast<std::size_t>(p) * block;
    while (mask < p) mask <<= 1;
  } else {
    while (mask < p) {
      if ((rel & mask) != 0) {
        have = static_cast<std::size_t>(std::min(mask, p - rel)) * block;
        std::byte* subtree = s.scratch(have);
        s.recv(subtree, have, absolute_rank(rel - mask, root, p), 0);
        s.sync();
        data = subtree;
        break;
      }
      mask <<= 1;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (rel + mask < p) {
      const std::size_t give = have - static_cast<std::size_t>(mask) * block;
      s.send(data + static_cast<std::size_t>(mask) * block, give,
             absolute_rank(rel + mask, root, p), 0);
      have -= give;
    }
  }
  if (recv != nullptr) s.copy(recv, data, block);  // nullptr: root in place
}

void gather_binomial(Schedule& s, const std::byte* send, std::byte* recv, std::size_t block,
                     int root) {
  const int p = s.size();
  const int r = s.rank();
  const int rel = relative_rank(r, root, p);
  int subtree = p;
  if (rel != 0) subtree = std::min(rel & -rel, p - rel);
  std::byte* data = rel == 0 && root == 0 ? recv : s.scratch(static_cast<std::size_t>(subtree) * block);
  const std::byte* own = send != nullptr ? send : recv + static_cast<std::size_t>(r) * block;
  s.copy(data, own, block);
  std::size_t have = block;
  for (int mask = 1; mask < p; mask <<= 1) {
    if ((rel & mask) != 0) {
      s.sync();  // every child's blocks are in
      s.send(data, have, absolute_rank(rel - mask, root, p), 0);
      break;
    }
    if (rel + mask < p) {
      const std::size_t bytes = static_cast<std::size_t>(std::min(mask, p - rel - mask)) * block;
      s.recv(data + static_cast<std::size_t>(mask) * block, bytes,
             absolute_rank(rel + mask, root, p), 0);
      have += bytes;
    }
  }
  if (rel == 0 && root != 0) {  // undo the rotation
    const std::size_t upper = static_cast<std::size_t>(p - root) * block;
    s.copy(recv + static_cast<std::size_t>(root) * block, data, upper);
    s.copy(recv, data + upper, static_cast<std::size_t>(root) * block);
  }
}

void reduce_binomial(Schedule& s, const Reduction& red, const std::byte* send, std::byte* recv,
                     int count, int root) {
  const int p = s.size();
  const int r = s.rank();
  const std::size_t bytes = red.bytes(count);
  const int tree_root = red.op.commutative() ? root : 0;
  const int rel = relative_rank(r, tree_root, p);
  const std::byte* input = send != nullptr ? send : recv;  // nullptr: root in place
  std::byte* acc = nullptr;
  if (r == root && r == tree_root) {
    acc = recv;
  } else {
    acc = s.scratch(bytes);
  }
  s.copy(acc, input, bytes);
  std::byte* tmp = nullptr;
  for (int mask = 1; mask < p; mask <<= 1) {
    if ((rel & mask) != 0) {
      s.send(acc, bytes, absolute_rank(rel - mask, tree_root, p), 0);
      break;
    }
    if (rel + mask < p) {
      if (tmp == nullptr) tmp = s.scratch(bytes);
      s.recv(tmp, bytes, absolute_rank(rel + mask, tree_root, p), 0);
      s.sync();
      combine(s, red, acc, tmp, count);  // tmp = (my subtree) op (the one above it)
      std::swap(acc, tmp);
    }
  }
  if (tree_root == root) {
    if (r == root) s.copy(recv, acc, bytes);
    return;
  }
  s.sync();
  if (r == tree_root) s.send(acc, bytes, root, 1);
  if (r == root) s.recv(recv, bytes, tree_root, 1);
}

}  // namespace sempi::detail::coll
