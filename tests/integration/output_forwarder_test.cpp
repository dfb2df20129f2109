// Line splitting and tagging of rank output.

#include "launch/output_forwarder.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sempi::launch {
namespace {

struct Collector {
  std::vector<std::string> pieces;
  OutputForwarder::Sink sink() {
    return [this](std::string_view piece) { pieces.emplace_back(piece); };
  }
};

TEST(OutputForwarder, CompleteLinesPassThrough) {
  Collector c;
  OutputForwarder f({}, c.sink());
  f.append("a\nbb\n\nccc\n");
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"a\n", "bb\n", "\n", "ccc\n"}));
  EXPECT_EQ(f.pending(), 0u);
}

TEST(OutputForwarder, LinesSplitAcrossReadsAreJoined) {
  Collector c;
  OutputForwarder f({}, c.sink());
  f.append("hel");
  EXPECT_TRUE(c.pieces.empty());
  EXPECT_EQ(f.pending(), 3u);
  f.append("lo wor");
  f.append("ld\nnext");
  EXPECT_EQ(c.pieces, std::vector<std::string>{"hello world\n"});
  f.append("\n");
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"hello world\n", "next\n"}));
}

TEST(OutputForwarder, ByteAtATime) {
  Collector c;
  OutputForwarder f({"[rank 7] ", true}, c.sink());
  for (const char ch : std::string("ab\ncd\n")) f.append(std::string_view(&ch, 1));
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"[rank 7] ab\n", "[rank 7] cd\n"}));
}

TEST(OutputForwarder, TagsEveryLine) {
  Collector c;
  OutputForwarder f({rank_tag(3), true}, c.sink());
  f.append("x\ny\n");
  EXPECT_EQ(c.pieces, (std::vector<std::string>{"[rank 3] x\n", "[rank 3] y\n"}));
  EXPECT_EQ(rank_tag(4095), "[rank 4095] ");
}

TEST(OutputForwarder, UnterminatedLastLineFlushedAtEof) {
  Collector raw;
  OutputForwarder passthrough({}, raw.sink());
  passthrough.append("line\ntail");
  passthrough.finish();
  EXPECT_EQ(raw.pieces, (std::vector<std::string>{"line\n", "tail"}));  // byte for byte

  Collector shared;
  OutputForwarder terminated({rank_tag(0), true}, shared.sink());
  terminated.append("line\ntail");
  terminated.finish();
  EXPECT_EQ(shared.pieces, (std::vector<std::string>{"[rank 0] line\n", "[rank 0] tail\n"}));
}

TEST(OutputForwarder, FinishWithNothingPendingEmitsNothing) {
  Collector c;
  OutputForwarder f({"p ", true}, c.sink());
  f.finish();
  f.append("a\n");
  f.finish();
  EXPECT_EQ(c.pieces, std::vector<std::string>{"p a\n"});
}

TEST(OutputForwarder, OverlongLineIsEmittedInBoundedPieces) {
  Collector c;
  OutputForwarder f({rank_tag(1), true}, c.sink());
  const std::string big(kMaxForwardedLine * 2 + 10, 'z');
  f.append(big);
  ASSERT_EQ(c.pieces.size(), 2u);
  EXPECT_EQ(c.pieces[0], rank_tag(1) + std::string(kMaxForwardedLine, 'z') + "\n");
  EXPECT_LT(f.pending(), kMaxForwardedLine);
  f.append("\n");
  ASSERT_EQ(c.pieces.size(), 3u);
  EXPECT_EQ(c.pieces[2], rank_tag(1) + std::string(10, 'z') + "\n");
}

TEST(OutputForwarder, OverlongLineWithoutTerminationKeepsBytes) {
  Collector c;
  OutputForwarder f({}, c.sink());
  const std::string big(kMaxForwardedLine + 5, 'q');
  f.append(big + "\n");
  std::string joined;
  for (const auto& p : c.pieces) joined += p;
  EXPECT_EQ(joined, big + "\n");
}

}  // namespace
}  // namespace sempi::launch
