// The audit log's lock-free capture queue: bounded, first in first out, each producer's order
// kept, elements reused in place.

#include "audit/capture_ring.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

using sempi::audit::CaptureRing;

TEST(CaptureRing, RoundsCapacityUpToAPowerOfTwo) {
  EXPECT_EQ(CaptureRing<int>(0).capacity(), 2u);
  EXPECT_EQ(CaptureRing<int>(5).capacity(), 8u);
  EXPECT_EQ(CaptureRing<int>(64).capacity(), 64u);
}

TEST(CaptureRing, IsFifoAndRefusesWhenFull) {
  CaptureRing<int> ring(4);
  EXPECT_FALSE(ring.maybe_nonempty());
  EXPECT_EQ(ring.front(), nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.try_push([i](int& v) noexcept { v = i; }));
  bool called = false;
  EXPECT_FALSE(ring.try_push([&](int&) noexcept { called = true; }));
  EXPECT_FALSE(called) << "a full ring must not hand out a slot";
  EXPECT_TRUE(ring.maybe_nonempty());

  const int* oldest = ring.front();
  ASSERT_NE(oldest, nullptr);
  EXPECT_EQ(*oldest, 0);
  ring.pop();
  EXPECT_TRUE(ring.try_push([](int& v) noexcept { v = 4; }));  // the freed slot, one lap on
  for (int expected = 1; expected <= 4; ++expected) {
    const int* next = ring.front();
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(*next, expected);
    ring.pop();
  }
  EXPECT_EQ(ring.front(), nullptr);
  EXPECT_FALSE(ring.maybe_nonempty());
}

TEST(CaptureRing, ReusesElementsInPlace) {
  // The audit log relies on this: a slot's string keeps its capacity, so a capture does not
  // allocate once the ring has gone round.
  CaptureRing<std::string> ring(2);
  const std::string long_text(100, 'x');
  ASSERT_TRUE(ring.try_push([&](std::string& s) noexcept { s.assign(long_text); }));
  const std::string* first = ring.front();
  ASSERT_NE(first, nullptr);
  const std::size_t capacity = first->capacity();
  ring.pop();
  ASSERT_TRUE(ring.try_push([](std::string& s) noexcept { s.assign("a"); }));
  ring.pop();
  // Back at the first slot:
  ASSERT_TRUE(ring.try_push([](std::string& s) noexcept { s.assign("b"); }));
  const std::string* again = ring.front();
  ASSERT_EQ(again, first);
  EXPECT_EQ(*again, "b");
  EXPECT_GE(again->capacity(), capacity);
}

// Several producers against one consumer, through a ring much smaller than the traffic:
// nothing lost or duplicated, each producer's elements in its own order. Also run under TSan.
TEST(CaptureRing, ManyProducersOneConsumerLoseNothing) {
  struct Item {
    int producer = -1;
    int seq = -1;
  };
  constexpr int kProducers = 3;
  constexpr int kPerProducer = 50000;
  CaptureRing<Item> ring(16);
  std::atomic<bool> give_up{false};  // the consumer stopped early: producers must not hang
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&ring, &give_up, p] {
      for (int i = 0; i < kPerProducer && !give_up.load(); ++i) {
        while (!ring.try_push([&](Item& item) noexcept { item = {p, i}; }) && !give_up.load()) {
          std::this_thread::yield();
        }
      }
    });
  }
  std::vector<int> next(kProducers, 0);
  int consumed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  while (consumed < kProducers * kPerProducer && std::chrono::steady_clock::now() < deadline) {
    Item* item = ring.front();
    if (item == nullptr) {
      std::this_thread::yield();
      continue;
    }
    if (item->producer < 0 || item->producer >= kProducers) {
      ADD_FAILURE() << "an element nobody pushed: producer " << item->producer;
      break;
    }
    EXPECT_EQ(item->seq, next[static_cast<std::size_t>(item->producer)]++);
    ring.pop();
    ++consumed;
  }
  give_up = true;
  for (auto& t : producers) t.join();
  EXPECT_EQ(consumed, kProducers * kPerProducer);
  EXPECT_EQ(ring.front(), nullptr);
}

}  // namespace
