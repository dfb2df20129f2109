// sempirun's output writer on real pipes: it never blocks its caller, bounds what it holds by
// telling the caller to stop reading, keeps lines whole, and survives a reader that goes away.
//
// A reader that "does not read" is a pipe the test leaves alone; waits are on the writer's
// wake-ups (a pipe the test polls) with a deadline, never sleeps.

#include "launch/output_writer.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

namespace sempi::launch {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kDeadline = 30s;

struct Pipe {
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe: " << std::strerror(errno);
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    close_read();
    if (write_end >= 0) ::close(write_end);
  }
  void close_read() {
    if (read_end >= 0) ::close(read_end);
    read_end = -1;
  }
  // Reads until `size` bytes arrived or the deadline passed.
  std::string read_exactly(std::size_t size) const {
    std::string data;
    const auto deadline = Clock::now() + kDeadline;
    char buf[65536];
    while (data.size() < size && Clock::now() < deadline) {
      pollfd p{read_end, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(read_end, buf, std::min(sizeof buf, size - data.size()));
      if (n <= 0) break;
      data.append(buf, static_cast<std::size_t>(n));
    }
    return data;
  }
  int read_end = -1;
  int write_end = -1;
};

// Counts the writer's wake-ups the way the launcher does: bytes in a self-pipe.
struct WakeUps {
  Pipe pipe;
  std::function<void()> callback() {
    return [fd = pipe.write_end] {
      const char byte = 0;
      EXPECT_EQ(::write(fd, &byte, 1), 1);
    };
  }
  // Waits for one wake-up; false after the deadline.
  bool wait() const {
    pollfd p{pipe.read_end, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kDeadline).count())) != 1) {
      return false;
    }
    char byte;
    return ::read(pipe.read_end, &byte, 1) == 1;
  }
};

std::string numbered_line(int i, std::size_t width) {
  std::string line = std::to_string(i) + ":";
  line.resize(width - 1, static_cast<char>('a' + i % 26));
  return line + "\n";
}

TEST(OutputWriter, WritesEveryPieceInOrder) {
  Pipe out;
  WakeUps wake;
  std::string expected;
  {
    OutputWriter writer(out.write_end, wake.callback());
    for (int i = 0; i < 2000; ++i) {
      expected += numbered_line(i, 20);
      writer.write(numbered_line(i, 20));
    }
    EXPECT_EQ(out.read_exactly(expected.size()), expected);
    if (!writer.drained()) {
      ASSERT_TRUE(wake.wait());
    }
    EXPECT_TRUE(writer.drained());
    EXPECT_EQ(writer.queued(), 0u);
  }
}

// The launcher's event loop must go on (timeouts, signals, the audit seal) while nobody reads
// our stdout: writing never blocks, and past the bound the writer says to stop reading ranks.
TEST(OutputWriter, AReaderThatDoesNotReadBlocksNothing) {
  Pipe out;
  WakeUps wake;
  OutputWriter writer(out.write_end, wake.callback());
  const std::string line = numbered_line(7, 100);
  std::size_t total = 0;
  const auto start = Clock::now();
  while (total <= kMaxQueuedOutput + 256 * 1024) {  // far more than the pipe holds
    writer.write(line);
    total += line.size();
  }
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_GT(writer.queued(), kMaxQueuedOutput);
  ASSERT_TRUE(writer.congested());

  // The reader comes back: the writer says so once it is at half the bound or below (the
  // launcher then reads the ranks' pipes again), and later once it has written everything.
  std::string received;
  std::thread reader([&] { received = out.read_exactly(total); });
  ASSERT_TRUE(wake.wait());
  EXPECT_LE(writer.queued(), kMaxQueuedOutput / 2);
  while (!writer.drained()) {
    ASSERT_TRUE(wake.wait());
  }
  reader.join();
  EXPECT_FALSE(writer.congested());
  ASSERT_EQ(received.size(), total);
  for (std::size_t at = 0; at < total; at += line.size()) {
    ASSERT_EQ(received.compare(at, line.size(), line), 0) << "at byte " << at;
  }
}

// stdout and stderr on one pipe (2>&1): two writers, and no line is split by the other's.
TEST(OutputWriter, TwoWritersOnOnePipeKeepLinesWhole) {
  Pipe out;
  WakeUps wake_out;
  WakeUps wake_err;
  constexpr int kLines = 3000;
  constexpr std::size_t kWidth = 1000;  // several lines per write, never more than PIPE_BUF
  static_assert(kWidth < PIPE_BUF);
  std::string received;
  {
    OutputWriter a(out.write_end, wake_out.callback());
    OutputWriter b(out.write_end, wake_err.callback());
    std::thread reader([&] { received = out.read_exactly(2 * kLines * kWidth); });
    for (int i = 0; i < kLines; ++i) {
      a.write(numbered_line(i, kWidth));
      b.write(numbered_line(kLines + i, kWidth));
    }
    reader.join();
  }
  ASSERT_EQ(received.size(), 2 * kLines * kWidth);
  int next_a = 0;
  int next_b = kLines;
  for (std::size_t at = 0; at < received.size(); at += kWidth) {
    const std::string line = received.substr(at, kWidth);
    const int i = std::stoi(line);
    int& next = i < kLines ? next_a : next_b;
    ASSERT_EQ(i, next) << "line at byte " << at << " is not whole or out of order";
    ASSERT_EQ(line, numbered_line(i, kWidth));
    ++next;
  }
}

TEST(OutputWriter, AReaderThatWentAwayDropsOutput) {
  Pipe out;
  WakeUps wake;
  ::signal(SIGPIPE, SIG_IGN);  // as sempirun does
  OutputWriter writer(out.write_end, wake.callback());
  out.close_read();
  writer.write("lost\n");
  if (!writer.drained()) {
    ASSERT_TRUE(wake.wait());
  }
  EXPECT_TRUE(writer.broken());
  writer.write("also lost\n");
  EXPECT_EQ(writer.queued(), 0u);
  EXPECT_TRUE(writer.drained());
}

// sempirun's last words (e.g. a setup error right after a warning) are not lost at exit.
TEST(OutputWriter, DestructionWaitsBrieflyForWhatIsQueued) {
  Pipe out;
  WakeUps wake;
  {
    OutputWriter writer(out.write_end, wake.callback());
    writer.write("last words\n");
  }
  EXPECT_EQ(out.read_exactly(11), "last words\n");
}

// Interrupted while the reader does not read: what is queued is dropped and the writer goes
// without waiting; its thread stays blocked in write() until the process ends.
TEST(OutputWriter, AbandonedOutputDoesNotHoldUpDestruction) {
  Pipe out;
  WakeUps wake;
  // A minute's final wait: skipping it cannot be mistaken for a slow machine.
  constexpr auto kLongFinalWait = std::chrono::milliseconds(60000);
  const auto start = Clock::now();
  {
    OutputWriter writer(out.write_end, wake.callback(), kLongFinalWait);
    const std::string line = numbered_line(1, 4000);
    for (int i = 0; i < 100; ++i) writer.write(line);  // 400 kB, more than the pipe holds
    writer.abandon();
    const std::size_t in_flight = writer.queued();
    writer.write("after\n");
    EXPECT_LE(writer.queued(), in_flight);
  }
  EXPECT_LT(Clock::now() - start, kLongFinalWait / 2);
  // Unblock the detached thread so it can end: it writes what it had taken, nothing queued.
  out.close_read();
}

}  // namespace
}  // namespace sempi::launch
