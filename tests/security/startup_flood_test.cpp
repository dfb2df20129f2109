// The start-up listener under a connection flood: connections that send nothing, connections
// that stall after the first byte of a handshake, more of them than may be pending at once. The
// genuine higher ranks, queued behind them, must still connect promptly.

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <future>
#include <thread>

#include "core/higher_rank_acceptor.hpp"
#include "support/accepting_rank0.hpp"
#include "support/temp_dir.hpp"
#include "support/test_job.hpp"

namespace sempi::test {
namespace {

using namespace std::chrono_literals;
using transport::Channel;
using transport::ChannelError;

constexpr std::uint32_t kRanks = 4;

// Ranks 1.. dial at once, each with `dial(rank, error)`; their channels (null where it failed).
template <class Dial>
std::vector<std::unique_ptr<Channel>> dial_higher_ranks(Dial dial) {
  std::vector<std::future<std::unique_ptr<Channel>>> dialers;
  for (std::uint32_t rank = 1; rank < kRanks; ++rank) {
    dialers.push_back(std::async(std::launch::async, [&dial, rank] {
      ChannelError error;
      auto channel = dial(rank, error);
      EXPECT_NE(channel, nullptr) << "rank " << rank << ": " << error.message();
      return channel;
    }));
  }
  std::vector<std::unique_ptr<Channel>> dialed;
  for (auto& d : dialers) dialed.push_back(d.get());
  return dialed;
}

TEST(StartupFlood, GenuineRanksConnectPastStalledConnections) {
  const TestJob job(kRanks);
  transport::Listener listener(loopback_any_port());

  // The flood arrives first: the listen backlog holds it ahead of every genuine rank.
  std::vector<transport::UniqueFd> flood;
  for (std::size_t i = 0; i < detail::kMaxPendingHandshakes + 8; ++i) {
    std::error_code ec;
    flood.push_back(transport::tcp_connect(listener.endpoint(), long_deadline(), ec));
    ASSERT_TRUE(flood.back().valid()) << ec.message();
    if (i % 2 == 1) {
      const std::uint8_t handshake_record = 0x16;  // the start of a TLS record, then nothing
      ASSERT_EQ(::send(flood.back().get(), &handshake_record, 1, MSG_NOSIGNAL), 1);
    }
  }

  const auto start = transport::Clock::now();
  // The deadline is shorter than one stalled handshake may last (30 s): handled one at a
  // time, the first stalled connection alone would use it up.
  AcceptingRank0 rank0(job, listener, deadline_in(20s));
  const auto dialed = dial_higher_ranks([&](std::uint32_t rank, ChannelError& error) {
    return Channel::connect(job.endpoint(rank), listener.endpoint(), 0, long_deadline(), error);
  });
  EXPECT_EQ(rank0.result.get(), "");
  EXPECT_LT(transport::Clock::now() - start, 10s);
  for (std::uint32_t rank = 1; rank < kRanks; ++rank) {
    ASSERT_NE(rank0.accepted[rank], nullptr) << "rank " << rank;
    EXPECT_EQ(rank0.accepted[rank]->peer().rank, rank);
  }
  // Every flooding connection was dropped, none was taken for a rank.
  EXPECT_EQ(rank0.refused.load(), static_cast<int>(flood.size()));
}

// Ranks on one host come through the Unix socket, which only this user can reach: a flood
// that never lets up on the TCP port must not starve them (accept() serves the Unix socket
// first; served in turn, they would wait behind a queue the flood keeps full).
TEST(StartupFlood, RanksOnThisHostConnectDuringAnEndlessTcpFlood) {
  const TestJob job(kRanks);
  const TempDir dir;
  transport::Listener listener(loopback_any_port(), dir.path());
  ASSERT_FALSE(listener.local_path().empty()) << listener.local_failure();
  AcceptingRank0 rank0(job, listener, deadline_in(60s));

  std::atomic<bool> stop{false};
  auto flood = std::async(std::launch::async, [&] {
    std::vector<transport::UniqueFd> open(64);  // a ring: the oldest is closed for the next
    for (std::size_t i = 0; !stop; ++i) {
      std::error_code ec;
      open[i % open.size()] =
          transport::tcp_connect(listener.endpoint(), deadline_in(200ms), ec);
    }
  });
  struct StopFlood {  // before `flood` is waited for, on every way out of this test
    std::atomic<bool>& stop;
    ~StopFlood() { stop = true; }
  } stop_flood{stop};
  // The flood is in full swing: the acceptor has dropped dozens of its connections.
  const auto flood_deadline = transport::Clock::now() + 60s;
  while (rank0.refused < 40 && transport::Clock::now() < flood_deadline) {
    std::this_thread::yield();
  }
  ASSERT_GE(rank0.refused.load(), 40) << "the flood never got going";
  const auto start = transport::Clock::now();
  const auto dialed = dial_higher_ranks([&](std::uint32_t rank, ChannelError& error) {
    return Channel::connect_local(job.endpoint(rank), listener.local_path(), 0, long_deadline(),
                                  error);
  });
  EXPECT_EQ(rank0.result.get(), "");
  EXPECT_LT(transport::Clock::now() - start, 20s);
  for (std::uint32_t rank = 1; rank < kRanks; ++rank) {
    ASSERT_NE(rank0.accepted[rank], nullptr) << "rank " << rank;
    EXPECT_STREQ(rank0.accepted[rank]->transport(), "unix");
  }
}

}  // namespace
}  // namespace sempi::test
