// Rabenseifner's allreduce and reduce for long messages (R. Rabenseifner, "Optimization of
// collective reduction operations", ICCS 2004; Thakur, Rabenseifner & Gropp 2005, section 4.4):
// a reduce-scatter by recursive halving followed by an allgather by recursive doubling (or, for
// reduce, a gather of the pieces at the root). Non-powers of two fold into pof2 = 2^floor(log2 p)
// ranks first, as in recursive_doubling.cpp.
// Cost (p = pof2): 2 log2 p * alpha + 2 n (p-1)/p * beta + n (p-1)/p * gamma; otherwise add
// 2 (alpha + n beta) + n gamma for the fold. Reduce: log2 p + (p-1) alphas at the root.
//
// We halve with the distance DOUBLING (partner = newrank ^ 1, ^ 2, ^ 4, ...): then the two
// groups combined in a step are adjacent ranges of ranks, the lower one is always the `in`
// operand, and the result is in rank order, so the algorithm is valid for non-commutative
// operations too. Each chunk of the result is computed by exactly one rank and then copied to the
// others, so all ranks get bitwise identical bytes. Rank `newrank` ends up owning chunk
// bitreverse(newrank); the allgather retraces the halving steps backwards.

#include <algorithm>
#include <vector>

#include "coll/algorithms.hpp"

namespace sempi::detail::coll {
namespace {

struct Fold {
  int pof2 = 1;
  int rem = 0;
  int newrank = -1;  // -1: this rank sat out (its data went to its odd neighbour)
  [[nodiscard]] int real(int nr) const { return nr < rem ? nr * 2 + 1 : nr + rem; }
};

// Fold the first 2*rem ranks pairwise into the odd one; `acc` holds this rank's data.
Fold fold_in(Schedule& s, const Reduction& red, std::byte* acc, std::byte* tmp, int count) {
  Fold f;
  const int p = s.size();
  const int r = s.rank();
  f.pof2 = floor_pow2(p);
  f.rem = p - f.pof2;
  const std::size_t bytes = red.bytes(count);
  if (r < 2 * f.rem) {
    if (r % 2 == 0) {
      s.send(acc, bytes, r + 1, kFoldInStep);
    } else {
      s.recv(tmp, bytes, r - 1, kFoldInStep);
      s.sync();
      combine(s, red, tmp, acc, count);
      f.newrank = r / 2;
    }
  } else {
    f.newrank = r - f.rem;
  }
  return f;
}

struct Step {
  int partner = 0;  // real rank
  int keep_lo = 0, keep_hi = 0, give_lo = 0, give_hi = 0;  // chunk ranges
};

// Reduce-scatter by recursive halving over the folded ranks; returns the steps taken.
// `input`, if set, holds this rank's contribution while `acc` does not yet (commutative
// operations only): the first step then sends from it and receives straight into `acc`.
std::vector<Step> halve(Schedule& s, const Reduction& red, const Fold& f, const Blocks& b,
                        std::byte* acc, std::byte* tmp, const std::byte* input = nullptr) {
  std::vector<Step> steps;
  const auto at = [&](int chunk) { return acc + red.bytes(b.displs[static_cast<std::size_t>(chunk)]); };
  const auto span = [&](int lo, int hi) {
    return b.displs[static_cast<std::size_t>(hi)] - b.displs[static_cast<std::size_t>(lo)];
  };
  int lo = 0;
  int hi = f.pof2;
  for (int mask = 1, k = 1; mask < f.pof2; mask <<= 1, ++k) {
    const int newdst = f.newrank ^ mask;
    const int mid = (lo + hi) / 2;
    Step st;
    st.partner = f.real(newdst);
    if ((f.newrank & mask) != 0) {
      st = {st.partner, mid, hi, lo, mid};
    } else {
      st = {st.partner, lo, mid, mid, hi};
    }
    const int keep = span(st.keep_lo, st.keep_hi);
    // With `input`, this rank's data is read where it is, and the partner's half lands in
    // `acc` directly, to have this rank's half folded into it.
    const auto mine = [&](int chunk) {
      return input != nullptr ? input + (at(chunk) - acc) : at(chunk);
    };
    s.recv(input != nullptr ? at(st.keep_lo) : tmp, red.bytes(keep), st.partner, k);
    s.send(mine(st.give_lo), red.bytes(span(st.give_lo, st.give_hi)), st.partner, k);
    s.sync();
    if (input != nullptr) {
      combine(s, red, mine(st.keep_lo), at(st.keep_lo), keep);
      input = nullptr;
    } else if (newdst < f.newrank || red.op.commutative()) {
      // Commutative: order is irrelevant to the value, and each chunk is computed only once.
      combine(s, red, tmp, at(st.keep_lo), keep);
    } else {
      combine(s, red, at(st.keep_lo), tmp, keep);
      s.copy(at(st.keep_lo), tmp, red.bytes(keep));
    }
    steps.push_back(st);
    lo = st.keep_lo;
    hi = st.keep_hi;
  }
  return steps;
}

constexpr int kAllgatherStepBase = 64;
constexpr int kGatherStep = 128;

}  // namespace

Blocks split_evenly(int count, int parts) {
  Blocks b;
  b.counts.resize(static_cast<std::size_t>(parts));
  b.displs.resize(static_cast<std::size_t>(parts) + 1);
  int offset = 0;
  for (int i = 0; i < parts; ++i) {
    b.counts[static_cast<std::size_t>(i)] = count / parts + (i < count % parts ? 1 : 0);
    b.displs[static_cast<std::size_t>(i)] = offset;
    offset += b.counts[static_cast<std::size_t>(i)];
  }
  b.displs[static_cast<std::size_t>(parts)] = offset;
  return b;
}

int halving_final_chunk(int newrank, int pof2) {
  int lo = 0;
  int hi = pof2;
  for (int mask = 1; mask < pof2; mask <<= 1) {
    const int mid = (lo + hi) / 2;
    if ((newrank & mask) != 0) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

void allreduce_rabenseifner(Schedule& s, const Reduction& red, const std::byte* send,
                            std::byte* data, int count) {
  const int r = s.rank();
  const std::size_t bytes = red.bytes(count);
  const Fold shape{floor_pow2(s.size()), s.size() - floor_pow2(s.size()), 0};
  const Blocks b = split_evenly(count, shape.pof2);
  // Commutative, no fold: the first halving step reads the input where it is, which saves a
  // copy of the whole vector. Otherwise the input is copied into `data` first.
  const bool direct = send != nullptr && shape.rem == 0 && red.op.commutative();
  if (send != nullptr && !direct) s.copy(data, send, bytes);
  // The fold needs a whole vector; the halving at most the first half.
  std::byte* tmp = s.scratch(r < 2 * shape.rem ? bytes : red.bytes(b.displs[static_cast<std::size_t>(shape.pof2 / 2)]));
  const Fold f = fold_in(s, red, data, tmp, count);
  if (f.newrank != -1) {
    const auto steps = halve(s, red, f, b, data, tmp, direct ? send : nullptr);
    int k = kAllgatherStepBase + static_cast<int>(steps.size());
    for (auto it = steps.rbegin(); it != steps.rend(); ++it, --k) {
      const auto& st = *it;
      const auto at = [&](int chunk) { return data + red.bytes(b.displs[static_cast<std::size_t>(chunk)]); };
      const auto len = [&](int lo, int hi) {
        return red.bytes(b.displs[static_cast<std::size_t>(hi)] - b.displs[static_cast<std::size_t>(lo)]);
      };
      s.recv(at(st.give_lo), len(st.give_lo, st.give_hi), st.partner, k);
      s.send(at(st.keep_lo), len(st.keep_lo, st.keep_hi), st.partner, k);
      s.sync();
    }
  }
  if (r < 2 * f.rem) {
    s.sync();
    if (r % 2 == 1) {
      s.send(data, bytes, r - 1, kFoldOutStep);
    } else {
      s.recv(data, bytes, r + 1, kFoldOutStep);
    }
  }
}

void reduce_rabenseifner(Schedule& s, const Reduction& red, const std::byte* send,
                         std::byte* recv, int count, int root) {
  const int r = s.rank();
  const std::size_t bytes = red.bytes(count);
  const int pof2 = floor_pow2(s.size());
  const Blocks b = split_evenly(count, pof2);
  std::byte* acc = s.scratch(bytes);
  std::byte* tmp = s.scratch(bytes);
  s.copy(acc, send != nullptr ? send : recv, bytes);  // nullptr: root in place
  const Fold f = fold_in(s, red, acc, tmp, count);
  if (f.newrank != -1) halve(s, red, f, b, acc, tmp);
  // Gather the pieces straight at the root (p-1 messages there; the halving already cut the
  // volume to n/pof2 per piece).
  s.sync();
  if (f.newrank != -1 && r != root) {
    const int chunk = halving_final_chunk(f.newrank, pof2);
    s.send(acc + red.bytes(b.displs[static_cast<std::size_t>(chunk)]),
           red.bytes(b.counts[static_cast<std::size_t>(chunk)]), root, kGatherStep);
  }
  if (r == root) {
    int own = -1;
    for (int nr = 0; nr < pof2; ++nr) {
      const int chunk = halving_final_chunk(nr, pof2);
      if (f.real(nr) == r) {
        own = chunk;
      } else {
        s.recv(recv + red.bytes(b.displs[static_cast<std::size_t>(chunk)]),
               red.bytes(b.counts[static_cast<std::size_t>(chunk)]), f.real(nr), kGatherStep);
      }
    }
    if (own != -1) {
      const std::size_t off = red.bytes(b.displs[static_cast<std::size_t>(own)]);
      s.copy(recv + off, acc + off, red.bytes(b.counts[static_cast<std::size_t>(own)]));
    }
  }
}

}  // namespace sempi::detail::coll
