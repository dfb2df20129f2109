// The shared rings between two ranks on one host (transport/ring_stream.hpp), without TLS on
// top: two RingStreams over one region and a socketpair, as two processes would hold them.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <vector>

#include "transport/ring_stream.hpp"

// The test links with -Wl,--wrap=fstat: a hostile peer can then act between two of the
// adopter's system calls, deterministically.
namespace {
std::function<void(int)> g_after_fstat;  // runs once, after the next fstat()
}  // namespace
extern "C" int __real_fstat(int fd, struct stat* st);
extern "C" int __wrap_fstat(int fd, struct stat* st) {
  const int rc = __real_fstat(fd, st);
  if (g_after_fstat) {
    const auto hook = std::move(g_after_fstat);
    g_after_fstat = nullptr;
    hook(fd);
  }
  return rc;
}

namespace sempi::transport {
namespace {

// Both ends of one channel: the dialer's stream over the region it created, the acceptor's
// over the same memfd adopted (as if passed over the socket).
struct Ends {
  UniqueFd dialer_socket;
  UniqueFd acceptor_socket;
  SharedRegion* region = nullptr;  // the dialer's view, for tests that play a hostile peer
  std::unique_ptr<RingStream> dialer;
  std::unique_ptr<RingStream> acceptor;
};

constexpr std::size_t kRing = SharedRegion::kMaxRingBytes;

Ends make_ends() {
  Ends ends;
  int pair[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair), 0);
  ends.dialer_socket = UniqueFd(pair[0]);
  ends.acceptor_socket = UniqueFd(pair[1]);
  std::string error;
  auto created = SharedRegion::create(kRing, error);
  EXPECT_TRUE(created) << error;
  auto adopted = SharedRegion::adopt(UniqueFd(::fcntl(created->fd(), F_DUPFD_CLOEXEC, 0)), error);
  created->close_fd();
  EXPECT_TRUE(adopted) << error;
  ends.region = created.get();
  ends.dialer = std::make_unique<RingStream>(std::move(created), true, ends.dialer_socket.get());
  ends.acceptor =
      std::make_unique<RingStream>(std::move(adopted), false, ends.acceptor_socket.get());
  return ends;
}

std::vector<std::uint8_t> bytes(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 31 + (i >> 9));
  return v;
}

// Writes `data` through `from` as far as it goes; returns the bytes handed on.
std::size_t write_some(RingStream& from, const std::vector<std::uint8_t>& data, std::size_t at) {
  std::size_t done = at;
  while (done < data.size()) {
    const std::size_t chunk = std::min<std::size_t>(data.size() - done, 16 * 1024);
    std::uint8_t* room = from.reserve(chunk);
    if (room == nullptr) break;
    std::memcpy(room, data.data() + done, chunk);
    from.commit(chunk);
    done += chunk;
    EXPECT_TRUE(from.send_if_full());
  }
  EXPECT_TRUE(from.drain());
  return done;
}

// Reads what has arrived at `to` into `out`.
void read_some(RingStream& to, std::vector<std::uint8_t>& out) {
  for (;;) {
    const long n = to.receive(1);
    if (n <= 0) break;
  }
  out.insert(out.end(), to.unread_data(), to.unread_data() + to.unread());
  to.consume(to.unread());
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(SharedRegion, AdoptRefusesAnythingButASealedMemfdOfTheRightSize) {
  std::string error;
  EXPECT_FALSE(SharedRegion::adopt(UniqueFd(::open("/", O_RDONLY | O_DIRECTORY)), error));
  EXPECT_EQ(error, "the peer's shared rings are not a sealed memfd");

  // Unsealed: the peer could shrink it under us (SIGBUS on our next access).
  UniqueFd unsealed(::memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(unsealed.get(), SharedRegion::kControlBytes + 2 * kRing), 0);
  error.clear();
  EXPECT_FALSE(SharedRegion::adopt(std::move(unsealed), error));
  EXPECT_EQ(error, "the peer's shared rings are not a sealed memfd");

  UniqueFd small(::memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(small.get(), 4096), 0);
  ASSERT_EQ(::fcntl(small.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  error.clear();
  EXPECT_FALSE(SharedRegion::adopt(std::move(small), error));
  EXPECT_NE(error.find("are 4096 bytes, not"), std::string::npos) << error;

  // What create() makes is sealed for good: nobody can resize it.
  auto region = SharedRegion::create(kRing, error);
  ASSERT_TRUE(region) << error;
  EXPECT_NE(::ftruncate(region->fd(), 4096), 0);
  EXPECT_EQ(errno, EPERM);
  // Nor will a region of a size create() would never choose be taken.
  UniqueFd odd(::memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(odd.get(), SharedRegion::kControlBytes + 2 * (kRing + 4096)), 0);
  ASSERT_EQ(::fcntl(odd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  EXPECT_FALSE(SharedRegion::adopt(std::move(odd), error));
}

// The peer hands over an unsealed memfd of the right size, and shrinks and seals it while we
// look at it. Whichever of our calls it slips between, we must not map a size we did not see
// sealed: the first access past the file's new end would kill us with SIGBUS.
TEST(SharedRegion, AdoptCannotBeRacedIntoMappingPastTheEndOfTheFile) {
  UniqueFd racing(::memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(racing.get(), SharedRegion::kControlBytes + 2 * kRing), 0);
  bool raced = false;
  g_after_fstat = [&raced](int fd) {
    raced = ::ftruncate(fd, 4096) == 0 &&
            ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0;
  };
  std::string error;
  auto region = SharedRegion::adopt(std::move(racing), error);
  const bool hook_ran = g_after_fstat == nullptr;
  g_after_fstat = nullptr;
  EXPECT_FALSE(region) << "mapped a file the peer shrank to 4096 bytes (raced: " << raced << ")";
  // Either the unsealed file was refused before fstat, or the race could not be run.
  if (hook_ran) {
    EXPECT_FALSE(raced);
  }
}

TEST(SharedRegion, RingsShrinkWithTheJobSoThatARanksRingsStayWithinTheBudget) {
  EXPECT_EQ(SharedRegion::ring_bytes_for(2), SharedRegion::kMaxRingBytes);
  EXPECT_EQ(SharedRegion::ring_bytes_for(16), SharedRegion::kMaxRingBytes);
  EXPECT_EQ(SharedRegion::ring_bytes_for(64), 128u * 1024);
  EXPECT_EQ(SharedRegion::ring_bytes_for(100000), SharedRegion::kMinRingBytes);
  for (std::size_t ranks : {17, 33, 100, 1000}) {
    const std::size_t ring = SharedRegion::ring_bytes_for(ranks);
    EXPECT_EQ(ring % 4096, 0u);
    if (ring > SharedRegion::kMinRingBytes) {
      EXPECT_LE(ring * (ranks - 1), SharedRegion::kRingBudget);
    }
  }
}

TEST(RingStream, BytesArriveIntactAndInOrderAcrossManyLapsOfTheRing) {
  auto ends = make_ends();
  const auto data = bytes(5 * kRing + 12345, 3);
  std::vector<std::uint8_t> got;
  std::size_t sent = 0;
  for (int rounds = 0; got.size() < data.size() && rounds < 100000; ++rounds) {
    sent = write_some(*ends.dialer, data, sent);
    read_some(*ends.acceptor, got);
  }
  EXPECT_EQ(got, data);
  // And the other way.
  const auto back = bytes(70000, 9);
  got.clear();
  write_some(*ends.acceptor, back, 0);
  read_some(*ends.dialer, got);
  EXPECT_EQ(got, back);
}

TEST(RingStream, ASleepingReaderIsWokenAndAWaitingWriterToo) {
  auto ends = make_ends();
  // Nothing there: the reader may sleep, and asks to be woken.
  EXPECT_FALSE(ends.acceptor->prepare_to_block(true, false));
  const auto data = bytes(100, 1);
  write_some(*ends.dialer, data, 0);
  EXPECT_TRUE(readable(ends.acceptor_socket.get()));  // the wake-up byte
  ends.acceptor->done_blocking();
  ends.acceptor->service_socket();
  EXPECT_FALSE(readable(ends.acceptor_socket.get()));
  // A spinning reader (no prepare_to_block) costs the writer no wake-up.
  write_some(*ends.dialer, data, 0);
  EXPECT_FALSE(readable(ends.acceptor_socket.get()));

  // Fill the ring; the writer then waits for room and is woken when the reader takes some.
  const auto lots = bytes(2 * kRing, 5);
  write_some(*ends.dialer, lots, 0);
  ASSERT_GT(ends.dialer->unsent(), 0u);
  EXPECT_FALSE(ends.dialer->prepare_to_block(false, true));
  std::vector<std::uint8_t> got;
  read_some(*ends.acceptor, got);
  EXPECT_TRUE(readable(ends.dialer_socket.get()));
}

TEST(RingStream, WhatThePeerPublishedBeforeClosingIsReadThenTheCloseIsReported) {
  auto ends = make_ends();
  const auto data = bytes(5000, 2);
  write_some(*ends.dialer, data, 0);
  ends.dialer.reset();
  ends.dialer_socket = {};
  ends.acceptor->service_socket();
  std::vector<std::uint8_t> got;
  read_some(*ends.acceptor, got);
  EXPECT_EQ(got, data);
  EXPECT_EQ(ends.acceptor->receive(1), 0);
  EXPECT_TRUE(ends.acceptor->prepare_to_block(true, false));  // nothing more to wait for
  // Writing to a peer that is gone fails, as on a socket.
  std::uint8_t* room = ends.acceptor->reserve(10);
  ASSERT_NE(room, nullptr);
  ends.acceptor->commit(10);
  EXPECT_FALSE(ends.acceptor->drain());
  EXPECT_EQ(errno, EPIPE);
}

TEST(RingStream, BytesPublishedWhenTheWakeUpFailsCountAsSentAndTheNextWriteFails) {
  auto ends = make_ends();
  EXPECT_FALSE(ends.acceptor->prepare_to_block(true, false));  // asleep: wants a wake-up byte
  ends.acceptor_socket = {};  // ...but its socket is gone, as when the peer exits
  const auto data = bytes(100, 3);
  std::uint8_t* room = ends.dialer->reserve(data.size());
  ASSERT_NE(room, nullptr);
  std::memcpy(room, data.data(), data.size());
  ends.dialer->commit(data.size());
  // Published before the wake-up failed: sent, not left to be pushed (and published) again.
  EXPECT_TRUE(ends.dialer->drain());
  EXPECT_EQ(ends.dialer->unsent(), 0u);
  std::vector<std::uint8_t> got;
  read_some(*ends.acceptor, got);
  EXPECT_EQ(got, data);
  // The peer is gone: the next write fails as on a socket.
  room = ends.dialer->reserve(10);
  ASSERT_NE(room, nullptr);
  ends.dialer->commit(10);
  EXPECT_FALSE(ends.dialer->drain());
  EXPECT_EQ(errno, EPIPE);
}

TEST(RingStream, IndicesAHostilePeerWritesAreCheckedBeforeUse) {
  auto ends = make_ends();
  // A head more than a ring ahead of what we consumed would have us read stale bytes.
  std::atomic_ref<std::uint64_t>(ends.region->control(0).head).store(kRing + 1);
  EXPECT_EQ(ends.acceptor->receive(1), -1);
  EXPECT_EQ(errno, EPROTO);
  EXPECT_NE(ends.acceptor->failure_detail().find("the peer moved its head to 524289"),
            std::string::npos)
      << ends.acceptor->failure_detail();
  EXPECT_TRUE(ends.acceptor->prepare_to_block(true, false));  // failed: never sleep on it

  // A tail beyond what was ever published would have us overwrite bytes not yet read.
  auto other = make_ends();
  const auto data = bytes(kRing, 4);
  write_some(*other.dialer, data, 0);
  std::atomic_ref<std::uint64_t>(other.region->control(0).tail).store(1ULL << 40);
  // The ring is full: the writer looks at the tail before it writes on.
  std::uint8_t* room = other.dialer->reserve(100);
  ASSERT_NE(room, nullptr);
  other.dialer->commit(100);
  EXPECT_FALSE(other.dialer->drain());
  EXPECT_EQ(errno, EPROTO);
  EXPECT_NE(other.dialer->failure_detail().find("the peer moved its tail to"), std::string::npos)
      << other.dialer->failure_detail();
}

}  // namespace
}  // namespace sempi::transport
