// Frame header and HELLO codecs: round trips and every rejection the decoder must make.

#include <gtest/gtest.h>

#include "sempi/error.hpp"
#include "sempi/version.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"

namespace sempi::transport {
namespace {

constexpr std::uint64_t kMax = 1 << 20;

FrameHeader sample() {
  FrameHeader h;
  h.type = FrameType::rts;
  h.flags = frame_flags::kSynchronous;
  h.op = 7;
  h.context = 0xdeadbeef;
  h.source = 12345;
  h.tag = -17;
  h.sequence = 42;
  h.length = kMax;
  h.aux = 0x0102030405060708ull;
  return h;
}

std::error_code decode(const EncodedHeader& bytes, std::uint64_t expected_seq, FrameHeader& out) {
  return decode_frame_header(bytes, kMax, expected_seq, out);
}

TEST(FrameHeader, RoundTripsEveryField) {
  const auto h = sample();
  const auto bytes = encode_frame_header(h);
  FrameHeader out;
  ASSERT_FALSE(decode(bytes, 42, out));
  EXPECT_EQ(out, h);
}

TEST(FrameHeader, IsLittleEndianOnTheWire) {
  const auto bytes = encode_frame_header(sample());
  EXPECT_EQ(bytes[0], 0x53);  // "SP"
  EXPECT_EQ(bytes[1], 0x50);
  EXPECT_EQ(bytes[2], kProtocolVersion);
  EXPECT_EQ(bytes[3], static_cast<std::uint8_t>(FrameType::rts));
  EXPECT_EQ(bytes[8], 0xef);
  EXPECT_EQ(bytes[11], 0xde);
  EXPECT_EQ(bytes[40], 0x08);
}

TEST(FrameHeader, RejectsBadMagic) {
  auto bytes = encode_frame_header(sample());
  bytes[0] ^= 0xff;
  FrameHeader out;
  EXPECT_EQ(decode(bytes, 42, out), errc::frame_bad_magic);
}

TEST(FrameHeader, RejectsOtherProtocolVersion) {
  auto bytes = encode_frame_header(sample());
  bytes[2] = kProtocolVersion + 1;
  FrameHeader out;
  EXPECT_EQ(decode(bytes, 42, out), errc::frame_bad_version);
}

TEST(FrameHeader, RejectsUnknownTypes) {
  FrameHeader out;
  for (int type : {0, kMaxFrameType + 1, 0xff}) {
    auto bytes = encode_frame_header(sample());
    bytes[3] = static_cast<std::uint8_t>(type);
    EXPECT_EQ(decode(bytes, 42, out), errc::frame_unknown_type) << type;
  }
}

TEST(FrameHeader, FinalizingIsTheHighestKnownType) {
  // DENY, CREDIT (eager credit given back), WITHDRAWN and FINALIZING must decode; the next
  // type must not.
  EXPECT_EQ(kMaxFrameType, static_cast<std::uint8_t>(FrameType::finalizing));
  for (const FrameType type :
       {FrameType::deny, FrameType::credit, FrameType::withdrawn, FrameType::finalizing}) {
    auto h = sample();
    h.type = type;
    h.length = 12;
    FrameHeader out;
    ASSERT_FALSE(decode(encode_frame_header(h), 42, out));
    EXPECT_EQ(out.type, type);
  }
  EXPECT_STREQ(frame_type_name(FrameType::deny), "DENY");
  EXPECT_STREQ(frame_type_name(FrameType::credit), "CREDIT");
  EXPECT_STREQ(frame_type_name(FrameType::withdrawn), "WITHDRAWN");
  EXPECT_STREQ(frame_type_name(FrameType::finalizing), "FINALIZING");
}

TEST(FrameHeader, RejectsUnknownFlagsAndReservedBits) {
  FrameHeader out;
  auto bytes = encode_frame_header(sample());
  bytes[5] = 0x80;
  EXPECT_EQ(decode(bytes, 42, out), errc::frame_bad_reserved);
  bytes = encode_frame_header(sample());
  bytes[22] = 1;
  EXPECT_EQ(decode(bytes, 42, out), errc::frame_bad_reserved);
}

TEST(FrameHeader, LengthLimitIsInclusiveAndOverflowSafe) {
  FrameHeader out;
  auto h = sample();
  h.length = kMax;
  EXPECT_FALSE(decode(encode_frame_header(h), 42, out));
  h.length = kMax + 1;
  EXPECT_EQ(decode(encode_frame_header(h), 42, out), errc::frame_too_large);
  h.length = ~0ull;
  EXPECT_EQ(decode(encode_frame_header(h), 42, out), errc::frame_too_large);
}

TEST(FrameHeader, RejectsSequenceGapsAndReplays) {
  FrameHeader out;
  const auto bytes = encode_frame_header(sample());  // sequence 42
  EXPECT_EQ(decode(bytes, 41, out), errc::frame_bad_sequence);
  EXPECT_EQ(decode(bytes, 43, out), errc::frame_bad_sequence);
}

TEST(FrameHeader, DecodeFailureLeavesOutputUntouched) {
  FrameHeader out;
  out.tag = 99;
  auto bytes = encode_frame_header(sample());
  bytes[3] = 0;
  ASSERT_TRUE(decode(bytes, 42, out));
  EXPECT_EQ(out.tag, 99);
}

Hello sample_hello() {
  Hello h;
  h.job = pki::JobId::random();
  h.rank = 3;
  h.world_size = 4;
  h.policy_digest.fill(0xab);
  h.limits.max_frame_payload = 1 << 20;
  h.limits.max_unexpected_bytes = 5 << 20;
  return h;
}

TEST(Hello, RoundTrips) {
  const auto h = sample_hello();
  const auto bytes = encode_hello(h);
  Hello out;
  ASSERT_FALSE(decode_hello(bytes, out));
  EXPECT_EQ(out, h);
}

TEST(Hello, RejectsWrongSizeMagicVersionAndInconsistentFields) {
  Hello out;
  auto bytes = encode_hello(sample_hello());
  EXPECT_EQ(decode_hello(std::span(bytes).first(kHelloSize - 1), out), errc::hello_invalid);

  auto bad = bytes;
  bad[0] ^= 1;
  EXPECT_EQ(decode_hello(bad, out), errc::hello_invalid);

  bad = bytes;
  bad[4] = static_cast<std::uint8_t>(kProtocolVersion + 1);
  EXPECT_EQ(decode_hello(bad, out), errc::protocol_version_mismatch);

  auto h = sample_hello();
  h.rank = h.world_size;
  EXPECT_EQ(decode_hello(encode_hello(h), out), errc::hello_invalid);

  h = sample_hello();
  h.limits.max_frame_payload = kMinFramePayload - 1;
  EXPECT_EQ(decode_hello(encode_hello(h), out), errc::hello_invalid);
}

TEST(ErrorCategory, MessagesAreSpecific) {
  EXPECT_NE(make_error_code(errc::peer_wrong_job).message(),
            make_error_code(errc::peer_wrong_rank).message());
  EXPECT_STREQ(error_category().name(), "sempi");
  EXPECT_STREQ(error_class_name(ErrorClass::rank), "MPI_ERR_RANK");
}

}  // namespace
}  // namespace sempi::transport
