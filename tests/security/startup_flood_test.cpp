// The start-up listener under a connection flood: connections that send nothing, connections
// that stall after the first byte of a handshake, more of them than may be pending at once. The
// genuine higher ranks, queued behind them, must still connect promptly. Which connection goes
// when room is made (one that sent its ClientHello outlasts silent ones; a verified peer for a
// rank already connected still counts), and a dial the listener drops is dialed again.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <iterator>
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

// Connects without end to `listener`'s TCP port, keeping the last 64 connections open, until
// stopped; each sends nothing, or (every other one) a TLS record's first byte and stalls.
class EndlessTcpFlood {
 public:
  explicit EndlessTcpFlood(const transport::Listener& listener)
      : flood_(std::async(std::launch::async, [this, to = listener.endpoint()] {
          std::vector<transport::UniqueFd> open(64);  // a ring: the oldest goes for the next
          for (std::size_t i = 0; !stop_; ++i) {
            std::error_code ec;
            auto& fd = open[i % open.size()];
            fd = transport::tcp_connect(to, deadline_in(200ms), ec);
            const std::uint8_t handshake_record = 0x16;
            if (fd.valid() && i % 2 == 1) {
              (void)::send(fd.get(), &handshake_record, 1, MSG_NOSIGNAL);
            }
          }
        })) {}
  ~EndlessTcpFlood() {
    stop_ = true;
    flood_.wait();
  }

 private:
  std::atomic<bool> stop_{false};
  std::future<void> flood_;
};

// Shuts the listener down on the way out of a test, so that a failed check does not leave the
// acceptor waiting for its deadline.
struct ShutDownOnExit {
  transport::Listener& listener;
  ~ShutDownOnExit() { listener.shutdown(); }
};

// Waits (bounded) until rank 0 has refused `count` connections: the flood is in full swing.
bool flood_got_going(const AcceptingRank0& rank0, int count) {
  const auto give_up = transport::Clock::now() + 60s;
  while (rank0.refused < count && transport::Clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);  // polling, bounded: the acceptor needs the core
  }
  return rank0.refused >= count;
}

// Ranks on other hosts come over TCP, where the flood is. A regression check: one flooding
// thread on loopback does not land 32 connections during a genuine handshake, so the acceptor
// that dropped the oldest connection whatever it was passed this too. The tests below pin the
// order in which connections are dropped and the dial's retry.
TEST(StartupFlood, RanksOnOtherHostsConnectDuringAnEndlessTcpFlood) {
  const TestJob job(kRanks);
  transport::Listener listener(loopback_any_port());
  AcceptingRank0 rank0(job, listener, deadline_in(60s));
  const EndlessTcpFlood flood(listener);
  ASSERT_TRUE(flood_got_going(rank0, 40)) << "the flood never got going";
  const auto start = transport::Clock::now();
  const auto dialed = dial_higher_ranks([&](std::uint32_t rank, ChannelError& error) {
    return Channel::dial(job.endpoint(rank), listener.endpoint(), "", 0, long_deadline(), error);
  });
  EXPECT_EQ(rank0.result.get(), "");
  EXPECT_LT(transport::Clock::now() - start, 30s);
  for (std::uint32_t rank = 1; rank < kRanks; ++rank) {
    ASSERT_NE(rank0.accepted[rank], nullptr) << "rank " << rank;
    EXPECT_EQ(rank0.accepted[rank]->peer().rank, rank);
  }
}

// A connection that sent its ClientHello outlasts the connections that sent nothing: the
// acceptor drops those first, however old the ClientHello's connection is. (The old acceptor
// dropped the oldest connection, whatever it had sent.)
TEST(StartupFlood, ASilentFloodDropsNoConnectionThatSentItsClientHello) {
  const TestJob job(2);
  transport::Listener listener(loopback_any_port());
  AcceptingRank0 rank0(job, listener, deadline_in(60s));
  const ShutDownOnExit stop_accepting{listener};

  // Rank 1's client sends its ClientHello and stops there: it writes into memory, and only
  // the ClientHello goes to the socket. Once the server's first flight has arrived, the
  // acceptor has heard of the ClientHello (accept_progress.hpp).
  std::error_code ec;
  transport::UniqueFd hello_fd = transport::tcp_connect(listener.endpoint(), long_deadline(), ec);
  ASSERT_TRUE(hello_fd.valid()) << ec.message();
  const auto rank1 = job.endpoint(1);
  pki::SslPtr client{SSL_new(rank1.tls->get())};
  ASSERT_TRUE(client);
  BIO* written = BIO_new(BIO_s_mem());
  BIO* to_read = BIO_new(BIO_s_mem());
  ASSERT_TRUE(written != nullptr && to_read != nullptr);
  SSL_set_bio(client.get(), to_read, written);  // owned by the SSL from here
  SSL_set_connect_state(client.get());
  ASSERT_EQ(SSL_get_error(client.get(), SSL_do_handshake(client.get())), SSL_ERROR_WANT_READ);
  std::vector<std::uint8_t> client_hello(static_cast<std::size_t>(BIO_pending(written)));
  ASSERT_GT(client_hello.size(), 0u);
  ASSERT_EQ(BIO_read(written, client_hello.data(), static_cast<int>(client_hello.size())),
            static_cast<int>(client_hello.size()));
  ASSERT_EQ(::send(hello_fd.get(), client_hello.data(), client_hello.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(client_hello.size()));
  ASSERT_FALSE(transport::wait_fd(hello_fd.get(), transport::WaitFor::read, long_deadline()));

  std::vector<transport::UniqueFd> silent;
  for (std::size_t i = 0; i < detail::kMaxPendingHandshakes + 8; ++i) {
    silent.push_back(transport::tcp_connect(listener.endpoint(), long_deadline(), ec));
    ASSERT_TRUE(silent.back().valid()) << ec.message();
  }
  // Room was made nine times (32 pending, then each further connection).
  ASSERT_TRUE(flood_got_going(rank0, 9)) << "the acceptor never made room";

  // The server never shut the ClientHello's connection down: its flight, then nothing more.
  for (;;) {
    std::uint8_t bytes[4096];
    const ssize_t n = ::recv(hello_fd.get(), bytes, sizeof bytes, MSG_DONTWAIT);
    ASSERT_NE(n, 0) << "the acceptor dropped the connection that had sent its ClientHello";
    if (n < 0) {
      ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
      break;
    }
  }
  ChannelError error;
  auto channel = Channel::dial(rank1, listener.endpoint(), "", 0, long_deadline(), error);
  ASSERT_NE(channel, nullptr) << error.message();
  EXPECT_EQ(rank0.result.get(), "");
}

// A peer that completes TLS with a genuine certificate of this job and then stalls, as a
// compromised rank could, any number of times.
struct StalledTlsPeer {
  transport::UniqueFd fd;
  pki::SslPtr ssl;
};

StalledTlsPeer stalled_tls_peer(const transport::LocalEndpoint& as, const transport::Endpoint& to) {
  StalledTlsPeer p;
  std::error_code ec;
  p.fd = transport::tcp_connect(to, long_deadline(), ec);
  EXPECT_TRUE(p.fd.valid()) << ec.message();
  p.ssl.reset(SSL_new(as.tls->get()));
  if (!p.fd.valid() || !p.ssl || SSL_set_fd(p.ssl.get(), p.fd.get()) != 1) return p;
  SSL_set_connect_state(p.ssl.get());
  for (;;) {
    const int rc = SSL_do_handshake(p.ssl.get());
    if (rc == 1) return p;  // and no HELLO follows
    const int err = SSL_get_error(p.ssl.get(), rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      ADD_FAILURE() << "TLS handshake failed: " << err;
      return p;
    }
    const auto what =
        err == SSL_ERROR_WANT_READ ? transport::WaitFor::read : transport::WaitFor::write;
    if (transport::wait_fd(p.fd.get(), what, long_deadline())) {
      ADD_FAILURE() << "TLS handshake timed out";
      return p;
    }
  }
}

// Only the first verified connection for a rank the acceptor still waits for is spared. A
// certificate for a rank already connected buys nothing: such connections count and are
// dropped like unauthenticated ones, so a compromised rank cannot hold unbounded threads.
TEST(StartupFlood, VerifiedPeersForARankAlreadyConnectedStillCount) {
  const TestJob job(3);
  transport::Listener listener(loopback_any_port());
  AcceptingRank0 rank0(job, listener, deadline_in(60s));
  const ShutDownOnExit stop_accepting{listener};
  ChannelError error;
  auto rank1 = Channel::dial(job.endpoint(1), listener.endpoint(), "", 0, long_deadline(), error);
  ASSERT_NE(rank1, nullptr) << error.message();

  const auto as_rank1 = job.endpoint(1);
  std::vector<StalledTlsPeer> stalled;
  for (std::size_t i = 0; i < detail::kMaxPendingHandshakes + 8; ++i) {
    stalled.push_back(stalled_tls_peer(as_rank1, listener.endpoint()));
    ASSERT_FALSE(HasFailure());
  }
  ASSERT_TRUE(flood_got_going(rank0, 8)) << "verified connections for rank 1 were never dropped";

  auto rank2 = Channel::dial(job.endpoint(2), listener.endpoint(), "", 0, long_deadline(), error);
  ASSERT_NE(rank2, nullptr) << error.message();
  EXPECT_EQ(rank0.result.get(), "");
}

// A peer that proves this rank's own identity is refused as such, not as a duplicate of a
// rank already connected: only a copy of this rank's key can do it, which an operator must see.
TEST(StartupFlood, APeerWithThisRanksOwnIdentityIsNamedAsSuch) {
  const TestJob job(2);
  transport::Listener listener(loopback_any_port());
  AcceptingRank0 rank0(job, listener, deadline_in(60s));
  const ShutDownOnExit stop_accepting{listener};
  ChannelError error;
  // Its handshake completes (the acceptor refuses it only then, after the identity is proven).
  auto clone = Channel::dial(job.endpoint(0), listener.endpoint(), "", 0, long_deadline(), error);
  ASSERT_TRUE(flood_got_going(rank0, 1)) << "the clone was not refused";
  auto rank1 = Channel::dial(job.endpoint(1), listener.endpoint(), "", 0, long_deadline(), error);
  ASSERT_NE(rank1, nullptr) << error.message();
  EXPECT_EQ(rank0.result.get(), "");
  std::lock_guard lock(rank0.mu);
  ASSERT_EQ(rank0.refusals.size(), 1u);
  EXPECT_NE(rank0.refusals[0].find("this rank's own identity"), std::string::npos)
      << rank0.refusals[0];
}

// Descriptors ran out just as a connection was accepted: the acceptor could not make the
// duplicate it watches the connection by. It waits for one, as the listener's accept() does,
// instead of refusing a genuine rank that will not dial again.
//
// Rank 1 dials from a child process, which has a descriptor table of its own, and nothing in
// this process but the acceptor runs while no descriptor is left: UBSan's vptr check opens a
// pipe to read an object's memory, and reports a false type error when it cannot (it did so
// here, in the dialer's thread, on a loaded machine).
TEST(StartupFlood, AConnectionAcceptedWithoutADescriptorToSpareWaitsForOne) {
  const TestJob job(2);
  transport::Listener listener(loopback_any_port());
  int go[2];  // the child dials once a byte arrives, or leaves at end of file
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  // Forked while this process has one thread, so the child may take locks (malloc's, ...).
  const auto threads = std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                     std::filesystem::directory_iterator());
#if defined(__SANITIZE_THREAD__)
  const long own_threads = 2;  // and TSan's background thread, once any thread was made
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  const long own_threads = 2;
#else
  const long own_threads = 1;
#endif
#else
  const long own_threads = 1;
#endif
  ASSERT_LE(threads, own_threads) << "a thread of an earlier test is still running";
  const pid_t dialer = ::fork();
  ASSERT_GE(dialer, 0) << std::strerror(errno);
  if (dialer == 0) {
    ::close(go[1]);
    char byte = 0;
    if (::read(go[0], &byte, 1) != 1) ::_exit(2);
    ChannelError error;
    auto channel =
        Channel::connect(job.endpoint(1), listener.endpoint(), 0, long_deadline(), error);
    if (channel == nullptr) {
      std::fprintf(stderr, "rank 1 (child): %s\n", error.message().c_str());
      ::_exit(1);
    }
    ::_exit(channel->peer().rank == 0 ? 0 : 3);
  }
  ::close(go[0]);
  const transport::UniqueFd go_signal(go[1]);
  // Reaped however the test ends; killed first if it has not ended by then.
  struct ReapOnExit {
    pid_t pid;
    int status = -1;
    ~ReapOnExit() {
      if (status == -1) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reap{dialer};

  AcceptingRank0 rank0(job, listener, deadline_in(60s));
  const ShutDownOnExit stop_accepting{listener};
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  struct RestoreLimit {  // also when a check below fails: the next tests need descriptors
    rlimit saved;
    ~RestoreLimit() { ::setrlimit(RLIMIT_NOFILE, &saved); }
  } restore{saved};
  std::vector<transport::UniqueFd> spare;  // every descriptor but one: the one accept takes
  {
    const transport::UniqueFd null_device(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(null_device.valid());
    for (transport::UniqueFd fd(::dup(null_device.get())); fd.valid();
         fd = transport::UniqueFd(::dup(null_device.get()))) {
      spare.push_back(std::move(fd));
    }
  }
  // Counted without opening one (that would take the descriptor being watched for).
  const auto every_descriptor_taken = [&] {
    for (int fd = 0; fd < static_cast<int>(lowered.rlim_cur); ++fd) {
      if (::fcntl(fd, F_GETFD) < 0) return false;
    }
    return true;
  };
  const char byte = 1;
  const bool dialing = ::write(go_signal.get(), &byte, 1) == 1;
  const int write_error = errno;
  const auto give_up = transport::Clock::now() + 30s;
  while (dialing && !every_descriptor_taken() && transport::Clock::now() < give_up) {
    std::this_thread::yield();  // polled, bounded: until the acceptor holds the last one
  }
  const bool all_taken = every_descriptor_taken();
  spare.clear();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(dialing) << std::strerror(write_error);
  EXPECT_TRUE(all_taken) << "the acceptor never held the last descriptor";
  EXPECT_EQ(rank0.result.get(), "");
  EXPECT_NE(rank0.accepted[1], nullptr);
  EXPECT_EQ(rank0.refused.load(), 0);
  const auto reap_by = transport::Clock::now() + 60s;
  int status = 0;
  pid_t reaped = 0;
  while ((reaped = ::waitpid(dialer, &status, WNOHANG)) == 0 && transport::Clock::now() < reap_by) {
    std::this_thread::sleep_for(10ms);  // polled, bounded: the child's exit
  }
  ASSERT_EQ(reaped, dialer) << "rank 1's child never ended";
  reap.status = status;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "rank 1's child ended with status " << status;
}

// A dial whose connection the listener drops before the channel is established dials again
// (the old dial failed the rank's start-up on the first drop).
TEST(StartupFlood, ADialTheListenerDropsIsDialedAgain) {
  const TestJob job(2);
  transport::Listener listener(loopback_any_port());
  auto acceptor = std::async(std::launch::async, [&]() -> std::unique_ptr<Channel> {
    std::error_code ec;
    {
      // The first connection goes as a flooded acceptor drops one: shut down unanswered.
      transport::UniqueFd dropped = listener.accept(long_deadline(), ec);
      if (!dropped.valid()) return nullptr;
      if (transport::wait_fd(dropped.get(), transport::WaitFor::read, long_deadline())) {
        return nullptr;
      }
      ::shutdown(dropped.get(), SHUT_RDWR);
    }
    transport::UniqueFd socket = listener.accept(long_deadline(), ec);
    if (!socket.valid()) return nullptr;
    ChannelError error;
    auto channel = Channel::accept(
        job.endpoint(0), std::move(socket), [](std::uint32_t) { return true; }, long_deadline(),
        error);
    EXPECT_NE(channel, nullptr) << error.message();
    return channel;
  });
  const ShutDownOnExit stop_accepting{listener};
  ChannelError error;
  auto channel = Channel::dial(job.endpoint(1), listener.endpoint(), "", 0, long_deadline(), error);
  ASSERT_NE(channel, nullptr) << error.message();
  EXPECT_EQ(channel->peer().rank, 0u);
  const auto accepted = acceptor.get();
  ASSERT_NE(accepted, nullptr);
  EXPECT_EQ(accepted->peer().rank, 1u);
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
  const EndlessTcpFlood flood(listener);
  ASSERT_TRUE(flood_got_going(rank0, 40)) << "the flood never got going";
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
