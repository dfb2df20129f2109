// The buffered socket BIO under OpenSSL: records are gathered and sent together, a flush hands
// everything to the kernel, a full socket turns into retries (never a loss), and a dead peer
// into an error; reads take what the socket holds at once and hand it out piecewise. A
// non-blocking socketpair stands in for the TCP socket.

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "transport/socket_bio.hpp"

namespace sempi::transport {
namespace {

struct BioPair {
  int writer = -1;
  int reader = -1;
  BIO* bio = nullptr;

  BioPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    writer = fds[0];
    reader = fds[1];
    const int small = 64 * 1024;  // a socket that fills up quickly
    ::setsockopt(writer, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::fcntl(writer, F_SETFL, ::fcntl(writer, F_GETFL) | O_NONBLOCK);
    ::fcntl(reader, F_SETFL, ::fcntl(reader, F_GETFL) | O_NONBLOCK);
    bio = new_socket_bio(writer);
  }
  ~BioPair() {
    BIO_free(bio);
    ::close(writer);
    if (reader >= 0) ::close(reader);
  }
  // Everything the reader can get right now.
  std::vector<std::uint8_t> drain_reader() const {
    std::vector<std::uint8_t> got;
    std::uint8_t buf[65536];
    for (ssize_t n; (n = ::recv(reader, buf, sizeof buf, 0)) > 0;) got.insert(got.end(), buf, buf + n);
    return got;
  }
};

std::vector<std::uint8_t> record(std::size_t size, std::uint8_t seed) {
  std::vector<std::uint8_t> r(size);
  for (std::size_t i = 0; i < size; ++i) r[i] = static_cast<std::uint8_t>(seed + i * 7);
  return r;
}

TEST(SocketBio, SmallRecordsWaitForFlushThenArriveTogetherInOrder) {
  BioPair p;
  std::vector<std::uint8_t> sent;
  for (std::uint8_t i = 0; i < 3; ++i) {
    const auto r = record(100, i);
    ASSERT_EQ(BIO_write(p.bio, r.data(), static_cast<int>(r.size())), 100);
    sent.insert(sent.end(), r.begin(), r.end());
  }
  EXPECT_EQ(BIO_wpending(p.bio), 300);
  EXPECT_TRUE(p.drain_reader().empty());  // gathered, not yet sent
  ASSERT_EQ(BIO_flush(p.bio), 1);
  EXPECT_EQ(BIO_wpending(p.bio), 0);
  EXPECT_EQ(p.drain_reader(), sent);
}

TEST(SocketBio, FullSocketMeansRetryAndNothingIsLost) {
  BioPair p;
  std::vector<std::uint8_t> sent;
  std::vector<std::uint8_t> received;
  // Write 16 KiB records until the BIO refuses: the socket and then the buffer are full.
  int refused = 0;
  for (std::uint8_t i = 0; refused == 0; ++i) {
    const auto r = record(16 * 1024, i);
    const int n = BIO_write(p.bio, r.data(), static_cast<int>(r.size()));
    if (n > 0) {
      ASSERT_EQ(n, static_cast<int>(r.size()));
      sent.insert(sent.end(), r.begin(), r.end());
    } else {
      EXPECT_TRUE(BIO_should_retry(p.bio));
      EXPECT_TRUE(BIO_should_write(p.bio));
      refused = 1;
    }
    ASSERT_LT(sent.size(), 64u << 20) << "the BIO never pushed back";
  }
  EXPECT_GT(BIO_wpending(p.bio), 0);
  EXPECT_NE(BIO_flush(p.bio), 1);  // the reader is not reading: flush must ask to retry
  EXPECT_TRUE(BIO_should_retry(p.bio));
  // The reader drains; flushing then completes and every byte arrived once, in order.
  for (int spins = 0; BIO_wpending(p.bio) > 0 && spins < 100000; ++spins) {
    auto got = p.drain_reader();
    received.insert(received.end(), got.begin(), got.end());
    (void)BIO_flush(p.bio);
  }
  EXPECT_EQ(BIO_wpending(p.bio), 0);
  auto rest = p.drain_reader();
  received.insert(received.end(), rest.begin(), rest.end());
  EXPECT_EQ(received, sent);
}

TEST(SocketBio, ReadsTakeTheWholeSocketOnceAndServeItInPieces) {
  BioPair p;
  // The peer end (`reader` in this fixture) writes; the BIO on `writer` reads.
  const auto data = record(3000, 9);
  ASSERT_EQ(::send(p.reader, data.data(), data.size(), 0), 3000);
  std::vector<std::uint8_t> got(5);
  ASSERT_EQ(BIO_read(p.bio, got.data(), 5), 5);  // a TLS record header
  EXPECT_EQ(BIO_pending(p.bio), 2995);           // the rest came with the same recv()
  std::uint8_t probe = 0;
  EXPECT_EQ(::recv(p.writer, &probe, 1, MSG_PEEK | MSG_DONTWAIT), -1) << "socket not drained";
  got.resize(3000);
  ASSERT_EQ(BIO_read(p.bio, got.data() + 5, 2995), 2995);
  EXPECT_EQ(got, data);
  EXPECT_EQ(BIO_pending(p.bio), 0);
  // Nothing left: a retry, not an end of stream; after the peer closes, an end of stream.
  EXPECT_EQ(BIO_read(p.bio, got.data(), 5), -1);
  EXPECT_TRUE(BIO_should_retry(p.bio));
  EXPECT_TRUE(BIO_should_read(p.bio));
  ::close(p.reader);
  p.reader = -1;
  EXPECT_EQ(BIO_read(p.bio, got.data(), 5), 0);
  EXPECT_FALSE(BIO_should_retry(p.bio));
}

TEST(SocketBio, DeadPeerIsAnErrorNotARetry) {
  BioPair p;
  ::close(p.reader);
  p.reader = -1;
  const auto r = record(100, 1);
  ASSERT_EQ(BIO_write(p.bio, r.data(), 100), 100);  // buffered: the failure shows at flush
  EXPECT_NE(BIO_flush(p.bio), 1);
  EXPECT_FALSE(BIO_should_retry(p.bio));
}

}  // namespace
}  // namespace sempi::transport
