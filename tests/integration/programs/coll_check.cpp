// A rank program that checks every collective against a serial reference, under sempirun.
// Usage: coll_check [SCENARIO]   (all | data | reduce | determinism | nonblocking | errors)
// Exit 0 = every check passed; a failed check prints what and where, and exits 1.
//
// Every rank can compute every rank's input (a function of rank, index and a seed), so each
// rank computes the reference result serially, in rank order, and compares bytes.

#include <algorithm>
#include <chrono>
#include <complex>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include <sempi/sempi.hpp>

namespace {

int g_rank = -1;
std::string g_where;  // what is being checked, for failure messages

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s [%s]\n", g_rank, __LINE__, \
                   #cond, g_where.c_str());                                                 \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
std::uint64_t fnv1a(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
std::uint8_t byte_at(int rank, std::size_t i, std::uint64_t seed) {
  return static_cast<std::uint8_t>(mix(seed * 1000003u + static_cast<std::uint64_t>(rank) * 7919u + i));
}

// Inputs chosen so that every reduction is exact in any order (the algorithms combine in
// different orders than the reference for commutative operations).
template <class T>
T value(int rank, std::size_t i, std::uint64_t seed) {
  const std::uint64_t h = mix(seed ^ (static_cast<std::uint64_t>(rank) << 40) ^ i);
  if constexpr (std::is_same_v<T, bool>) {
    return (h & 3u) != 0;
  } else if constexpr (std::is_same_v<T, std::byte>) {
    return static_cast<std::byte>(h);
  } else if constexpr (std::is_floating_point_v<T>) {
    static constexpr T kValues[] = {-2, -1, -0.5, 0.5, 1, 2, 4, -4};
    return kValues[h % 8];
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(h % 7 == 0 ? 0 : h);  // some zeros for the logical operations
  } else if constexpr (std::is_same_v<T, std::complex<double>>) {
    static constexpr double kParts[] = {-1, 0, 1, 2};
    return {kParts[h % 4], kParts[(h >> 8) % 4]};
  } else {  // ValueIndex<U>: few distinct values, so ties (lower index wins) happen
    using U = decltype(T::value);
    return T{static_cast<U>(h % 5), static_cast<int>((h >> 16) % 100)};
  }
}

// A minimal vector that also holds bool contiguously (std::vector<bool> has no data()).
template <class T>
class Buf {
 public:
  Buf() = default;
  explicit Buf(std::size_t n) : n_(n), p_(std::make_unique<T[]>(n)) {}
  Buf(const T* first, const T* last) : Buf(static_cast<std::size_t>(last - first)) {
    std::copy(first, last, p_.get());
  }
  Buf(const Buf& o) : Buf(o.begin(), o.end()) {}
  Buf& operator=(const Buf& o) {
    Buf copy(o);
    std::swap(n_, copy.n_);
    std::swap(p_, copy.p_);
    return *this;
  }
  Buf(Buf&&) noexcept = default;
  Buf& operator=(Buf&&) noexcept = default;
  ~Buf() = default;
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  [[nodiscard]] std::size_t size() const { return n_; }
  [[nodiscard]] bool empty() const { return n_ == 0; }
  T* begin() { return p_.get(); }
  T* end() { return p_.get() + n_; }
  const T* begin() const { return p_.get(); }
  const T* end() const { return p_.get() + n_; }
  T& operator[](std::size_t i) { return p_[i]; }
  void resize(std::size_t n) { n_ = std::min(n, n_); }  // shrink only
  friend bool operator==(const Buf& a, const Buf& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  std::size_t n_ = 0;
  std::unique_ptr<T[]> p_;
};

template <class T>
Buf<T> inputs(int rank, std::size_t n, std::uint64_t seed) {
  Buf<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value<T>(rank, i, seed);
  return v;
}

template <class T>
bool same_bytes(const Buf<T>& a, const Buf<T>& b) {
  if (a.size() != b.size()) return false;
  if constexpr (std::is_same_v<T, sempi::ValueIndex<double>> || std::is_same_v<T, sempi::ValueIndex<int>> ||
                std::is_same_v<T, std::complex<double>>) {
    // Padding bytes are not part of the value; complex products may differ in the sign of a
    // zero part depending on the (legitimately different) association order.
    return a == b;
  } else {
    return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
  }
}

// Serial reference: x0 op x1 op ... op x_{last}, left to right (ranks first..last).
template <class T>
Buf<T> fold(const sempi::Op& op, int first, int last, std::size_t n, std::uint64_t seed) {
  Buf<T> acc = inputs<T>(first, n, seed);
  for (int r = first + 1; r <= last; ++r) {
    Buf<T> next = inputs<T>(r, n, seed);
    op.apply(acc.data(), next.data(), static_cast<int>(n), sempi::datatype_traits<T>::type);
    acc = std::move(next);
  }
  return acc;
}

struct Forced {
  const char* name;
  const char* rabenseifner;
  const char* ring;
  const char* reduce_rabenseifner;
};
constexpr Forced kAllreduceAlgorithms[] = {
    {"recursive_doubling", "1G", "1G", "1G"},
    {"rabenseifner", "0", "1G", "0"},
    {"ring", "1G", "0", "1G"},
};
void force(const Forced& f) {
  ::setenv("SEMPI_COLL_ALLREDUCE_RABENSEIFNER_MIN", f.rabenseifner, 1);
  ::setenv("SEMPI_COLL_ALLREDUCE_RING_MIN", f.ring, 1);
  ::setenv("SEMPI_COLL_REDUCE_RABENSEIFNER_MIN", f.reduce_rabenseifner, 1);
}
void unforce() {
  ::unsetenv("SEMPI_COLL_ALLREDUCE_RABENSEIFNER_MIN");
  ::unsetenv("SEMPI_COLL_ALLREDUCE_RING_MIN");
  ::unsetenv("SEMPI_COLL_REDUCE_RABENSEIFNER_MIN");
  ::unsetenv("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN");
  ::unsetenv("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN_RANKS");
  ::unsetenv("SEMPI_COLL_ALLGATHER_RING_MIN");
}

// Every reduction collective for one (type, op, count) on one communicator.
template <class T>
void check_reductions(const sempi::Communicator& comm, const sempi::Op& op, std::size_t n,
                      std::uint64_t seed, bool all_algorithms) {
  const int p = comm.size();
  const int r = comm.rank();
  const int count = static_cast<int>(n);
  const auto mine = inputs<T>(r, n, seed);
  const auto full = fold<T>(op, 0, p - 1, n, seed);
  const std::string base = g_where;

  for (const auto& f : kAllreduceAlgorithms) {
    if (!all_algorithms && &f != &kAllreduceAlgorithms[0]) break;
    force(f);
    g_where = base + " allreduce/" + f.name;
    Buf<T> out(n);
    comm.allreduce(mine.data(), out.data(), count, op);
    CHECK(same_bytes(out, full));
    Buf<T> inplace = mine;
    comm.allreduce<T>(sempi::IN_PLACE, inplace.data(), count, op);
    CHECK(same_bytes(inplace, full));

    g_where = base + " reduce/" + f.name;
    const int root = static_cast<int>(seed % static_cast<std::uint64_t>(p));
    Buf<T> red(r == root ? n : 0);
    comm.reduce(mine.data(), red.data(), count, op, root);
    if (r == root) CHECK(same_bytes(red, full));
    Buf<T> red_in = mine;
    if (r == root) {
      comm.reduce<T>(sempi::IN_PLACE, red_in.data(), count, op, root);
      CHECK(same_bytes(red_in, full));
    } else {
      comm.reduce<T>(mine.data(), nullptr, count, op, root);
    }
  }
  unforce();

  g_where = base + " scan";
  Buf<T> scanned(n);
  comm.scan(mine.data(), scanned.data(), count, op);
  CHECK(same_bytes(scanned, fold<T>(op, 0, r, n, seed)));
  g_where = base + " exscan";
  Buf<T> ex = inputs<T>(p + 1, n, seed);  // rank 0's must stay untouched
  const auto untouched = ex;
  comm.exscan(mine.data(), ex.data(), count, op);
  CHECK(same_bytes(ex, r == 0 ? untouched : fold<T>(op, 0, r - 1, n, seed)));
  Buf<T> ex_in = mine;
  comm.exscan<T>(sempi::IN_PLACE, ex_in.data(), count, op);
  if (r > 0) CHECK(same_bytes(ex_in, fold<T>(op, 0, r - 1, n, seed)));

  g_where = base + " reduce_scatter_block";
  const std::size_t block = n / static_cast<std::size_t>(p);
  const auto full_blocks = fold<T>(op, 0, p - 1, block * static_cast<std::size_t>(p), seed);
  const auto all_blocks = inputs<T>(r, block * static_cast<std::size_t>(p), seed);
  Buf<T> rsb(block);
  comm.reduce_scatter_block(all_blocks.data(), rsb.data(), static_cast<int>(block), op);
  CHECK(same_bytes(rsb, Buf<T>(full_blocks.begin() + static_cast<long>(block) * r,
                                    full_blocks.begin() + static_cast<long>(block) * (r + 1))));

  g_where = base + " reduce_scatter";
  std::vector<int> counts(static_cast<std::size_t>(p));
  std::size_t left = n;
  for (int i = 0; i < p; ++i) {  // uneven, some zero
    const std::size_t c = i == p - 1 ? left : std::min(left, (n * static_cast<std::size_t>(i % 3)) / (static_cast<std::size_t>(p) + 1));
    counts[static_cast<std::size_t>(i)] = static_cast<int>(c);
    left -= c;
  }
  std::size_t offset = 0;
  for (int i = 0; i < r; ++i) offset += static_cast<std::size_t>(counts[static_cast<std::size_t>(i)]);
  const auto my_count = static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
  const Buf<T> expect(full.begin() + static_cast<long>(offset),
                              full.begin() + static_cast<long>(offset + my_count));
  Buf<T> rs(my_count);
  comm.reduce_scatter(mine.data(), rs.data(), counts, op);
  CHECK(same_bytes(rs, expect));
  Buf<T> rs_in = mine;
  comm.reduce_scatter<T>(sempi::IN_PLACE, rs_in.data(), counts, op);
  rs_in.resize(my_count);
  CHECK(same_bytes(rs_in, expect));
  g_where = base;
}

template <class T>
void reductions_for_type(const sempi::Communicator& comm, const char* type_name,
                         const std::vector<std::size_t>& counts, std::uint64_t seed) {
  using sempi::BuiltinOp;
  static constexpr BuiltinOp kOps[] = {BuiltinOp::sum,  BuiltinOp::prod, BuiltinOp::min,
                                       BuiltinOp::max,  BuiltinOp::land, BuiltinOp::lor,
                                       BuiltinOp::lxor, BuiltinOp::band, BuiltinOp::bor,
                                       BuiltinOp::bxor, BuiltinOp::minloc, BuiltinOp::maxloc};
  int k = 0;
  for (const std::size_t n : counts) {
    for (const auto b : kOps) {
      const sempi::Op op(b);
      if (!op.defined_for(sempi::datatype_traits<T>::type)) continue;
      // Small counts: every op; larger ones: a rotating sample.
      if (n > 64 && (k++ % 4) != 0) continue;
      g_where = comm.name() + " " + type_name + " " + op.name() + " n=" + std::to_string(n);
      check_reductions<T>(comm, op, n, seed + n, n <= 4096 || (k % 8) == 1);
    }
  }
}

// Affine maps x -> a x + b (mod 2^32) under composition: associative, not commutative. The
// lower rank's map is applied first: (lower op upper)(x) = upper(lower(x)).
struct Affine {
  std::uint32_t a, b;
};
sempi::Op affine_op() {
  return sempi::Op::user(
      [](const void* in, void* inout, int count, const sempi::ElementType& type) {
        if (type.size != sizeof(Affine)) throw sempi::Error(sempi::ErrorClass::type, "affine: bad type");
        const auto* lo = static_cast<const Affine*>(in);
        auto* hi = static_cast<Affine*>(inout);
        for (int i = 0; i < count; ++i) {
          hi[i] = Affine{hi[i].a * lo[i].a, hi[i].a * lo[i].b + hi[i].b};
        }
      },
      /*commutative=*/false, "affine");
}

void check_non_commutative(const sempi::Communicator& comm) {
  const int p = comm.size();
  const int r = comm.rank();
  const auto op = affine_op();
  const auto type = sempi::ElementType::opaque_of(sizeof(Affine));
  for (const std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{333}, std::size_t{20000}}) {
    const auto gen = [n](int rank) {
      std::vector<Affine> v(n);
      for (std::size_t i = 0; i < n; ++i) {
        const auto h = mix(static_cast<std::uint64_t>(rank) * 31 + i);
        v[i] = Affine{static_cast<std::uint32_t>(h) | 1u, static_cast<std::uint32_t>(h >> 32)};
      }
      return v;
    };
    const auto ref = [&](int first, int last) {
      std::vector<Affine> acc = gen(first);
      for (int q = first + 1; q <= last; ++q) {
        auto next = gen(q);
        op.apply(acc.data(), next.data(), static_cast<int>(n), type);
        acc = std::move(next);
      }
      return acc;
    };
    const auto eq = [](const std::vector<Affine>& x, const std::vector<Affine>& y) {
      return std::memcmp(x.data(), y.data(), x.size() * sizeof(Affine)) == 0;
    };
    const auto mine = gen(r);
    const auto full = ref(0, p - 1);
    for (const auto& f : kAllreduceAlgorithms) {
      force(f);
      g_where = comm.name() + " affine allreduce/" + f.name + " n=" + std::to_string(n);
      std::vector<Affine> out(n);
      comm.allreduce_raw(mine.data(), out.data(), static_cast<int>(n), type, op);
      CHECK(eq(out, full));
      g_where = comm.name() + " affine reduce/" + f.name + " n=" + std::to_string(n);
      const int root = p - 1;
      std::vector<Affine> red(n);
      comm.reduce_raw(mine.data(), red.data(), static_cast<int>(n), type, op, root);
      if (r == root) CHECK(eq(red, full));
    }
    unforce();
    g_where = comm.name() + " affine scan n=" + std::to_string(n);
    std::vector<Affine> sc(n);
    comm.scan_raw(mine.data(), sc.data(), static_cast<int>(n), type, op);
    CHECK(eq(sc, ref(0, r)));
    std::vector<Affine> ex(n);
    comm.exscan_raw(mine.data(), ex.data(), static_cast<int>(n), type, op);
    if (r > 0) CHECK(eq(ex, ref(0, r - 1)));
    g_where = comm.name() + " affine reduce_scatter n=" + std::to_string(n);
    std::vector<int> counts(static_cast<std::size_t>(p), static_cast<int>(n / static_cast<std::size_t>(p)));
    counts[static_cast<std::size_t>(p - 1)] += static_cast<int>(n % static_cast<std::size_t>(p));
    std::vector<Affine> rs(static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]));
    comm.reduce_scatter_raw(mine.data(), rs.data(), counts, type, op);
    const std::size_t off = static_cast<std::size_t>(counts[0]) * static_cast<std::size_t>(r);
    CHECK(rs.empty() || std::memcmp(rs.data(), full.data() + off, rs.size() * sizeof(Affine)) == 0);
  }
  // A typed non-commutative op: "keep the lower rank's value" gives rank 0's input.
  g_where = comm.name() + " first-wins elementwise op";
  const auto first = sempi::Op::elementwise<int>([](int lower, int) { return lower; }, false, "first");
  CHECK(comm.allreduce(r * 10 + 3, first) == 3);
  CHECK(comm.reduce(r * 10 + 3, first, p - 1) == (r == p - 1 ? 3 : r * 10 + 3));
}

void check_reductions_all(const sempi::Communicator& comm, bool big) {
  std::vector<std::size_t> counts = {0, 1, 2, 7, 17, 100, 1000, 40000};
  reductions_for_type<int>(comm, "int", counts, 11);
  reductions_for_type<double>(comm, "double", counts, 12);
  reductions_for_type<float>(comm, "float", {1, 9, 513}, 13);
  reductions_for_type<unsigned char>(comm, "unsigned char", {3, 1000}, 14);
  reductions_for_type<long long>(comm, "long long", {5, 257}, 15);
  reductions_for_type<short>(comm, "short", {6, 77}, 16);
  reductions_for_type<unsigned long>(comm, "unsigned long", {4, 300}, 17);
  reductions_for_type<bool>(comm, "bool", {1, 33, 2000}, 18);
  reductions_for_type<std::byte>(comm, "byte", {8, 999}, 19);
  reductions_for_type<std::complex<double>>(comm, "complex<double>", {1, 50}, 20);
  reductions_for_type<sempi::ValueIndex<double>>(comm, "double_int", {1, 64, 3000}, 21);
  reductions_for_type<sempi::ValueIndex<int>>(comm, "2int", {2, 100}, 22);
  if (big) {
    // One sample near the top of the range (1 Mi elements) per allreduce algorithm.
    const std::size_t n = std::size_t{1} << 20;
    const int p = comm.size();
    const auto mine = inputs<float>(comm.rank(), n, 99);
    const auto full = fold<float>(sempi::Op::sum(), 0, p - 1, n, 99);
    for (const auto& f : kAllreduceAlgorithms) {
      force(f);
      g_where = comm.name() + " float sum n=1Mi allreduce/" + f.name;
      Buf<float> out(n);
      comm.allreduce(mine.data(), out.data(), static_cast<int>(n), sempi::Op::sum());
      CHECK(same_bytes(out, full));
    }
    unforce();
  }
  check_non_commutative(comm);
}

// Non-reduction collectives: bcast, scatter(v), gather(v), allgather(v), alltoall(v), barrier.
void check_data(const sempi::Communicator& comm, bool big) {
  const int p = comm.size();
  const int r = comm.rank();
  const auto P = static_cast<std::size_t>(p);
  std::vector<std::size_t> sizes = {0, 1, 5, 64, 1000, 70000};
  if (big) sizes.push_back(3u << 20);
  comm.barrier();
  for (const std::size_t n : sizes) {
    const auto pattern = [n](int rank, std::uint64_t seed) {
      std::vector<std::uint8_t> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = byte_at(rank, i, seed);
      return v;
    };
    for (const int root : {0, p - 1, p / 2}) {
      // bcast, both algorithms
      for (const char* min : {"1G", "0"}) {
        ::setenv("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN", min, 1);
        ::setenv("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN_RANKS", "1", 1);
        g_where = comm.name() + " bcast n=" + std::to_string(n) + " root=" + std::to_string(root) + " min=" + min;
        auto buf = r == root ? pattern(root, n) : std::vector<std::uint8_t>(n, 0xEE);
        comm.bcast(buf, root);
        CHECK(buf == pattern(root, n));
      }
      unforce();
      if (n > 70000) continue;  // per-rank blocks: keep the rest small
      g_where = comm.name() + " scatter n=" + std::to_string(n) + " root=" + std::to_string(root);
      std::vector<std::uint8_t> all;
      for (int q = 0; q < p; ++q) {
        auto b = pattern(q, 7);
        all.insert(all.end(), b.begin(), b.end());
      }
      std::vector<std::uint8_t> part(n, 0xEE);
      comm.scatter(r == root ? all.data() : nullptr, part.data(), static_cast<int>(n), root);
      CHECK(part == pattern(r, 7));
      if (r == root) {  // in place at the root
        comm.scatter<std::uint8_t>(all.data(), sempi::IN_PLACE, static_cast<int>(n), root);
      } else {
        comm.scatter<std::uint8_t>(nullptr, part.data(), static_cast<int>(n), root);
        CHECK(part == pattern(r, 7));
      }
      g_where = comm.name() + " gather n=" + std::to_string(n) + " root=" + std::to_string(root);
      std::vector<std::uint8_t> gathered(r == root ? n * P : 0, 0xEE);
      const auto my = pattern(r, 7);
      comm.gather(my.data(), gathered.data(), static_cast<int>(n), root);
      if (r == root) CHECK(gathered == all);
      if (r == root) {
        std::vector<std::uint8_t> g2(n * P, 0xEE);
        std::copy(my.begin(), my.end(), g2.begin() + static_cast<long>(n) * r);
        comm.gather<std::uint8_t>(sempi::IN_PLACE, g2.data(), static_cast<int>(n), root);
        CHECK(g2 == all);
      } else {
        comm.gather<std::uint8_t>(my.data(), nullptr, static_cast<int>(n), root);
      }
      // v-variants: rank q has q % 3 * n / 2 + 1 elements (some ranks 1, others more)
      std::vector<int> counts(P), displs(P);
      int total = 0;
      for (int q = 0; q < p; ++q) {
        counts[static_cast<std::size_t>(q)] = static_cast<int>((static_cast<std::size_t>(q % 3) * n) / 2 + (q == 1 ? 0 : 1));
        displs[static_cast<std::size_t>(q)] = total + 3;  // gaps between blocks
        total += counts[static_cast<std::size_t>(q)] + 3;
      }
      std::vector<std::uint8_t> vall(static_cast<std::size_t>(total), 0xEE);
      for (int q = 0; q < p; ++q) {
        const auto b = pattern(q, 9);
        std::copy_n(b.begin(), std::min<std::size_t>(b.size(), static_cast<std::size_t>(counts[static_cast<std::size_t>(q)])),
                    vall.begin() + displs[static_cast<std::size_t>(q)]);
      }
      const auto me = static_cast<std::size_t>(r);
      // pattern(q, 9) has n bytes but counts may exceed n; fill the rest deterministically.
      for (int q = 0; q < p; ++q) {
        const auto c = static_cast<std::size_t>(counts[static_cast<std::size_t>(q)]);
        for (std::size_t i = std::min(c, n); i < c; ++i) vall[static_cast<std::size_t>(displs[static_cast<std::size_t>(q)]) + i] = byte_at(q, i, 9);
      }
      const std::vector<std::uint8_t> myv(vall.begin() + displs[me], vall.begin() + displs[me] + counts[me]);
      g_where = comm.name() + " scatterv n=" + std::to_string(n) + " root=" + std::to_string(root);
      std::vector<std::uint8_t> vpart(static_cast<std::size_t>(counts[me]), 0xEE);
      comm.scatterv(r == root ? vall.data() : nullptr, counts, displs, vpart.data(), counts[me], root);
      CHECK(vpart == myv);
      g_where = comm.name() + " gatherv n=" + std::to_string(n) + " root=" + std::to_string(root);
      std::vector<std::uint8_t> vg(r == root ? vall.size() : 0, 0xEE);
      comm.gatherv(myv.data(), counts[me], vg.data(), counts, displs, root);
      if (r == root) {
        for (int q = 0; q < p; ++q) {
          const auto d = static_cast<long>(displs[static_cast<std::size_t>(q)]);
          CHECK(std::equal(vg.begin() + d, vg.begin() + d + counts[static_cast<std::size_t>(q)], vall.begin() + d));
        }
      }
      if (root != 0) continue;
      g_where = comm.name() + " allgatherv n=" + std::to_string(n);
      std::vector<std::uint8_t> vag(vall.size(), 0xEE);
      comm.allgatherv(myv.data(), counts[me], vag.data(), counts, displs);
      for (int q = 0; q < p; ++q) {
        const auto d = static_cast<long>(displs[static_cast<std::size_t>(q)]);
        CHECK(std::equal(vag.begin() + d, vag.begin() + d + counts[static_cast<std::size_t>(q)], vall.begin() + d));
      }
      for (const char* ring_min : {"1G", "0"}) {
        ::setenv("SEMPI_COLL_ALLGATHER_RING_MIN", ring_min, 1);
        g_where = comm.name() + " allgather n=" + std::to_string(n) + " ring_min=" + ring_min;
        std::vector<std::uint8_t> ag(n * P, 0xEE);
        comm.allgather(my.data(), ag.data(), static_cast<int>(n));
        CHECK(ag == all);
        std::vector<std::uint8_t> ag2(n * P, 0xEE);
        std::copy(my.begin(), my.end(), ag2.begin() + static_cast<long>(n) * r);
        comm.allgather<std::uint8_t>(sempi::IN_PLACE, ag2.data(), static_cast<int>(n));
        CHECK(ag2 == all);
      }
      unforce();
      // alltoall: block q of rank r's send = pattern(r*p+q)
      g_where = comm.name() + " alltoall n=" + std::to_string(n);
      std::vector<std::uint8_t> a2a_send, a2a_expect;
      for (int q = 0; q < p; ++q) {
        for (std::size_t i = 0; i < n; ++i) {
          a2a_send.push_back(byte_at(r * p + q, i, 3));
          a2a_expect.push_back(byte_at(q * p + r, i, 3));
        }
      }
      std::vector<std::uint8_t> a2a(n * P, 0xEE);
      comm.alltoall(a2a_send.data(), a2a.data(), static_cast<int>(n));
      CHECK(a2a == a2a_expect);
      std::vector<std::uint8_t> a2a_in = a2a_send;
      comm.alltoall<std::uint8_t>(sempi::IN_PLACE, a2a_in.data(), static_cast<int>(n));
      CHECK(a2a_in == a2a_expect);
      // alltoallv: rank r sends (r + q) % 3 * n/4 + 1 bytes to q
      g_where = comm.name() + " alltoallv n=" + std::to_string(n);
      const auto amount = [n](int from, int to) { return static_cast<int>(static_cast<std::size_t>((from + to) % 3) * n / 4 + 1); };
      std::vector<int> sc(P), sd(P), rc(P), rd(P);
      int st = 0, rt = 0;
      for (int q = 0; q < p; ++q) {
        const auto i = static_cast<std::size_t>(q);
        sc[i] = amount(r, q);
        sd[i] = st;
        st += sc[i] + 1;
        rc[i] = amount(q, r);
        rd[i] = rt;
        rt += rc[i] + 2;
      }
      std::vector<std::uint8_t> vs(static_cast<std::size_t>(st)), vr(static_cast<std::size_t>(rt), 0xEE);
      for (int q = 0; q < p; ++q) {
        for (int i = 0; i < sc[static_cast<std::size_t>(q)]; ++i) {
          vs[static_cast<std::size_t>(sd[static_cast<std::size_t>(q)] + i)] = byte_at(r * p + q, static_cast<std::size_t>(i), 4);
        }
      }
      comm.alltoallv(vs.data(), sc, sd, vr.data(), rc, rd);
      for (int q = 0; q < p; ++q) {
        for (int i = 0; i < rc[static_cast<std::size_t>(q)]; ++i) {
          CHECK(vr[static_cast<std::size_t>(rd[static_cast<std::size_t>(q)] + i)] == byte_at(q * p + r, static_cast<std::size_t>(i), 4));
        }
      }
    }
  }
  comm.barrier();
}

// Bitwise identical floating-point allreduce on every rank, and the same bytes on every call.
void check_determinism(const sempi::Communicator& comm) {
  const int r = comm.rank();
  for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{100003}}) {
    std::vector<double> mine(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto h = mix(static_cast<std::uint64_t>(r) * 1315423911u + i);
      mine[i] = static_cast<double>(h % 1000003) * 1e-3 / 7.0 * ((h >> 20) % 2 ? 1e8 : 1e-8);
    }
    for (const auto& f : kAllreduceAlgorithms) {
      force(f);
      g_where = comm.name() + " determinism n=" + std::to_string(n) + " " + f.name;
      std::vector<double> out(n), again(n);
      comm.allreduce(mine.data(), out.data(), static_cast<int>(n), sempi::Op::sum());
      const std::uint64_t h = fnv1a(out.data(), n * sizeof(double));
      const auto hashes = comm.allgather(h);
      for (const auto x : hashes) CHECK(x == h);
      comm.allreduce(mine.data(), again.data(), static_cast<int>(n), sempi::Op::sum());
      CHECK(fnv1a(again.data(), n * sizeof(double)) == h);
      auto nb = std::vector<double>(n);
      auto req = comm.iallreduce(mine.data(), nb.data(), static_cast<int>(n), sempi::Op::sum());
      req.wait();
      CHECK(fnv1a(nb.data(), n * sizeof(double)) == h);
    }
    unforce();
  }
}

// Nonblocking collectives interleaved with point-to-point traffic and with each other, and
// concurrent collectives on different communicators from two threads.
void check_nonblocking(const sempi::Communicator& world) {
  const int p = world.size();
  const int r = world.rank();
  const auto other = world.dup();
  for (int iteration = 0; iteration < 20; ++iteration) {
    g_where = "nonblocking iteration " + std::to_string(iteration);
    // A wildcard point-to-point receive posted first must not match collective traffic.
    int incoming = -1;
    auto p2p_recv = world.irecv(&incoming, 1, sempi::ANY_SOURCE, sempi::ANY_TAG);
    const std::size_t n = iteration % 2 == 0 ? 10 : 50000;
    std::vector<long> mine(n, r + 1), sum(n, 0);
    auto a = world.iallreduce(mine.data(), sum.data(), static_cast<int>(n), sempi::Op::sum());
    auto b = world.ibarrier();
    std::vector<int> bc(n % 1000 + 1, r == 0 ? 42 : 0);
    auto c = other.ibcast(bc.data(), static_cast<int>(bc.size()), 0);
    const int value = 1000 + r;
    // Tags that look like collective tags on purpose.
    world.send(&value, 1, (r + 1) % p, (1 << 30) | iteration);
    const auto status = p2p_recv.wait();
    CHECK(incoming == 1000 + (r - 1 + p) % p);
    CHECK(status.source == (r - 1 + p) % p);
    // The data-movement collectives, each with its own root, overlapping the ones above.
    const int root = iteration % p;
    const int per_rank = static_cast<int>(n % 1000 + 1);
    std::vector<int> block(static_cast<std::size_t>(per_rank), r), gathered,
        all(static_cast<std::size_t>(per_rank * p));
    std::vector<int> scatter_src, part(static_cast<std::size_t>(per_rank)),
        to_each(static_cast<std::size_t>(p)), from_each(static_cast<std::size_t>(p));
    if (r == root) gathered.resize(static_cast<std::size_t>(per_rank * p));
    if (r == root) {
      for (int q = 0; q < p; ++q)
        scatter_src.insert(scatter_src.end(), static_cast<std::size_t>(per_rank), q * 7);
    }
    for (int q = 0; q < p; ++q) to_each[static_cast<std::size_t>(q)] = r * 100 + q;
    long reduced = 0;
    const long one = r;
    std::vector<sempi::Request> reqs;
    reqs.push_back(world.igather(block.data(), gathered.data(), per_rank, root));
    reqs.push_back(other.iscatter(scatter_src.data(), part.data(), per_rank, root));
    reqs.push_back(world.iallgather(block.data(), all.data(), per_rank));
    reqs.push_back(other.ialltoall(to_each.data(), from_each.data(), 1));
    reqs.push_back(world.ireduce(&one, &reduced, 1, sempi::Op::max(), root));
    reqs.push_back(std::move(c));
    reqs.push_back(std::move(b));
    reqs.push_back(std::move(a));
    if (iteration % 3 == 0) {
      sempi::Request::wait_all(reqs);
    } else if (iteration % 3 == 1) {
      for (std::size_t k = 0; k < reqs.size(); ++k) {
        const std::size_t idx = sempi::Request::wait_any(reqs);
        CHECK(idx < reqs.size());
      }
      CHECK(sempi::Request::wait_any(reqs) == reqs.size());
    } else {
      // Polling with test() until done: bounded by the job timeout.
      for (auto& q : reqs) {
        while (!q.test()) {
        }
      }
    }
    CHECK(std::all_of(sum.begin(), sum.end(), [p](long x) { return x == static_cast<long>(p) * (p + 1) / 2; }));
    CHECK(std::all_of(bc.begin(), bc.end(), [](int x) { return x == 42; }));
    for (int q = 0; q < p; ++q) {
      const auto at = static_cast<std::size_t>(q * per_rank);
      if (r == root)
        CHECK(gathered[at] == q && gathered[at + static_cast<std::size_t>(per_rank) - 1] == q);
      CHECK(all[at] == q && all[at + static_cast<std::size_t>(per_rank) - 1] == q);
      CHECK(from_each[static_cast<std::size_t>(q)] == q * 100 + r);
    }
    CHECK(std::all_of(part.begin(), part.end(), [r](int x) { return x == r * 7; }));
    if (r == root) CHECK(reduced == p - 1);
  }
  // Two threads, each looping collectives on its own communicator.
  // The vector forms and the prefix reductions, nonblocking and overlapping on two
  // communicators. Rank q contributes q + 1 elements.
  g_where = "nonblocking vector collectives";
  {
    std::vector<int> counts(static_cast<std::size_t>(p));
    std::vector<int> displs(static_cast<std::size_t>(p));
    int span = 0;
    for (int q = 0; q < p; ++q) {
      counts[static_cast<std::size_t>(q)] = q + 1;
      displs[static_cast<std::size_t>(q)] = span;
      span += q + 1;
    }
    const auto n = static_cast<std::size_t>(span);
    const auto own = static_cast<std::size_t>(r + 1);
    std::vector<int> mine(own, r), all(n, -1), gathered(n, -1), part(own, -1), src(n);
    for (int q = 0; q < p; ++q) {
      for (int i = 0; i <= q; ++i)
        src[static_cast<std::size_t>(displs[static_cast<std::size_t>(q)] + i)] = q * 10;
    }
    std::vector<long> block_in(static_cast<std::size_t>(2 * p), r), block_out(2, 0);
    std::vector<long> rs_in(n, 1), rs_out(own, 0);
    std::vector<int> ones(static_cast<std::size_t>(p), 1), seq(static_cast<std::size_t>(p));
    std::vector<int> to(static_cast<std::size_t>(p)), from(static_cast<std::size_t>(p), -1);
    for (int q = 0; q < p; ++q) {
      seq[static_cast<std::size_t>(q)] = q;
      to[static_cast<std::size_t>(q)] = r * 100 + q;
    }
    const long one = 1;
    long prefix = 0;
    long before = -1;
    std::vector<sempi::Request> reqs;
    reqs.push_back(world.iallgatherv(mine.data(), r + 1, all.data(), counts, displs));
    reqs.push_back(other.iscatterv(src.data(), counts, displs, part.data(), r + 1, p - 1));
    reqs.push_back(world.igatherv(mine.data(), r + 1, gathered.data(), counts, displs, 0));
    reqs.push_back(other.iscan(&one, &prefix, 1, sempi::Op::sum()));
    reqs.push_back(
        world.ireduce_scatter_block(block_in.data(), block_out.data(), 2, sempi::Op::sum()));
    reqs.push_back(other.ialltoallv(to.data(), ones, seq, from.data(), ones, seq));
    reqs.push_back(world.iexscan(&one, &before, 1, sempi::Op::sum()));
    reqs.push_back(world.ireduce_scatter(rs_in.data(), rs_out.data(), counts, sempi::Op::sum()));
    sempi::Request::wait_all(reqs);
    for (int q = 0; q < p; ++q) {
      const auto first = static_cast<std::size_t>(displs[static_cast<std::size_t>(q)]);
      CHECK(all[first] == q && all[first + static_cast<std::size_t>(q)] == q);
      if (r == 0) CHECK(gathered[first] == q && gathered[first + static_cast<std::size_t>(q)] == q);
      CHECK(from[static_cast<std::size_t>(q)] == q * 100 + r);
    }
    CHECK(std::all_of(part.begin(), part.end(), [r](int x) { return x == r * 10; }));
    CHECK(prefix == r + 1);
    if (r > 0) CHECK(before == r);
    const long ranks = static_cast<long>(p) * (p - 1) / 2;
    CHECK(block_out[0] == ranks && block_out[1] == ranks);
    CHECK(std::all_of(rs_out.begin(), rs_out.end(), [p](long x) { return x == p; }));
  }
  g_where = "threads on three communicators";
  const auto c1 = world.dup();
  const auto c2 = world.dup();
  bool ok1 = true, ok2 = true;
  std::thread t1([&] {
    for (int i = 0; i < 30; ++i) {
      std::vector<int> v(1000 + i, r), s(1000 + i);
      c1.allreduce(v.data(), s.data(), static_cast<int>(v.size()), sempi::Op::max());
      ok1 = ok1 && std::all_of(s.begin(), s.end(), [p](int x) { return x == p - 1; });
      c1.barrier();
    }
  });
  std::thread t2([&] {
    for (int i = 0; i < 30; ++i) {
      std::vector<double> v(3000 + i, 1.0), s(3000 + i);
      c2.allreduce(v.data(), s.data(), static_cast<int>(v.size()), sempi::Op::sum());
      ok2 = ok2 && std::all_of(s.begin(), s.end(), [p](double x) { return x == p; });
      std::vector<int> g(static_cast<std::size_t>(p));
      c2.allgather(&r, g.data(), 1);
      for (int q = 0; q < p; ++q) ok2 = ok2 && g[static_cast<std::size_t>(q)] == q;
    }
  });
  // A third thread's nonblocking collectives, polled with test(): the other threads' waits
  // advance them too (the progress rule), so one schedule is driven from several threads.
  const auto c3 = world.dup();
  bool ok3 = true;
  std::thread t3([&] {
    for (int i = 0; i < 30; ++i) {
      std::vector<long> v(500 + i, r + 1), s(500 + i);
      auto sum = c3.iallreduce(v.data(), s.data(), static_cast<int>(v.size()), sempi::Op::sum());
      auto fence = c3.ibarrier();
      while (!sum.test()) std::this_thread::yield();
      fence.wait();
      const long expected = static_cast<long>(p) * (p + 1) / 2;
      ok3 = ok3 && std::all_of(s.begin(), s.end(), [expected](long x) { return x == expected; });
    }
  });
  t1.join();
  t2.join();
  t3.join();
  CHECK(ok1);
  CHECK(ok2);
  CHECK(ok3);
}

template <class F>
void expect_error(sempi::ErrorClass cls, F&& f) {
  try {
    f();
  } catch (const sempi::Error& e) {
    if (e.error_class() != cls) std::fprintf(stderr, "rank %d: unexpected error: %s\n", g_rank, e.what());
    CHECK(e.error_class() == cls);
    return;
  }
  CHECK(!"expected an error");
}

void check_errors(const sempi::Communicator& comm) {
  const int p = comm.size();
  g_where = "argument errors";
  int x = 0;
  std::vector<int> v(static_cast<std::size_t>(p));
  expect_error(sempi::ErrorClass::root, [&] { comm.bcast(&x, 1, p); });
  expect_error(sempi::ErrorClass::root, [&] { comm.reduce(&x, &x, 1, sempi::Op::sum(), -1); });
  expect_error(sempi::ErrorClass::count, [&] { comm.allreduce(&x, &x, -1, sempi::Op::sum()); });
  expect_error(sempi::ErrorClass::op, [&] {
    std::complex<double> c{};
    comm.allreduce(&c, &c, 1, sempi::Op::max());
  });
  expect_error(sempi::ErrorClass::op, [&] {
    double d = 0;
    comm.allreduce(&d, &d, 1, sempi::Op::band());
  });
  expect_error(sempi::ErrorClass::op, [&] { comm.allreduce(&x, &x, 1, sempi::Op::minloc()); });
  expect_error(sempi::ErrorClass::buffer, [&] { comm.allreduce<int>(&x, nullptr, 1, sempi::Op::sum()); });
  expect_error(sempi::ErrorClass::buffer, [&] { comm.bcast<int>(sempi::IN_PLACE, 1, 0); });
  expect_error(sempi::ErrorClass::arg, [&] {
    comm.reduce_scatter(v.data(), v.data(), std::span<const int>(), sempi::Op::sum());
  });
  if (p > 1 && comm.rank() != 0) {  // IN_PLACE is for the root only
    expect_error(sempi::ErrorClass::buffer, [&] { comm.scatter<int>(nullptr, sempi::IN_PLACE, 1, 0); });
  } else if (p > 1) {
    // The root's arguments are fine; the others refused theirs and took no part, so its sends
    // to them fail if their withdrawals arrive first.
    try {
      comm.scatter<int>(v.data(), sempi::IN_PLACE, 1, 0);
    } catch (const sempi::Error& e) {
      CHECK(e.error_class() == sempi::ErrorClass::buffer);
    }
  }
  expect_error(sempi::ErrorClass::config, [&] {
    ::setenv("SEMPI_COLL_ALLREDUCE_RING_MIN", "lots", 1);
    struct Restore {
      ~Restore() { ::unsetenv("SEMPI_COLL_ALLREDUCE_RING_MIN"); }
    } restore;
    comm.allreduce(&x, &x, 1, sempi::Op::sum());
  });
  // Every rank failed the same calls before communicating; the communicator is still usable.
  CHECK(comm.allreduce(1, sempi::Op::sum()) == p);
}

// The outcome of a collective call on this rank: 0 success, else the error class, and the
// error's text (empty on success).
template <class F>
std::pair<sempi::ErrorClass, std::string> outcome(F&& call) {
  try {
    call();
    return {sempi::ErrorClass::success, {}};
  } catch (const sempi::Error& e) {
    return {e.error_class(), e.what()};
  }
}

// A collective that one rank's own checks refuse fails promptly on the ranks that depend on
// it, with that rank's error, and the communicator stays usable: the refusing rank takes the
// collective's sequence number anyway and withdraws from it (coll/abandon.hpp).
// The blocks are above the eager limit, so a rank sending to the refusing one waits for it
// (rendezvous) and must be failed, not left waiting for the job's timeout.
void check_abandoned(const sempi::Communicator& world) {
  const int p = world.size();
  const int r = world.rank();
  if (p < 2) return;
  constexpr int kInts = 64 * 1024;  // 256 KiB a block
  std::vector<int> mine(kInts, r);
  std::vector<int> all(static_cast<std::size_t>(kInts) * static_cast<std::size_t>(p));
  const auto refused_by = [](const std::string& what, int rank) {
    return what.find("rank " + std::to_string(rank) + " took no part") != std::string::npos;
  };
  const auto agree = [&](const char* where) {
    g_where = where;
    CHECK(world.allreduce(r, sempi::Op::sum()) == p * (p - 1) / 2);  // sequence numbers in step
  };

  // gather: the root's receive buffer is null. Rank 1 sends to the root in every algorithm.
  g_where = "gather refused by the root";
  auto [cls, what] =
      outcome([&] { world.gather<int>(mine.data(), r == 0 ? nullptr : all.data(), kInts, 0); });
  if (r == 0) {
    CHECK(cls == sempi::ErrorClass::buffer && !refused_by(what, 0));
  } else if (r == 1) {
    CHECK(cls == sempi::ErrorClass::buffer && refused_by(what, 0));
  } else {
    CHECK(cls == sempi::ErrorClass::success || refused_by(what, 0));
  }
  agree("after the refused gather");

  // The same, nonblocking: the request of rank 1 fails.
  g_where = "igather refused by the root";
  std::tie(cls, what) = outcome([&] {
    auto request = world.igather<int>(mine.data(), r == 0 ? nullptr : all.data(), kInts, 0);
    request.wait();
  });
  CHECK(r != 1 || (cls == sempi::ErrorClass::buffer && refused_by(what, 0)));
  agree("after the refused igather");

  // bcast: the last rank's buffer is null. Whatever the algorithm, another rank fails too: one
  // that sends it a block by rendezvous, or one that receives a block from it.
  g_where = "bcast refused by a receiver";
  const int refuser = p - 1;
  std::tie(cls, what) =
      outcome([&] { world.bcast<int>(r == refuser ? nullptr : mine.data(), kInts, 0); });
  if (r == refuser) {
    CHECK(cls == sempi::ErrorClass::buffer && !refused_by(what, refuser));
  } else {
    CHECK(cls == sempi::ErrorClass::success || refused_by(what, refuser));
  }
  g_where = "bcast refused by a receiver: someone else failed";
  CHECK(world.allreduce(cls == sempi::ErrorClass::success ? 0 : 1, sempi::Op::sum()) >= 2);
  agree("after the refused bcast");

  // reduce (binomial at this size): the root's own reduction throws on its first child's
  // block, so it never receives rank 2's, which waits to go by rendezvous. The root's
  // withdrawal fails that send; it used to wait for the job's timeout.
  g_where = "reduce whose reduction throws at the root";
  const auto picky = sempi::Op::elementwise<int>(
      [r](int a, int b) {
        if (r == 0) throw std::runtime_error("rank 0 refuses to add");
        return a + b;
      },
      true);
  std::tie(cls, what) = outcome([&] {
    try {
      world.reduce(mine.data(), all.data(), kInts, picky, 0);
    } catch (const sempi::Error&) {
      throw;
    } catch (const std::runtime_error& e) {  // the reduction's own exception, as it threw it
      CHECK(r == 0 && std::string(e.what()) == "rank 0 refuses to add");
      throw sempi::Error(sempi::ErrorClass::op, e.what());
    }
  });
  if (r == 2) {
    CHECK(cls == sempi::ErrorClass::op &&
          what.find("rank 0's part failed: reduction operation failed") != std::string::npos);
  }
  agree("after the failed reduce");
}

// A collective that fails on a rank while a peer's message is still streaming into the
// application's buffer returns its error only once that message is in: the application may
// free or reuse the buffer as soon as the call returns. Here rank 1 refuses a gather (a null
// send buffer) after rank 2's 32 MiB block to the root has begun to arrive, by rendezvous,
// straight into the root's receive buffer (at 3 ranks: at 4, rank 2 first waits for rank
// 3's block and the refusal usually comes before its own). The root overwrites that part of
// its buffer as soon as its gather fails, and the block must not land on top afterwards.
void check_error_returns_after_transfers(const sempi::Communicator& world) {
  const int p = world.size();
  const int r = world.rank();
  if (p < 3 || p > 4) return;  // the root holds p blocks
  g_where = "gather failing while a block streams into the root's buffer";
  constexpr int kInts = 8 * 1024 * 1024;  // 32 MiB a block: tens of milliseconds to arrive
  std::vector<int> mine(kInts, r);
  std::vector<int> all(r == 0 ? static_cast<std::size_t>(kInts) * static_cast<std::size_t>(p) : 0);
  if (r == 2) {
    auto request = world.igather<int>(mine.data(), nullptr, kInts, 0);
    world.send(1, 1, 77);  // the block is on its way: rank 1 may refuse now
    (void)outcome([&] { request.wait(); });
  } else if (r == 1) {
    int go = 0;
    world.recv(go, 2, 77);
    const auto [cls, what] = outcome([&] { world.gather<int>(nullptr, nullptr, kInts, 0); });
    CHECK(cls == sempi::ErrorClass::buffer);
  } else {
    const auto [cls, what] =
        outcome([&] { world.gather<int>(mine.data(), r == 0 ? all.data() : nullptr, kInts, 0); });
    CHECK(r != 0 || cls == sempi::ErrorClass::buffer);
    if (r == 0) std::fill_n(all.begin() + 2 * kInts, kInts, -1);  // reused at once
  }
  g_where = "after the gather that failed while a block streamed";
  CHECK(world.allreduce(r, sempi::Op::sum()) == p * (p - 1) / 2);
  if (r == 0) {
    CHECK(std::all_of(all.begin() + 2 * kInts, all.begin() + 3 * kInts,
                      [](int v) { return v == -1; }));
  }
}

// Two nonblocking collectives waited for in opposite orders by different ranks: wait_all must
// drive both at once (driving one at a time deadlocked at 4 ranks, where a barrier takes two
// rounds and a rank's partner drives the other one first).
void check_wait_all_order(const sempi::Communicator& world) {
  g_where = "wait_all in opposite orders";
  auto a = world.ibarrier();
  auto b = world.ibarrier();
  std::vector<sempi::Request> both;
  const bool first_half = world.rank() < world.size() / 2;
  both.push_back(std::move(first_half ? a : b));
  both.push_back(std::move(first_half ? b : a));
  (void)sempi::Request::wait_all(both);
}

// A Request dropped before its collective finished abandons this rank's part. The engine must
// not then write into the memory the collective was given when the peer's message arrives
// (under AddressSanitizer, that was a heap-use-after-free): the rank withdraws from the
// collective, and drops what arrives for it. The withdrawal reaches the root before the go
// ahead, so the root's send fails, naming why.
void check_dropped_request(const sempi::Communicator& world) {
  g_where = "dropped request";
  const auto pair = world.split(world.rank() < 2 ? 0 : sempi::UNDEFINED, world.rank());
  if (pair.is_null() || pair.size() < 2) return;
  // Rank 1's part in each case: after the go-ahead (tag), its bcast fails, naming why.
  const auto bcast_fails_after = [&](int tag, int count, int root) {
    int go = 0;
    pair.recv(go, 0, tag);
    std::vector<int> data(static_cast<std::size_t>(count), 7);
    const auto [cls, what] = outcome([&] { pair.bcast(data.data(), count, root); });
    CHECK(cls == sempi::ErrorClass::other &&
          what.find("its request was dropped before the collective completed") !=
              std::string::npos);
  };
  constexpr int kCount = 1000;
  if (pair.rank() == 0) {
    {
      std::vector<int> buffer(kCount, -1);  // freed after the request: it is declared first
      auto abandoned = pair.ibcast(buffer.data(), kCount, 1);
    }
    pair.send(1, 1, 5);  // only now may the root send its data
  } else {
    bcast_fails_after(5, kCount, 1);
  }
  pair.barrier();  // the pair's collectives still line up

  // The same, the request dropped by assigning over it. Assignment replaces the Request's
  // members in order, its state before what abandons the collective on the last copy:
  // abandoning then wrote into the destroyed state (under AddressSanitizer, a leak of the
  // message it wrote there).
  g_where = "dropped request, assigned over";
  if (pair.rank() == 0) {
    std::vector<int> buffer(kCount, -1);
    auto abandoned = pair.ibcast(buffer.data(), kCount, 1);
    abandoned = sempi::Request();
    CHECK(abandoned.is_null());
    pair.send(1, 1, 7);
  } else {
    bcast_fails_after(7, kCount, 1);
  }
  pair.barrier();

  // The same with the dropping rank as the root of a block too large to go eagerly: its send
  // waits for a CTS the other rank will send only after the go-ahead, which comes after the
  // drop. Dropping the request cancels that send (it has read nothing) instead of waiting.
  g_where = "dropped request at the root";
  constexpr int kLarge = 256 * 1024;
  if (pair.rank() == 0) {
    {
      std::vector<int> block(kLarge, 3);
      auto abandoned = pair.ibcast(block.data(), kLarge, 0);
    }
    pair.send(1, 1, 6);
  } else {
    bcast_fails_after(6, kLarge, 0);
  }
  pair.barrier();
}

// A Request dropped while another thread's wait holds its collective still returns only once
// nothing of the collective touches the application's buffers. Every wait and test of every
// thread advances the collectives in flight (Engine::drive_in_flight), holding each while it
// does, so the dropping thread need not be the last to let the collective go: the wait must
// run on the dropping thread all the same, which may free or reuse its buffers next.
// Here rank 0's helper thread is held inside the user reduction of an allreduce with rank 2,
// its test holding rank 0's gather too, while rank 0 drops that gather with rank 1's 32 MiB
// block streaming in by rendezvous, and then overwrites that block's part of its buffer. (The
// allreduce is with a third rank so that its message does not queue behind the block's.)
void check_dropped_while_another_thread_holds_it(const sempi::Communicator& world) {
  g_where = "request dropped while another thread holds its collective";
  const int r = world.rank();
  const auto pair = world.split(r < 2 ? 0 : sempi::UNDEFINED, r);        // ranks 0 and 1
  const auto side = world.split(r == 0 || r == 2 ? 0 : sempi::UNDEFINED, r);  // 0 and 2
  if (world.size() < 3) return;
  if (r > 2) {
    world.barrier();  // the others' last step
    return;
  }
  constexpr int kInts = 8 * 1024 * 1024;  // 32 MiB: tens of milliseconds to arrive
  const int x = r + 1;
  int sum = 0;
  if (r == 1) {
    std::vector<int> mine(kInts, 1);
    auto gather = pair.igather<int>(mine.data(), nullptr, kInts, 0);
    pair.send(1, 0, 80);  // the block is on its way
    (void)outcome([&] { gather.wait(); });  // rank 0 dropped its part
    world.barrier();
    return;
  }
  if (r == 2) {
    int go = 0;
    side.recv(go, 0, 81);
    side.allreduce(&x, &sum, 1, sempi::Op::sum());
    world.barrier();
    return;
  }
  std::mutex mu;
  std::condition_variable changed;
  int stage = 0;  // 1: the helper is inside the held reduction; 2: the gather was dropped
  const auto reach = [&](int s) {
    const std::lock_guard lock(mu);
    stage = s;
    changed.notify_all();
  };
  const auto wait_for = [&](int s) {
    std::unique_lock lock(mu);
    return changed.wait_for(lock, std::chrono::seconds(60), [&] { return stage >= s; });
  };
  const auto reached = [&](int s) {
    const std::lock_guard lock(mu);
    return stage >= s;
  };
  const auto held = sempi::Op::elementwise<int>(
      [&](int in, int inout) {
        reach(1);
        CHECK(wait_for(2));
        return in + inout;
      },
      true, "held");
  std::vector<int> mine(kInts, 0);
  std::vector<int> all(2 * static_cast<std::size_t>(kInts), 0);
  auto gather = pair.igather<int>(mine.data(), all.data(), kInts, 0);
  auto reduction = side.iallreduce(&x, &sum, 1, held);
  int go = 0;
  pair.recv(go, 1, 80);  // rank 1's RTS came before: its block is matched, and under way
  std::thread helper([&] {
    int never = 0;
    auto idle = side.irecv(&never, 1, 1, 99);  // nothing is sent with this tag
    side.send(1, 1, 81);  // rank 2 joins the allreduce: its reduction can run here now
    while (!reached(2)) (void)idle.test();  // each test advances the collectives in flight
    CHECK(idle.cancel());
  });
  CHECK(wait_for(1));
  gather = sempi::Request();  // dropped while the helper's test holds it
  std::fill(all.begin() + kInts, all.end(), -1);  // reused at once
  reach(2);
  helper.join();
  reduction.wait();
  CHECK(sum == 4);
  world.barrier();  // the block, if it still arrived, has by now
  CHECK(std::all_of(all.begin() + kInts, all.end(), [](int v) { return v == -1; }));
}

// A rank whose collective cannot be set up after it took its sequence number (here the root
// of a scatter, root != 0, cannot allocate the rotated copy of its send buffer): the others
// fail at once, naming it, instead of waiting for the job's timeout; and the sequence numbers
// stay in step. RLIMIT_AS makes the allocation fail: not under sanitizers, which reserve
// terabytes of address space.
void check_out_of_memory(const sempi::Communicator& world) {
  const int p = world.size();
  const int r = world.rank();
  constexpr int kRoot = 1;
  constexpr std::size_t kBlock = std::size_t{64} << 20;
  if (p < 2) return;
  const auto recv = std::make_unique_for_overwrite<std::byte[]>(kBlock);
  std::unique_ptr<std::byte[]> send;
  if (r == kRoot)
    send = std::make_unique_for_overwrite<std::byte[]>(kBlock * static_cast<std::size_t>(p));
  g_where = "scatter whose root runs out of memory";
  if (r == kRoot) {
    rlimit saved{};
    CHECK(::getrlimit(RLIMIT_AS, &saved) == 0);
    std::size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;  // the address space in use, in pages
    CHECK(pages > 0);
    const rlimit tight{
        pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) + (std::size_t{32} << 20),
        saved.rlim_max};
    CHECK(::setrlimit(RLIMIT_AS, &tight) == 0);
    bool out_of_memory = false;
    try {
      world.scatter_bytes(send.get(), recv.get(), kBlock, kRoot);
    } catch (const std::bad_alloc&) {
      out_of_memory = true;
    }
    CHECK(::setrlimit(RLIMIT_AS, &saved) == 0);
    CHECK(out_of_memory);
  } else {
    const auto [cls, what] =
        outcome([&] { world.scatter_bytes(nullptr, recv.get(), kBlock, kRoot); });
    CHECK(cls == sempi::ErrorClass::other);
    CHECK(what.find("rank 1's part failed: its schedule could not be built") != std::string::npos);
  }
  CHECK(world.allreduce(r, sempi::Op::sum()) == p * (p - 1) / 2);
}

}  // namespace

int main(int argc, char** argv) {
  sempi::Environment env(argc, argv);
  const auto world = sempi::world();
  g_rank = world.rank();
  const std::string scenario = argc > 1 ? argv[1] : "all";
  const bool all = scenario == "all";
  unforce();

  // World, and sub-communicators of a split: two colors, ranks reversed by the key.
  const auto split = world.split(world.rank() % 2, -world.rank());
  if (all || scenario == "errors") check_errors(world);
  if (all || scenario == "abandoned") {
    check_abandoned(world);
    check_error_returns_after_transfers(world);
  }
  if (all || scenario == "data") {
    check_data(world, true);
    check_data(split, false);
  }
  if (all || scenario == "reduce") {
    check_reductions_all(world, true);
    check_reductions_all(split, false);
  }
  if (all || scenario == "determinism") {
    check_determinism(world);
    check_determinism(split);
  }
  if (scenario == "outofmemory") check_out_of_memory(world);  // own test: see there
  if (all || scenario == "nonblocking") {
    check_nonblocking(world);
    check_wait_all_order(world);
    check_dropped_request(world);
    check_dropped_while_another_thread_holds_it(world);
  }
  world.barrier();
  if (world.rank() == 0) std::printf("coll_check %s: all checks passed on %d ranks\n", scenario.c_str(), world.size());
  return 0;
}
