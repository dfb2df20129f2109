// Pure pieces of the collectives: reduction kernels, algorithm selection, threshold parsing and
// the index math of the algorithms (no communication).

#include <gtest/gtest.h>

#include <complex>
#include <cstdlib>
#include <limits>
#include <set>

#include "coll/algorithms.hpp"
#include "coll/tuning.hpp"
#include "sempi/error.hpp"
#include "sempi/op.hpp"

namespace sempi::detail::coll {
namespace {

TEST(ReductionKernels, MinlocAndMaxlocBreakTiesTowardTheLowerIndex) {
  using P = ValueIndex<double>;
  const P in[] = {{1.0, 7}, {2.0, 3}, {5.0, 9}, {5.0, 2}};
  P inout[] = {{1.0, 4}, {3.0, 1}, {5.0, 1}, {4.0, 8}};
  Op::minloc().apply(in, inout, 4, BasicType::double_int);
  EXPECT_EQ(inout[0], (P{1.0, 4}));  // tie: lower index
  EXPECT_EQ(inout[1], (P{2.0, 3}));
  EXPECT_EQ(inout[2], (P{5.0, 1}));
  EXPECT_EQ(inout[3], (P{4.0, 8}));
  using Q = ValueIndex<int>;
  const Q qin[] = {{5, 9}, {1, 0}};
  Q qio[] = {{5, 2}, {3, 5}};
  Op::maxloc().apply(qin, qio, 2, BasicType::two_int);
  EXPECT_EQ(qio[0], (Q{5, 2}));
  EXPECT_EQ(qio[1], (Q{3, 5}));
  static_assert(sizeof(ValueIndex<short>) == 8 && sizeof(ValueIndex<double>) == 16);
}

TEST(ReductionKernels, IntegerArithmeticWrapsAndLogicalOpsNormalise) {
  const int in[] = {std::numeric_limits<int>::max(), 6, 0, 5};
  int io[] = {1, 7, 3, 0};
  Op::sum().apply(in, io, 4, BasicType::int_);
  EXPECT_EQ(io[0], std::numeric_limits<int>::min());
  EXPECT_EQ(io[1], 13);
  int land[] = {1, 7, 3, 0};
  Op::land().apply(in, land, 4, BasicType::int_);
  EXPECT_EQ(land[0], 1);
  EXPECT_EQ(land[2], 0);
  EXPECT_EQ(land[3], 0);
  const unsigned short a[] = {65535};
  unsigned short b[] = {65535};
  Op::prod().apply(a, b, 1, BasicType::unsigned_short);  // no int overflow on promotion
  EXPECT_EQ(b[0], 1);
  const std::byte x[] = {std::byte{0xF0}};
  std::byte y[] = {std::byte{0x3C}};
  Op::bxor().apply(x, y, 1, BasicType::byte);
  EXPECT_EQ(y[0], std::byte{0xCC});
  const std::complex<double> c[] = {{1, 2}};
  std::complex<double> d[] = {{3, -1}};
  Op::prod().apply(c, d, 1, BasicType::complex_double);
  EXPECT_EQ(d[0], (std::complex<double>{5, 5}));
}

TEST(ReductionKernels, OperandOrderIsLowerFirstForUserOps) {
  // "first wins": inout = in op inout must keep `in` (the lower-ranked operand).
  const auto first = Op::elementwise<int>([](int lower, int) { return lower; }, false);
  const int in[] = {1, 2};
  int io[] = {8, 9};
  first.apply(in, io, 2, BasicType::int_);
  EXPECT_EQ(io[0], 1);
  EXPECT_EQ(io[1], 2);
  EXPECT_FALSE(first.commutative());
  EXPECT_TRUE(first.defined_for(BasicType::int_));
  EXPECT_FALSE(first.defined_for(BasicType::double_));  // size differs
  EXPECT_TRUE(Op::sum().commutative());
}

TEST(ReductionKernels, TypeTableMatchesMpi) {
  EXPECT_TRUE(Op::sum().defined_for(BasicType::complex_float));
  EXPECT_FALSE(Op::max().defined_for(BasicType::complex_float));
  EXPECT_FALSE(Op::sum().defined_for(BasicType::bool_));
  EXPECT_TRUE(Op::lxor().defined_for(BasicType::bool_));
  EXPECT_TRUE(Op::band().defined_for(BasicType::byte));
  EXPECT_FALSE(Op::sum().defined_for(BasicType::byte));
  EXPECT_FALSE(Op::band().defined_for(BasicType::double_));
  EXPECT_FALSE(Op::sum().defined_for(BasicType::char_));
  EXPECT_TRUE(Op::minloc().defined_for(BasicType::short_int));
  EXPECT_FALSE(Op::minloc().defined_for(BasicType::int_));
  EXPECT_FALSE(Op::sum().defined_for(ElementType::opaque_of(8)));
  EXPECT_THROW(Op::max().check(BasicType::complex_double, "allreduce"), Error);
  for (int t = 0; t < kBasicTypeCount; ++t) {
    EXPECT_GT(basic_type_size(static_cast<BasicType>(t)), 0u);
    EXPECT_EQ(std::string(basic_type_name(static_cast<BasicType>(t))).rfind("MPI_", 0), 0u);
  }
  EXPECT_EQ(basic_type_size(BasicType::long_double_int), sizeof(ValueIndex<long double>));
}

TEST(Tuning, ParsesSizesAndRejectsGarbage) {
  EXPECT_EQ(parse_size("X", "0"), 0u);
  EXPECT_EQ(parse_size("X", "65536"), 65536u);
  EXPECT_EQ(parse_size("X", "64K"), 65536u);
  EXPECT_EQ(parse_size("X", "4m"), 4u << 20);
  EXPECT_EQ(parse_size("X", "1G"), 1u << 30);
  for (const char* bad : {"", "K", "12KB", "-1", "1.5M", "99999999999999999999999"}) {
    EXPECT_THROW(parse_size("X", bad), Error) << bad;
  }
}

TEST(Tuning, SelectionFollowsSizesAndRanks) {
  const Thresholds t;
  EXPECT_EQ(choose_allreduce(t, 8, 1, 8, true), AllreduceAlgorithm::recursive_doubling);
  EXPECT_EQ(choose_allreduce(t, 64 << 10, 8192, 8, true), AllreduceAlgorithm::rabenseifner);
  EXPECT_EQ(choose_allreduce(t, 8 << 20, 1 << 20, 8, true), AllreduceAlgorithm::ring);
  // Ring needs commutativity; Rabenseifner needs a count of at least pof2.
  EXPECT_EQ(choose_allreduce(t, 8 << 20, 1 << 20, 8, false), AllreduceAlgorithm::rabenseifner);
  EXPECT_EQ(choose_allreduce(t, 1 << 20, 3, 9, true), AllreduceAlgorithm::recursive_doubling);
  EXPECT_EQ(choose_bcast(t, 1 << 20, 8), BcastAlgorithm::scatter_allgather);
  EXPECT_EQ(choose_bcast(t, 1 << 20, 3), BcastAlgorithm::binomial);
  EXPECT_EQ(choose_bcast(t, 100, 8), BcastAlgorithm::binomial);
  EXPECT_EQ(choose_allgather(t, 100, 8), AllgatherAlgorithm::bruck);
  EXPECT_EQ(choose_allgather(t, 1 << 20, 8), AllgatherAlgorithm::ring);
  EXPECT_EQ(choose_reduce(t, 4 << 20, 1 << 19, 8, true), ReduceAlgorithm::rabenseifner);
  EXPECT_EQ(choose_reduce(t, 64 << 10, 1 << 13, 8, true), ReduceAlgorithm::binomial);
  ::setenv("SEMPI_COLL_ALLREDUCE_RING_MIN", "0", 1);
  ::setenv("SEMPI_COLL_ALLGATHER_RING_MIN", "2K", 1);
  const auto e = Thresholds::from_environment();
  ::unsetenv("SEMPI_COLL_ALLREDUCE_RING_MIN");
  ::unsetenv("SEMPI_COLL_ALLGATHER_RING_MIN");
  EXPECT_EQ(e.allreduce_ring_min, 0u);
  EXPECT_EQ(e.allgather_ring_min, 2048u);
  EXPECT_EQ(choose_allreduce(e, 8, 4, 4, true), AllreduceAlgorithm::ring);
  // Ranks that outnumber their host's CPUs keep bcast to the binomial tree, unless told not to.
  EXPECT_EQ(choose_bcast(Thresholds::from_environment(true), 64 << 20, 8),
            BcastAlgorithm::binomial);
  EXPECT_EQ(choose_reduce(Thresholds::from_environment(true), 64 << 20, 16 << 20, 8, true),
            ReduceAlgorithm::binomial);
  ::setenv("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN", "1M", 1);
  const auto told = Thresholds::from_environment(true);
  ::unsetenv("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN");
  EXPECT_EQ(choose_bcast(told, 1 << 20, 8), BcastAlgorithm::scatter_allgather);
}

TEST(ScheduleMath, TagsStayInRangeAndSeparateSequencesAndSteps) {
  std::set<int> seen;
  for (std::uint32_t seq : {0u, 1u, 65535u, 65536u + 2, 0xFFFFFFFFu}) {
    for (int step : {0, 1, 63, kFoldOutStep}) {
      const int tag = collective_tag(seq, step);
      EXPECT_GE(tag, kCollectiveTagBit);
      EXPECT_LE(tag, std::numeric_limits<int>::max());
      if (seq <= 65535u) {
        EXPECT_TRUE(seen.insert(tag).second);
      }
    }
  }
}

TEST(ScheduleMath, SplitEvenlyCoversTheVector) {
  for (int count : {0, 1, 7, 8, 1000003}) {
    for (int parts : {1, 2, 3, 8, 9}) {
      const auto b = split_evenly(count, parts);
      ASSERT_EQ(b.displs.back(), count);
      for (int i = 0; i < parts; ++i) {
        const auto u = static_cast<std::size_t>(i);
        EXPECT_EQ(b.displs[u] + b.counts[u], b.displs[u + 1]);
        EXPECT_LE(b.counts[0] - b.counts[u], 1);
      }
    }
  }
}

TEST(ScheduleMath, HalvingGivesEveryRankOneChunkByBitReversal) {
  for (int pof2 : {2, 4, 8, 16, 64}) {
    std::set<int> chunks;
    int bits = 0;
    while ((1 << bits) < pof2) ++bits;
    for (int nr = 0; nr < pof2; ++nr) {
      const int c = halving_final_chunk(nr, pof2);
      int reversed = 0;
      for (int b = 0; b < bits; ++b) reversed |= ((nr >> b) & 1) << (bits - 1 - b);
      EXPECT_EQ(c, reversed);
      chunks.insert(c);
    }
    EXPECT_EQ(static_cast<int>(chunks.size()), pof2);
  }
  EXPECT_EQ(floor_pow2(1), 1);
  EXPECT_EQ(floor_pow2(9), 8);
  EXPECT_EQ(floor_pow2(16), 16);
}

}  // namespace
}  // namespace sempi::detail::coll
