// The engine's pool of buffers for early eager payloads (core/payload_pool.hpp).

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "core/payload_pool.hpp"
#include "transport/frame.hpp"

namespace sempi::detail {
namespace {

TEST(PayloadPool, CapacityIsTheNextPowerOfTwoWithinThePooledRange) {
  EXPECT_EQ(PayloadPool::capacity_for(0), 0u);
  EXPECT_EQ(PayloadPool::capacity_for(100), 100u);  // below kMinPooled: the heap, exact
  EXPECT_EQ(PayloadPool::capacity_for(4096), 4096u);
  EXPECT_EQ(PayloadPool::capacity_for(4097), 8192u);
  EXPECT_EQ(PayloadPool::capacity_for(65536), 65536u);
  EXPECT_EQ(PayloadPool::capacity_for(40000), 65536u);
  EXPECT_EQ(PayloadPool::capacity_for(PayloadPool::kMaxPooled), PayloadPool::kMaxPooled);
  EXPECT_EQ(PayloadPool::capacity_for(PayloadPool::kMaxPooled + 1), PayloadPool::kMaxPooled + 1);
}

// A sender's eager credit counts each message as the protocol fixes it; what the receiver's
// budget holds for it (its buffer and a 256-byte entry) must never be more, or credit could
// not keep the receiver within its budget.
TEST(PayloadPool, TheProtocolsEagerCreditCoversWhatAMessageHolds) {
  for (std::size_t bytes : {0ul, 1ul, 4095ul, 4096ul, 4097ul, 65536ul, 100000ul, 1ul << 20,
                            (1ul << 20) + 1, 64ul << 20}) {
    EXPECT_LE(PayloadPool::capacity_for(bytes) + 256, transport::eager_credit_cost(bytes)) << bytes;
  }
}

TEST(PayloadPool, AReturnedBufferIsReusedForAPayloadOfItsClass) {
  auto pool = PayloadPool::create();
  std::uint8_t* first = nullptr;
  {
    Payload p = pool->take(40000);
    first = p.get();
    std::memset(p.get(), 0xab, 65536);  // the whole capacity is usable
  }
  EXPECT_EQ(pool->kept_bytes(), 65536u);
  Payload again = pool->take(65536);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(pool->kept_bytes(), 0u);
  Payload other_class = pool->take(5000);  // a different class: a new buffer
  EXPECT_NE(other_class.get(), first);
}

TEST(PayloadPool, SmallAndLargePayloadsAreNotKept) {
  auto pool = PayloadPool::create();
  { Payload small = pool->take(100); std::memset(small.get(), 1, 100); }
  { Payload empty = pool->take(0); ASSERT_NE(empty.get(), nullptr); }
  { Payload large = pool->take(PayloadPool::kMaxPooled + 1); large[PayloadPool::kMaxPooled] = 1; }
  EXPECT_EQ(pool->kept_bytes(), 0u);
}

TEST(PayloadPool, KeepsABurstForTheNextOneAndTrimsItAfterAPeriodThatDidNotNeedIt) {
  constexpr std::size_t kBuffer = 64 * 1024;
  constexpr int kBurst = 40;  // 2.5 MiB: more than kKeptFloor
  static_assert(kBurst * kBuffer > PayloadPool::kKeptFloor);
  auto pool = PayloadPool::create();
  std::vector<Payload> held;
  std::set<std::uint8_t*> first;
  for (int i = 0; i < kBurst; ++i) {
    held.push_back(pool->take(kBuffer));
    first.insert(held.back().get());
  }
  held.clear();
  EXPECT_EQ(pool->kept_bytes(), kBurst * kBuffer);  // the whole burst, not just kKeptFloor

  // The next burst of the same size takes no new memory.
  for (int i = 0; i < kBurst; ++i) {
    held.push_back(pool->take(kBuffer));
    EXPECT_TRUE(first.count(held.back().get()) == 1) << "buffer " << i << " is new";
  }
  EXPECT_EQ(pool->kept_bytes(), 0u);
  held.clear();

  pool->trim();  // the period that ends needed the burst: kept
  EXPECT_EQ(pool->kept_bytes(), kBurst * kBuffer);
  pool->trim();  // a whole period needed nothing: back to the floor
  EXPECT_EQ(pool->kept_bytes(), PayloadPool::kKeptFloor);
}

TEST(PayloadPool, BuffersInUseAndFreeTogetherStayWithinTheRecentPeak) {
  constexpr std::size_t kBuffer = 64 * 1024;
  constexpr int kHeld = 32;  // 2 MiB
  auto pool = PayloadPool::create();
  std::vector<Payload> held;
  for (int i = 0; i < kHeld; ++i) held.push_back(pool->take(kBuffer));
  held.resize(kHeld / 2);  // 1 MiB returned and kept, 1 MiB still in use
  EXPECT_EQ(pool->kept_bytes(), kHeld / 2 * kBuffer);
  pool->trim();
  pool->trim();  // the recent peak is now the 1 MiB in use: the free 1 MiB is beyond it
  EXPECT_EQ(pool->kept_bytes(), 0u);
  held.clear();  // what was in use may stay, as free buffers
  EXPECT_EQ(pool->kept_bytes(), kHeld / 2 * kBuffer);
}

TEST(PayloadPool, FreeBuffersOfAnotherSizeStayWithinTheRecentPeakToo) {
  constexpr std::size_t kLarge = 64 * 1024;
  constexpr std::size_t kSmall = 8 * 1024;
  constexpr int kLargeBurst = 48;  // 3 MiB
  auto pool = PayloadPool::create();
  std::vector<Payload> held;
  for (int i = 0; i < kLargeBurst; ++i) held.push_back(pool->take(kLarge));
  held.clear();
  ASSERT_EQ(pool->kept_bytes(), kLargeBurst * kLarge);
  // A burst of another size class, as large: its buffers are new (there is no free one of its
  // class), and what it returns is kept only within the peak, beside the large ones.
  for (std::size_t i = 0; i < kLargeBurst * kLarge / kSmall; ++i) held.push_back(pool->take(kSmall));
  held.clear();
  EXPECT_EQ(pool->kept_bytes(), kLargeBurst * kLarge);  // free buffers never exceed the peak
  pool->trim();
  pool->trim();
  EXPECT_EQ(pool->kept_bytes(), PayloadPool::kKeptFloor);
}

TEST(PayloadPool, ABufferMayOutliveThePoolHandle) {
  auto pool = PayloadPool::create();
  Payload p = pool->take(8192);
  pool.reset();  // the engine is gone; the buffer keeps the pool alive until it is returned
  std::memset(p.get(), 7, 8192);
  p.reset();  // returned to the pool, which is then destroyed with it (ASan checks the frees)
}

TEST(PayloadPool, ThreadsTakeAndReturnConcurrently) {
  auto pool = PayloadPool::create();
  auto work = [&](std::uint8_t fill) {
    for (int i = 0; i < 2000; ++i) {
      Payload p = pool->take(4096 + static_cast<std::size_t>(i % 3) * 20000);
      std::memset(p.get(), fill, 4096);
      EXPECT_EQ(p[4095], fill);  // nobody else holds this buffer
    }
  };
  std::thread a(work, std::uint8_t{1});
  std::thread b(work, std::uint8_t{2});
  a.join();
  b.join();
  // Two threads each held one buffer at a time: the peak is two buffers, below the floor.
  EXPECT_LE(pool->kept_bytes(), PayloadPool::kKeptFloor);
}

}  // namespace
}  // namespace sempi::detail
