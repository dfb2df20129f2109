// Two ranks of one job over real TLS 1.3 on loopback: handshake, identity, frames of every size,
// a 256 MiB stream, and coalesced small frames.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <thread>

#include "sempi/error.hpp"
#include "support/rank_check.hpp"
#include "support/temp_dir.hpp"
#include "support/test_job.hpp"

namespace sempi::test {
namespace {

using transport::Channel;
using transport::ChannelError;
using transport::FrameHeader;
using transport::FrameType;

using sempi::test::fnv1a;
using sempi::test::kFnvBasis;
using sempi::test::pattern;

// A connected pair: rank 0 accepts, rank 1 dials.
struct Pair {
  std::unique_ptr<Channel> server;
  std::unique_ptr<Channel> client;
};

// `via`: "tcp"; "unix", the client dials the listener's Unix socket (peers on one host); or
// "shm", the same with the records moved to shared rings after HELLO.
Pair connect_pair(const TestJob& job, transport::ChannelLimits limits = {},
                  const std::string& via = "tcp") {
  const bool over_unix = via != "tcp";
  const auto server_local = job.endpoint(job.issue(0), limits);
  auto client_local = job.endpoint(job.issue(1), limits);
  client_local.shared_memory = via == "shm";
  const TempDir dir;
  transport::Listener listener(loopback_any_port(),
                               over_unix ? dir.path() : std::filesystem::path());
  if (over_unix && listener.local_path().empty()) {
    ADD_FAILURE() << listener.local_failure();
    return {};
  }
  auto accepted = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto fd = listener.accept(long_deadline(), ec);
    ChannelError error;
    auto ch = Channel::accept(server_local, std::move(fd), [](std::uint32_t) { return true; },
                              long_deadline(), error);
    EXPECT_FALSE(error.code) << error.message();
    return ch;
  });
  ChannelError error;
  auto client = over_unix ? Channel::connect_local(client_local, listener.local_path(), 0,
                                                   long_deadline(), error)
                          : Channel::connect(client_local, listener.endpoint(), 0,
                                             long_deadline(), error);
  EXPECT_FALSE(error.code) << error.message();
  return {accepted.get(), std::move(client)};
}

// Writes everything queued on `channel`, waiting for the socket as needed.
void flush_until_written(Channel& channel) {
  const auto deadline = long_deadline();
  while (channel.has_pending_writes()) {
    ASSERT_FALSE(channel.flush());
    if (channel.has_pending_writes()) {
      ASSERT_FALSE(transport::wait_fd(channel.native_handle(), transport::WaitFor::write,
                                      deadline));
    }
  }
}

TEST(Channel, HandshakeEstablishesPinnedIdentitiesOverTls13) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  EXPECT_EQ(pair.server->peer().rank, 1u);
  EXPECT_EQ(pair.client->peer().rank, 0u);
  EXPECT_EQ(pair.server->peer().job, job.ca().job());
  const std::string cipher = pair.client->cipher();
  EXPECT_TRUE(cipher == "TLS_AES_128_GCM_SHA256" || cipher == "TLS_AES_256_GCM_SHA384" ||
              cipher == "TLS_CHACHA20_POLY1305_SHA256")
      << cipher;
}

// Both ends probe an idle peer, so that a host that vanishes without a reset is noticed (a
// real lost host, also with data in flight: tests/integration/lost_host_test.cpp).
TEST(Channel, BothEndsKeepTheConnectionAlive) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  for (const Channel* channel : {pair.server.get(), pair.client.get()}) {
    const auto option = [fd = channel->native_handle()](int level, int name) {
      int value = -1;
      socklen_t length = sizeof value;
      EXPECT_EQ(::getsockopt(fd, level, name, &value, &length), 0);
      return value;
    };
    EXPECT_EQ(option(SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPIDLE), transport::kKeepaliveIdleSeconds);
    EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPINTVL), transport::kKeepaliveIntervalSeconds);
    EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPCNT), transport::kKeepaliveProbes);
    EXPECT_FALSE(transport::unacknowledged_too_long(channel->native_handle()));
  }
}

class ChannelOver : public ::testing::TestWithParam<std::string> {};  // the transport

TEST_P(ChannelOver, FramesFromZeroBytesTo64MiBArriveIntactAndInOrder) {
  TestJob job(2);
  auto pair = connect_pair(job, {}, GetParam());
  ASSERT_TRUE(pair.server && pair.client);
  EXPECT_EQ(pair.client->transport(), GetParam());
  EXPECT_EQ(pair.server->transport(), GetParam());
  EXPECT_EQ(pair.server->peer().rank, 1u);
  EXPECT_EQ(pair.client->peer().rank, 0u);
  const std::vector<std::size_t> sizes = {0,     1,         47,        48,         8191,
                                          8192,  8193,      65536,     (1 << 20) + 3,
                                          16 << 20, 64 << 20};
  auto receiver = std::async(std::launch::async, [&] {
    std::vector<std::uint64_t> sums;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      FrameHeader h;
      std::vector<std::uint8_t> payload;
      if (auto ec = pair.server->receive_frame(h, payload, long_deadline()); ec) {
        ADD_FAILURE() << ec.message();
        break;
      }
      EXPECT_EQ(h.type, FrameType::eager);
      EXPECT_EQ(h.tag, static_cast<std::int32_t>(i));
      EXPECT_EQ(payload.size(), sizes[i]);
      sums.push_back(fnv1a(payload));
    }
    return sums;
  });
  std::vector<std::uint64_t> expected;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto data = pattern(sizes[i], i);
    expected.push_back(fnv1a(data));
    FrameHeader h;
    h.type = FrameType::eager;
    h.tag = static_cast<std::int32_t>(i);
    ASSERT_FALSE(pair.client->send_frame(h, data, long_deadline()));
  }
  EXPECT_EQ(receiver.get(), expected);
}

INSTANTIATE_TEST_SUITE_P(Transports, ChannelOver, ::testing::Values("tcp", "unix", "shm"),
                         [](const auto& param_info) { return param_info.param; });

// Over shared rings, a peer that goes away after sending still has everything it sent read,
// and then the close is reported, as on a socket.
TEST(SharedRings, FramesSentBeforeThePeerClosedAreReadThenTheCloseIsReported) {
  TestJob job(2);
  auto pair = connect_pair(job, {}, "shm");
  ASSERT_TRUE(pair.server && pair.client);
  const auto data = pattern(1500000, 7);  // more than fits into the ring at once
  auto sender = std::async(std::launch::async, [&] {
    FrameHeader h;
    h.type = FrameType::eager;
    EXPECT_FALSE(pair.client->send_frame(h, data, long_deadline()));
    pair.client.reset();  // closes the socket: the peer is gone
  });
  FrameHeader h;
  std::vector<std::uint8_t> payload;
  ASSERT_FALSE(pair.server->receive_frame(h, payload, long_deadline()));
  EXPECT_EQ(fnv1a(payload), fnv1a(data));
  sender.get();
  const auto ec = pair.server->receive_frame(h, payload, long_deadline());
  EXPECT_EQ(ec, errc::connection_closed) << pair.server->failure().message();
}

// The preface must carry exactly one descriptor; anything else is refused with its reason
// before TLS starts. (What the descriptor is, SharedRegion::adopt checks once the peer has
// proven who it is: shared_ring_test.)
TEST(SharedRings, APrefaceWithoutExactlyOneDescriptorIsRefused) {
  TestJob job(2);
  const TempDir dir;
  transport::Listener listener(loopback_any_port(), dir.path());
  ASSERT_FALSE(listener.local_path().empty()) << listener.local_failure();
  const auto try_preface = [&](int fd_to_pass) {
    std::error_code ec;
    auto dialed = transport::unix_connect(listener.local_path(), long_deadline(), ec);
    EXPECT_TRUE(dialed.valid()) << ec.message();
    EXPECT_TRUE(transport::send_byte_with_descriptor(dialed.get(), 'M', fd_to_pass));
    dialed = {};  // nothing follows the preface
    auto accepted = listener.accept(long_deadline(), ec);
    ChannelError error;
    auto channel = Channel::accept(job.endpoint(job.issue(0)), std::move(accepted),
                                   [](std::uint32_t) { return true; }, long_deadline(), error);
    EXPECT_FALSE(channel);
    return error;
  };
  auto error = try_preface(-1);
  EXPECT_EQ(error.code, errc::connection_failed);
  EXPECT_NE(error.detail.find("carried 0 descriptors instead of one"), std::string::npos)
      << error.message();
  // Any descriptor passes the preface; what it is, is checked only once the peer has proven
  // who it is (SharedRegion::adopt, shared_ring_test). Here TLS never starts.
  const transport::UniqueFd directory(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY));
  error = try_preface(directory.get());
  EXPECT_EQ(error.code, errc::connection_closed) << error.message();
}

TEST(Listener, UnixSocketIsGoneWithTheListener) {
  const TempDir dir;
  std::string path;
  {
    transport::Listener listener(loopback_any_port(), dir.path());
    path = listener.local_path();
    ASSERT_FALSE(path.empty()) << listener.local_failure();
    EXPECT_EQ(std::filesystem::path(path).parent_path(), dir.path());
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// SECURITY.md: a job CA signed by a site CA is still the one trust anchor (PARTIAL_CHAIN). The
// start-up self-check of a rank's own certificate used a store without that flag, so such a
// CA made every rank fail to start ("unable to get issuer certificate").
TEST(Channel, AJobCaSignedByASiteCaIsTheTrustAnchor) {
  TestJob job(2);
  const auto site_key = pki::PrivateKey::generate();
  pki::X509Ptr resigned{X509_dup(job.ca().certificate().get())};
  ASSERT_TRUE(resigned);
  const pki::ossl_ptr<X509_NAME, X509_NAME_free> site{X509_NAME_new()};
  ASSERT_EQ(
      X509_NAME_add_entry_by_txt(site.get(), "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("site CA"), -1, -1, 0),
      1);
  ASSERT_EQ(X509_set_issuer_name(resigned.get(), site.get()), 1);
  ASSERT_GT(X509_sign(resigned.get(), site_key.get(), EVP_sha256()), 0);
  job.trust_anchor(pki::Certificate(std::move(resigned)));
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  EXPECT_EQ(pair.server->peer().rank, 1u);
  EXPECT_EQ(pair.client->peer().rank, 0u);
}

// A Unix socket's full listen backlog makes connect() fail with EAGAIN. A dialer waits that out
// until its deadline: taken for an unreachable socket, the pair would have fallen back to TCP.
TEST(UnixConnect, AFullBacklogIsWaitedOutNotAFailure) {
  const TempDir dir;
  const std::string path = (dir.path() / "listener.sock").string();
  const transport::UniqueFd listening(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(listening.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address),
            0);
  ASSERT_EQ(::listen(listening.get(), 0), 0);
  std::vector<transport::UniqueFd> queued;  // fill the backlog: connect until EAGAIN
  for (;;) {
    transport::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
      break;
    }
    queued.push_back(std::move(fd));
    ASSERT_LT(queued.size(), 100u);
  }
  // Nobody accepts: the dialer keeps trying until its deadline (it used to fail at once).
  std::error_code ec;
  const auto started = std::chrono::steady_clock::now();
  auto refused = transport::unix_connect(path, deadline_in(std::chrono::milliseconds(300)), ec);
  EXPECT_FALSE(refused.valid());
  EXPECT_EQ(ec, errc::timeout) << ec.message();
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(250));
  // The listener catches up: the dialer gets through.
  auto dialing = std::async(std::launch::async, [&] {
    std::error_code dial_error;
    auto fd = transport::unix_connect(path, long_deadline(), dial_error);
    EXPECT_TRUE(fd.valid()) << dial_error.message();
    return fd;
  });
  std::vector<transport::UniqueFd> accepted;
  while (dialing.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    pollfd waiting{listening.get(), POLLIN, 0};
    if (::poll(&waiting, 1, 100) == 1) {  // bounded: the dialer's deadline ends the loop
      accepted.emplace_back(::accept4(listening.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
  }
  EXPECT_TRUE(dialing.get().valid());
}

// Out of descriptors (EMFILE) is a moment's shortage, not the listener's end: accept() waits
// for one to be released, until its deadline, instead of failing at once (a rank's acceptor
// then stopped, and the job failed to start).
TEST(Listener, RunningOutOfDescriptorsIsWaitedOut) {
  transport::Listener listener(loopback_any_port(), {});
  std::error_code ec;
  auto dialed = transport::tcp_connect(listener.endpoint(), long_deadline(), ec);
  ASSERT_TRUE(dialed.valid()) << ec.message();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<transport::UniqueFd> spare;  // every descriptor below a lowered limit, taken
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const transport::UniqueFd null_device(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(null_device.valid());
  for (transport::UniqueFd fd(::dup(null_device.get())); fd.valid();
       fd = transport::UniqueFd(::dup(null_device.get()))) {
    spare.push_back(std::move(fd));
  }
  const auto started = std::chrono::steady_clock::now();
  auto none = listener.accept(deadline_in(std::chrono::milliseconds(300)), ec);
  const auto waited = std::chrono::steady_clock::now() - started;
  spare.clear();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(ec, std::errc::too_many_files_open) << ec.message();
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  auto accepted = listener.accept(long_deadline(), ec);  // descriptors again: the same connection
  EXPECT_TRUE(accepted.valid()) << ec.message();
}

// Others could connect, or swap the socket: such a directory is not used (peers use TCP).
TEST(Listener, RefusesADirectoryOthersCanEnter) {
  const TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  transport::Listener listener(loopback_any_port(), dir.path());
  EXPECT_TRUE(listener.local_path().empty());
  EXPECT_NE(listener.local_failure().find("not a private (0700) directory"), std::string::npos)
      << listener.local_failure();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Only this user can reach the Unix socket; anyone can queue TCP connections. So accept()
// serves the Unix socket first, or a TCP flood could keep local ranks waiting.
TEST(Listener, AcceptServesTheUnixSocketBeforeQueuedTcpConnections) {
  const TempDir dir;
  transport::Listener listener(loopback_any_port(), dir.path());
  ASSERT_FALSE(listener.local_path().empty()) << listener.local_failure();
  std::vector<transport::UniqueFd> queued;
  for (int i = 0; i < 20; ++i) {
    std::error_code ec;
    queued.push_back(transport::tcp_connect(listener.endpoint(), long_deadline(), ec));
    ASSERT_TRUE(queued.back().valid()) << ec.message();
  }
  std::error_code ec;
  auto local = transport::unix_connect(listener.local_path(), long_deadline(), ec);
  ASSERT_TRUE(local.valid()) << ec.message();
  auto first = listener.accept(long_deadline(), ec);
  ASSERT_TRUE(first.valid()) << ec.message();
  EXPECT_TRUE(transport::is_unix_socket(first.get()));
  auto second = listener.accept(long_deadline(), ec);
  ASSERT_TRUE(second.valid()) << ec.message();
  EXPECT_FALSE(transport::is_unix_socket(second.get()));
}

// Both ends of a Unix-socket connection get the larger send buffer. What the kernel grants for
// the request (twice it, capped by net.core.wmem_max, which containers may not show) is read
// from a reference socket.
TEST(Listener, UnixConnectionsGetTheLargerSendBuffer) {
  const auto send_buffer = [](int fd) {
    int value = 0;
    socklen_t length = sizeof value;
    EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, &length), 0);
    return value;
  };
  int reference[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, reference), 0);
  const int kernel_default = send_buffer(reference[0]);
  ASSERT_EQ(::setsockopt(reference[1], SOL_SOCKET, SO_SNDBUF, &transport::kUnixSendBufferRequest,
                         sizeof transport::kUnixSendBufferRequest),
            0);
  const int granted = send_buffer(reference[1]);
  ::close(reference[0]);
  ::close(reference[1]);
  if (granted <= kernel_default) {
    GTEST_SKIP() << "this host's default send buffer (" << kernel_default
                 << ") is already at least what the request gets (" << granted << ")";
  }
  const TempDir dir;
  transport::Listener listener(loopback_any_port(), dir.path());
  ASSERT_FALSE(listener.local_path().empty()) << listener.local_failure();
  std::error_code ec;
  auto dialed = transport::unix_connect(listener.local_path(), long_deadline(), ec);
  ASSERT_TRUE(dialed.valid()) << ec.message();
  auto accepted = listener.accept(long_deadline(), ec);
  ASSERT_TRUE(accepted.valid()) << ec.message();
  EXPECT_EQ(send_buffer(dialed.get()), granted);
  EXPECT_EQ(send_buffer(accepted.get()), granted);
}

// A rank of the job could plant a link to some other socket (an SSH agent, say) where a peer's
// socket should be: dialers take only a socket file itself.
TEST(Listener, DialersRefuseALinkInPlaceOfTheSocket) {
  const TempDir dir;
  const TempDir elsewhere;
  transport::Listener listener(loopback_any_port(), dir.path());
  ASSERT_FALSE(listener.local_path().empty()) << listener.local_failure();
  const auto link = elsewhere.path() / "rank-1.sock";
  std::filesystem::create_symlink(listener.local_path(), link);
  std::error_code ec;
  EXPECT_FALSE(transport::unix_connect(link.string(), long_deadline(), ec).valid());
  EXPECT_EQ(ec, std::errc::permission_denied) << ec.message();
  EXPECT_TRUE(transport::unix_connect(listener.local_path(), long_deadline(), ec).valid())
      << ec.message();
}

TEST(Listener, ShutdownWakesABlockedAccept) {
  const TempDir dir;
  transport::Listener listener(loopback_any_port(), dir.path());
  ASSERT_FALSE(listener.local_path().empty()) << listener.local_failure();
  auto waiting = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto fd = listener.accept(long_deadline(), ec);
    return std::make_pair(fd.valid(), ec);
  });
  ASSERT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  const auto start = transport::Clock::now();
  listener.shutdown();
  const auto [accepted, ec] = waiting.get();
  EXPECT_FALSE(accepted);
  EXPECT_EQ(ec, std::errc::operation_canceled) << ec.message();
  EXPECT_LT(transport::Clock::now() - start, std::chrono::seconds(10));
}

// Only an unreachable socket falls back to TCP; a peer that fails TLS verification over the
// Unix socket fails the dial (here: rank 0 answers where rank 1 was expected).
TEST(Channel, DialDoesNotFallBackAfterAFailedHandshake) {
  TestJob job(3);
  const TempDir dir;
  const auto server_local = job.endpoint(job.issue(0));
  transport::Listener listener(loopback_any_port(), dir.path());
  ASSERT_FALSE(listener.local_path().empty()) << listener.local_failure();
  auto server = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto fd = listener.accept(long_deadline(), ec);
    const bool over_unix = fd.valid() && transport::is_unix_socket(fd.get());
    ChannelError error;
    (void)Channel::accept(server_local, std::move(fd), [](std::uint32_t) { return true; },
                          long_deadline(), error);
    return over_unix;
  });
  ChannelError error;
  auto client = Channel::dial(job.endpoint(job.issue(2)), listener.endpoint(),
                              listener.local_path(), 1, long_deadline(), error);
  EXPECT_FALSE(client);
  EXPECT_EQ(error.code, errc::peer_wrong_rank) << error.message();
  EXPECT_TRUE(server.get());  // the one connection made came over the Unix socket
  // Nothing tried TCP afterwards.
  std::error_code ec;
  EXPECT_FALSE(listener.accept(transport::Clock::now() + std::chrono::milliseconds(200), ec)
                   .valid());
  EXPECT_EQ(ec, errc::timeout);
}

TEST(Channel, UnreachableUnixSocketFailsBeforeTls) {
  TestJob job(2);
  ChannelError error;
  auto channel = Channel::connect_local(job.endpoint(job.issue(1)), "/nonexistent/sempi.sock", 0,
                                        long_deadline(), error);
  EXPECT_FALSE(channel);
  EXPECT_EQ(error.code, errc::connection_failed) << error.message();
  EXPECT_NE(error.message().find("/nonexistent/sempi.sock"), std::string::npos);
}

// A peer's Unix socket that cannot be reached (another mount namespace, say) is no reason to
// fail: its TCP listener still is.
TEST(Channel, DialFallsBackToTcpWhenTheUnixSocketIsUnreachable) {
  TestJob job(2);
  const auto server_local = job.endpoint(job.issue(0));
  transport::Listener listener(loopback_any_port());
  auto accepted = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto fd = listener.accept(long_deadline(), ec);
    ChannelError error;
    return Channel::accept(server_local, std::move(fd), [](std::uint32_t) { return true; },
                           long_deadline(), error);
  });
  ChannelError error;
  auto client = Channel::dial(job.endpoint(job.issue(1)), listener.endpoint(),
                              "/nonexistent/sempi.sock", 0, long_deadline(), error);
  ASSERT_TRUE(client) << error.message();
  EXPECT_STREQ(client->transport(), "tcp");
  EXPECT_EQ(client->peer().rank, 0u);
  ASSERT_TRUE(accepted.get());
}

TEST(Channel, Streams256MiBThroughOneChannel) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  constexpr std::size_t kChunk = 4 << 20;
  constexpr std::size_t kChunks = 64;  // 256 MiB
  auto receiver = std::async(std::launch::async, [&] {
    std::uint64_t sum = kFnvBasis;
    std::size_t bytes = 0;
    std::vector<std::uint8_t> payload;
    for (std::size_t i = 0; i < kChunks; ++i) {
      FrameHeader h;
      if (auto ec = pair.server->receive_frame(h, payload, long_deadline()); ec) {
        ADD_FAILURE() << ec.message();
        break;
      }
      sum = fnv1a(payload, sum);
      bytes += payload.size();
    }
    EXPECT_EQ(bytes, kChunk * kChunks);
    return sum;
  });
  std::uint64_t expected = kFnvBasis;
  auto data = pattern(kChunk, 7);
  for (std::size_t i = 0; i < kChunks; ++i) {
    data.at(i) ^= 0x5a;  // every chunk differs, so reordering would show
    expected = fnv1a(data, expected);
    FrameHeader h;
    ASSERT_FALSE(pair.client->send_frame(h, data, long_deadline()));
  }
  EXPECT_EQ(receiver.get(), expected);
}

// Many small frames queued at once are coalesced into few TLS writes; order and content hold.
// Their sizes (0 to ~1 KiB) straddle the receiver's 512-byte read stage, so headers and
// payloads are split across its refills in every way.
TEST(Channel, QueuedSmallFramesAreDeliveredInOrder) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  constexpr int kFrames = 2000;
  std::vector<std::vector<std::uint8_t>> payloads;
  for (int i = 0; i < kFrames; ++i) {
    payloads.push_back(pattern(static_cast<std::size_t>((i * 37) % 1100), i));
  }
  auto receiver = std::async(std::launch::async, [&] {
    int ok = 0;
    for (int i = 0; i < kFrames; ++i) {
      FrameHeader h;
      std::vector<std::uint8_t> payload;
      if (pair.server->receive_frame(h, payload, long_deadline())) break;
      if (h.tag == i && payload == payloads[static_cast<std::size_t>(i)]) ++ok;
    }
    return ok;
  });
  int completed = 0;
  for (int i = 0; i < kFrames; ++i) {
    FrameHeader h;
    h.tag = i;
    pair.client->enqueue(h, payloads[static_cast<std::size_t>(i)], [&](std::error_code ec) {
      EXPECT_FALSE(ec);
      ++completed;
    });
  }
  ASSERT_NO_FATAL_FAILURE(flush_until_written(*pair.client));
  EXPECT_EQ(completed, kFrames);
  EXPECT_EQ(receiver.get(), kFrames);
}

// send_now() takes small frames while nothing is queued, copying the one that TLS cannot take
// when the socket is full (OpenSSL then insists on the same bytes again); after that it declines
// and enqueue() takes over. Every frame still arrives, once and in order.
TEST(Channel, SendNowFallsBackToTheQueueWhenTheSocketIsFull) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  const std::size_t large = 9000;  // above the copy threshold: send_now() declines it
  {
    FrameHeader h;
    EXPECT_FALSE(pair.client->send_now(h, pattern(large, 1)).has_value());
  }
  std::vector<std::vector<std::uint8_t>> payloads;
  int taken_now = 0;
  int completed = 0;
  std::optional<std::uint64_t> first_id;
  // Nobody reads yet, so the socket and the socket BIO fill up within a few thousand frames.
  for (int i = 0; i < 100000; ++i) {
    payloads.push_back(pattern(4000 + static_cast<std::size_t>(i % 7), i));
    FrameHeader h;
    h.tag = i;
    const auto id = pair.client->send_now(h, payloads.back());
    if (!id) {
      pair.client->enqueue(h, payloads.back(), [&](std::error_code ec) {
        EXPECT_FALSE(ec);
        ++completed;
      });
      break;
    }
    if (!first_id) first_id = *id;
    EXPECT_EQ(*id, *first_id + static_cast<std::uint64_t>(i));
    ++taken_now;
  }
  ASSERT_LT(taken_now, 100000) << "the socket never filled up";
  ASSERT_TRUE(pair.client->has_pending_writes());
  const int frames = taken_now + 1;
  auto receiver = std::async(std::launch::async, [&] {
    int ok = 0;
    for (int i = 0; i < frames; ++i) {
      FrameHeader h;
      std::vector<std::uint8_t> payload;
      if (pair.server->receive_frame(h, payload, long_deadline())) break;
      if (h.tag == i && h.sequence == *first_id + static_cast<std::uint64_t>(i) &&
          payload == payloads[static_cast<std::size_t>(i)]) {
        ++ok;
      }
    }
    return ok;
  });
  ASSERT_NO_FATAL_FAILURE(flush_until_written(*pair.client));
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(receiver.get(), frames);
}

// A send whose Request is dropped moves its queued frames to a copy of its data
// (Engine::abandon): only its own. Another queued send of the same buffer keeps reading the
// buffer, or it would read the copy after the dropped send's frames freed it.
TEST(Channel, MovedPayloadsAreOnlyTheOwnersFrames) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  std::vector<std::vector<std::uint8_t>> filler;
  for (int i = 0; i < 100000; ++i) {  // nobody reads yet: the socket fills up
    filler.push_back(pattern(4000, i));
    FrameHeader h;
    h.tag = i;
    if (!pair.client->send_now(h, filler.back())) {
      filler.pop_back();
      break;
    }
  }
  ASSERT_LT(filler.size(), 100000u) << "the socket never filled up";
  const std::vector<std::uint8_t> shared(9000, 'b');  // above the copy threshold: referenced
  const std::vector<std::uint8_t> copy(9000, 'c');
  const int dropped = 0;
  const int kept = 0;
  FrameHeader h;
  h.tag = -1;
  pair.client->enqueue(h, shared, nullptr, &dropped);
  h.tag = -2;
  pair.client->enqueue(h, shared, nullptr, &kept);
  pair.client->move_payloads(&dropped, shared, copy.data());
  auto receiver = std::async(std::launch::async, [&] {
    std::map<int, std::vector<std::uint8_t>> got;
    for (std::size_t i = 0; i < filler.size() + 2; ++i) {
      FrameHeader r;
      std::vector<std::uint8_t> payload;
      if (pair.server->receive_frame(r, payload, long_deadline())) break;
      if (r.tag < 0) got[r.tag] = std::move(payload);
    }
    return got;
  });
  ASSERT_NO_FATAL_FAILURE(flush_until_written(*pair.client));
  auto got = receiver.get();
  EXPECT_EQ(got[-1], copy);
  EXPECT_EQ(got[-2], shared);
}

// The socket BIO takes everything queued on the socket in one recv(); what the first frame did
// not use is invisible to poll() and must still be reported, or a receiver would wait forever.
TEST(Channel, BytesBufferedBeyondOneFrameAreReportedAndDelivered) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  const auto payload = pattern(100, 7);
  for (int tag = 0; tag < 2; ++tag) {  // two flushes: two TLS records
    FrameHeader h;
    h.tag = tag;
    ASSERT_FALSE(pair.client->send_frame(h, payload, long_deadline()));
  }
  // Both records are queued at the server (plaintext, content type and AEAD tag: 17 bytes of
  // record overhead plus the 5-byte header each) before it reads.
  const int both = 2 * static_cast<int>(transport::kFrameHeaderSize + payload.size() + 22);
  const auto deadline = long_deadline();
  for (int queued = 0; queued < both;) {
    ASSERT_EQ(::ioctl(pair.server->native_handle(), FIONREAD, &queued), 0);
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "only " << queued << " bytes arrived";
    std::this_thread::yield();
  }
  FrameHeader h;
  std::vector<std::uint8_t> got;
  ASSERT_FALSE(pair.server->receive_frame(h, got, long_deadline()));
  EXPECT_EQ(h.tag, 0);
  EXPECT_TRUE(pair.server->has_buffered_input());
  pollfd pfd{pair.server->native_handle(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "the socket should have been drained by one read";
  ASSERT_FALSE(pair.server->receive_frame(h, got, deadline_in(std::chrono::seconds(5))));
  EXPECT_EQ(h.tag, 1);
  EXPECT_EQ(got, payload);
  EXPECT_FALSE(pair.server->has_buffered_input());
}

// An error some other code left in this thread's OpenSSL queue must not be taken for the
// channel's: SSL_get_error() would report SSL_ERROR_SSL for a plain "no data yet".
TEST(Channel, StaleOpenSslErrorsInTheThreadDoNotFailTheChannel) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  struct NoFrames : transport::FrameSink {
    std::span<std::uint8_t> payload_buffer(const FrameHeader&) override { return {}; }
    std::error_code on_frame(const FrameHeader&, std::span<std::uint8_t>) override {
      return errc::frame_unexpected;
    }
  } nothing_expected;
  ERR_raise(ERR_LIB_USER, 1);
  ASSERT_NE(ERR_peek_error(), 0u);
  // Nothing was sent yet: the read must end in "would block", not in a failure.
  EXPECT_FALSE(pair.server->read_available(nothing_expected));
  EXPECT_FALSE(pair.server->failed());
  ERR_raise(ERR_LIB_USER, 2);
  FrameHeader h;
  h.tag = 5;
  ASSERT_FALSE(pair.client->send_frame(h, pattern(10, 1), long_deadline()));
  std::vector<std::uint8_t> got;
  ASSERT_FALSE(pair.server->receive_frame(h, got, long_deadline()));
  EXPECT_EQ(h.tag, 5);
}

TEST(Channel, FrameLargerThanPeerLimitIsRefusedBeforeSending) {
  TestJob job(2);
  transport::ChannelLimits limits;
  limits.max_frame_payload = 1 << 20;
  auto pair = connect_pair(job, limits);
  ASSERT_TRUE(pair.server && pair.client);
  const std::vector<std::uint8_t> big((1 << 20) + 1);
  EXPECT_EQ(pair.client->send_frame(FrameHeader{}, big, long_deadline()), errc::frame_too_large);
  // The channel stays usable.
  EXPECT_FALSE(pair.client->send_frame(FrameHeader{}, std::span(big).first(1 << 20),
                                       long_deadline()));
}

TEST(Channel, ReceiveHonoursItsDeadline) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  FrameHeader h;
  std::vector<std::uint8_t> payload;
  EXPECT_EQ(pair.server->receive_frame(h, payload, deadline_in(std::chrono::milliseconds(100))),
            errc::timeout);
}

TEST(Channel, PeerCloseIsReportedAsConnectionClosed) {
  TestJob job(2);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  pair.client->shutdown();
  pair.client.reset();
  FrameHeader h;
  std::vector<std::uint8_t> payload;
  EXPECT_EQ(pair.server->receive_frame(h, payload, long_deadline()), errc::connection_closed);
}

TEST(Channel, Ed25519JobWorks) {
  TestJob job(2, {}, pki::KeyType::ed25519);
  auto pair = connect_pair(job);
  ASSERT_TRUE(pair.server && pair.client);
  EXPECT_EQ(pair.client->peer().rank, 0u);
}

TEST(TlsContext, RefusesInsecureOrInconsistentConfiguration) {
  TestJob job(2);
  TestJob other(2);
  const auto creds = job.issue(0);
  const auto foreign = other.issue(0);
  using transport::TlsConfig;
  using transport::TlsContext;
  // Certificate from another CA.
  EXPECT_THROW(TlsContext::create(TlsConfig{job.ca().certificate(), foreign.cert, foreign.key}),
               Error);
  // Key that does not match the certificate.
  EXPECT_THROW(TlsContext::create(TlsConfig{job.ca().certificate(), creds.cert, foreign.key}),
               Error);
  // Suites and groups outside the permitted set.
  TlsConfig weak{job.ca().certificate(), creds.cert, creds.key};
  weak.ciphersuites = "TLS_AES_128_CCM_8_SHA256";
  EXPECT_THROW(TlsContext::create(weak), Error);
  TlsConfig odd_group{job.ca().certificate(), creds.cert, creds.key};
  odd_group.groups = "ffdhe2048";
  EXPECT_THROW(TlsContext::create(odd_group), Error);
  // A valid configuration with a custom order is accepted.
  TlsConfig ok{job.ca().certificate(), creds.cert, creds.key};
  ok.ciphersuites = "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";
  EXPECT_NO_THROW(TlsContext::create(ok));
}

}  // namespace
}  // namespace sempi::test
