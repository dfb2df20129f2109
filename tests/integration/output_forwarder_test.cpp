// Line splitting and tagging of rank output.

#include "launch/output_forwarder.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sempi::launch {
namespace {

using Clock = OutputForwarder::Clock;
const Clock::time_point t0{};  // the tests' clock: times are given, never read

struct Collector {
  std::vector<std::string> pieces;
  OpenLine line;  // one output: every forwarder of a test writes to it
  OutputForwarder::Sink sink() {
    return [this](std::string_view piece) { pieces.emplace_back(piece); };
  }
  std::string joined() const {
    std::string all;
    for (const auto& p : pieces) all += p;
    return all;
  }
};

TEST(OutputForwarder, CompleteLinesPassThrough) {
  Collector c;
  OutputForwarder f({}, c.sink(), c.line);
  f.append("a\nbb\n\nccc\n", t0);
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"a\n", "bb\n", "\n", "ccc\n"}));
  EXPECT_EQ(f.pending(), 0u);
}

TEST(OutputForwarder, LinesSplitAcrossReadsAreJoined) {
  Collector c;
  OutputForwarder f({"", true}, c.sink(), c.line);  // a shared output: lines are kept whole
  f.append("hel", t0);
  EXPECT_TRUE(c.pieces.empty());
  EXPECT_EQ(f.pending(), 3u);
  f.append("lo wor", t0);
  f.append("ld\nnext", t0);
  EXPECT_EQ(c.pieces, std::vector<std::string>{"hello world\n"});
  f.append("\n", t0);
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"hello world\n", "next\n"}));
}

TEST(OutputForwarder, ByteAtATime) {
  Collector c;
  OutputForwarder f({"[rank 7] ", true}, c.sink(), c.line);
  for (const char ch : std::string("ab\ncd\n")) f.append(std::string_view(&ch, 1), t0);
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"[rank 7] ab\n", "[rank 7] cd\n"}));
}

TEST(OutputForwarder, TagsEveryLine) {
  Collector c;
  OutputForwarder f({rank_tag(3), true}, c.sink(), c.line);
  f.append("x\ny\n", t0);
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"[rank 3] x\n", "[rank 3] y\n"}));
  EXPECT_EQ(rank_tag(4095), "[rank 4095] ");
}

TEST(OutputForwarder, UnterminatedLastLineFlushedAtEof) {
  Collector raw;
  OutputForwarder passthrough({}, raw.sink(), raw.line);
  passthrough.append("line\ntail", t0);
  passthrough.finish();
  EXPECT_EQ(raw.pieces, (std::vector<std::string>{"line\n", "tail"}));  // byte for byte

  Collector shared;
  OutputForwarder terminated({rank_tag(0), true}, shared.sink(), shared.line);
  terminated.append("line\ntail", t0);
  terminated.finish();
  EXPECT_EQ(shared.pieces, (std::vector<std::string>{"[rank 0] line\n", "[rank 0] tail\n"}));
}

TEST(OutputForwarder, FinishWithNothingPendingEmitsNothing) {
  Collector c;
  OutputForwarder f({"p ", true}, c.sink(), c.line);
  f.finish();
  f.append("a\n", t0);
  f.finish();
  EXPECT_EQ(c.pieces, std::vector<std::string>{"p a\n"});
}

TEST(OutputForwarder, OverlongLineIsEmittedInBoundedPieces) {
  Collector c;
  OutputForwarder f({rank_tag(1), true}, c.sink(), c.line);
  const std::string big(kMaxForwardedLine * 2 + 10, 'z');
  f.append(big, t0);
  ASSERT_EQ(c.pieces.size(), 2u);
  // Pieces of one open line: the tag once, no newline inserted while nobody else writes.
  EXPECT_EQ(c.pieces[0], rank_tag(1) + std::string(kMaxForwardedLine, 'z'));
  EXPECT_EQ(c.pieces[1], std::string(kMaxForwardedLine, 'z'));
  EXPECT_LT(f.pending(), kMaxForwardedLine);
  f.append("\n", t0);
  ASSERT_EQ(c.pieces.size(), 3u);
  EXPECT_EQ(c.pieces[2], std::string(10, 'z') + "\n");
}

TEST(OutputForwarder, OverlongLineWithoutTerminationKeepsBytes) {
  Collector c;
  OutputForwarder f({}, c.sink(), c.line);
  const std::string big(kMaxForwardedLine + 5, 'q');
  f.append(big + "\n", t0);
  std::string joined;
  for (const auto& p : c.pieces) joined += p;
  EXPECT_EQ(joined, big + "\n");
}

// A partial line (a prompt, a progress bar) of a rank that shares its output waits
// kPartialLineHold for its newline, then goes out as an open line that the rank continues.
TEST(OutputForwarder, APartialLineGoesOutAfterTheHold) {
  Collector c;
  OutputForwarder f({rank_tag(2), true}, c.sink(), c.line);
  f.append("progress: ", t0);
  EXPECT_EQ(f.partial_due(), t0 + kPartialLineHold);
  f.flush_partial(t0 + kPartialLineHold - std::chrono::milliseconds(1));
  EXPECT_TRUE(c.pieces.empty());
  f.flush_partial(t0 + kPartialLineHold);
  EXPECT_EQ(c.pieces, std::vector<std::string>{"[rank 2] progress: "});
  EXPECT_FALSE(f.partial_due());
  f.append("..", t0 + std::chrono::seconds(1));
  f.flush_partial(t0 + std::chrono::seconds(2));
  f.append(". done\nnext\n", t0 + std::chrono::seconds(3));
  EXPECT_EQ(c.joined(), "[rank 2] progress: ... done\n[rank 2] next\n");
}

// Lines never mix: a piece of another rank first ends the open line, and the rank's next piece
// starts a line of its own, tagged again.
TEST(OutputForwarder, AnotherRanksPieceEndsTheOpenLine) {
  Collector c;
  OutputForwarder a({rank_tag(0), true}, c.sink(), c.line);
  OutputForwarder b({rank_tag(1), true}, c.sink(), c.line);
  a.append("waiting", t0);
  a.flush_partial(t0 + kPartialLineHold);
  b.append("b's line\n", t0);
  a.append(" ... done\n", t0);
  EXPECT_EQ(c.joined(), "[rank 0] waiting\n[rank 1] b's line\n[rank 0]  ... done\n");
  // Left open at the end of the stream, the line is ended there.
  a.append("last", t0);
  a.flush_partial(t0 + kPartialLineHold);
  a.finish();
  b.finish();
  EXPECT_EQ(c.pieces.back(), "\n");
  EXPECT_TRUE(c.joined().ends_with("[rank 0] last\n"));
}

// A single untagged rank has the output to itself: a partial line passes through at once, byte
// for byte, and is only marked open (sempirun's own messages then start a line of their own).
TEST(OutputForwarder, ASingleUntaggedRankPassesPartialLinesAtOnce) {
  Collector c;
  OutputForwarder f({}, c.sink(), c.line);
  f.append("Enter: ", t0);
  EXPECT_EQ(c.pieces, std::vector<std::string>{"Enter: "});
  EXPECT_FALSE(f.partial_due());
  EXPECT_EQ(c.line.end_for(&c), "\n");
  EXPECT_EQ(c.line.end_for(&c), "");
}

}  // namespace
}  // namespace sempi::launch
