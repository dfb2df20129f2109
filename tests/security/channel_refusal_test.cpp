// Every peer the channel must refuse, each with its own error and without delivering any data:
// no certificate, foreign CA, another job, wrong rank, out-of-range and duplicate ranks, expired
// and not-yet-valid certificates, TLS 1.2, policy mismatch, plaintext, stalled handshakes, the
// CA's own certificate as identity; and hostile frames after a valid handshake.

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <future>

#include "sempi/error.hpp"
#include "support/established_peer.hpp"

namespace sempi::test {
namespace {

using namespace std::chrono_literals;
using transport::Channel;
using transport::ChannelError;
using transport::FrameHeader;
using transport::FrameType;

// A sink that records whether anything was delivered.
class RecordingSink final : public transport::FrameSink {
 public:
  std::span<std::uint8_t> payload_buffer(const FrameHeader& h) override {
    buffer_.resize(h.length);
    return buffer_;
  }
  std::error_code on_frame(const FrameHeader&, std::span<std::uint8_t>) override {
    ++frames;
    return {};
  }
  int frames = 0;

 private:
  std::vector<std::uint8_t> buffer_;
};

// The attacker's client presents `creds` (if any) and tries to read data afterwards.
std::size_t attack_with(const TestJob& job, Server& server, const Credentials* creds,
                        int max_version = TLS1_3_VERSION) {
  RawClientOptions options{job.ca().certificate()};
  if (creds != nullptr) {
    options.cert = creds->cert;
    options.key = creds->key.get();
  }
  options.max_version = max_version;
  RawTlsClient client(server.endpoint(), options);
  EXPECT_TRUE(client.tcp_connected());
  if (!client.handshake()) return 0;
  // In TLS 1.3 the client finishes first; the server's verdict arrives as an alert or EOF.
  return client.drain();
}

TEST(ChannelRefusal, ClientWithoutCertificate) {
  TestJob job(4);
  Server server(job);
  EXPECT_EQ(attack_with(job, server, nullptr), 0u);
  EXPECT_EQ(server.error().code, errc::peer_no_certificate);
  EXPECT_EQ(server.channel(), nullptr);
}

TEST(ChannelRefusal, CertificateFromAnotherCa) {
  TestJob job(4);
  TestJob foreign(4);
  const auto creds = foreign.issue(1);
  Server server(job);
  EXPECT_EQ(attack_with(job, server, &creds), 0u);
  EXPECT_EQ(server.error().code, errc::peer_untrusted);
}

TEST(ChannelRefusal, CertificateOfAnotherJobUnderTheSameCa) {
  TestJob job(4);
  const auto creds =
      job.issue(1, [](pki::IssueOptions& o) { o.job_override = pki::JobId::random(); });
  Server server(job);
  EXPECT_EQ(attack_with(job, server, &creds), 0u);
  EXPECT_EQ(server.error().code, errc::peer_wrong_job);
}

TEST(ChannelRefusal, DialerRefusesServerWithWrongRank) {
  TestJob job(4);
  const auto impostor = job.endpoint(2);  // listens where rank 1 should be
  transport::Listener listener(loopback_any_port());
  auto accepted = std::async(std::launch::async, [&] {
    std::error_code ec;
    auto fd = listener.accept(long_deadline(), ec);
    ChannelError error;
    auto ch = Channel::accept(impostor, std::move(fd), [](std::uint32_t) { return true; },
                              long_deadline(), error);
    return ch != nullptr;
  });
  ChannelError error;
  auto client = Channel::connect(job.endpoint(0), listener.endpoint(), 1, long_deadline(), error);
  EXPECT_EQ(client, nullptr);
  EXPECT_EQ(error.code, errc::peer_wrong_rank) << error.message();
  EXPECT_FALSE(accepted.get());
}

TEST(ChannelRefusal, RankOutsideTheJob) {
  TestJob job(4);
  const auto creds = job.issue(4);
  Server server(job);
  EXPECT_EQ(attack_with(job, server, &creds), 0u);
  EXPECT_EQ(server.error().code, errc::peer_rank_out_of_range);
}

TEST(ChannelRefusal, DuplicateRank) {
  TestJob job(4);
  Server server(job, [](std::uint32_t rank) { return rank != 1; });  // rank 1 already connected
  ChannelError error;
  auto client = Channel::connect(job.endpoint(1), server.endpoint(), 0, long_deadline(), error);
  EXPECT_EQ(server.error().code, errc::peer_duplicate_rank);
  if (client) {
    // The client finished before the server's verdict; it must see the channel die, not data.
    FrameHeader h;
    std::vector<std::uint8_t> payload;
    EXPECT_TRUE(client->receive_frame(h, payload, long_deadline()));
  }
}

TEST(ChannelRefusal, ExpiredCertificate) {
  TestJob job(4);
  const auto creds = job.issue(1, [](pki::IssueOptions& o) {
    o.not_before = std::chrono::system_clock::now() - 48h;
    o.not_after = std::chrono::system_clock::now() - 24h;
  });
  Server server(job);
  EXPECT_EQ(attack_with(job, server, &creds), 0u);
  EXPECT_EQ(server.error().code, errc::peer_cert_expired);
}

TEST(ChannelRefusal, NotYetValidCertificate) {
  TestJob job(4);
  const auto creds = job.issue(1, [](pki::IssueOptions& o) {
    o.not_before = std::chrono::system_clock::now() + 24h;
    o.not_after = std::chrono::system_clock::now() + 48h;
  });
  Server server(job);
  EXPECT_EQ(attack_with(job, server, &creds), 0u);
  EXPECT_EQ(server.error().code, errc::peer_cert_not_yet_valid);
}

TEST(ChannelRefusal, Tls12OnlyClient) {
  TestJob job(4);
  const auto creds = job.issue(1);
  Server server(job);
  EXPECT_EQ(attack_with(job, server, &creds, TLS1_2_VERSION), 0u);
  EXPECT_EQ(server.error().code, errc::tls_version_refused);
}

TEST(ChannelRefusal, PolicyDigestMismatchIsRefusedByBothSides) {
  pki::PolicyDigest ours{};
  ours.fill(1);
  TestJob job(4, ours);
  Server server(job);
  const auto creds = job.issue(1, [](pki::IssueOptions& o) { o.policy_digest.fill(2); });
  auto local = job.endpoint(0);  // same CA and job, but this rank believes in policy 2
  local.tls = transport::TlsContext::create(
      transport::TlsConfig{job.ca().certificate(), creds.cert, creds.key});
  local.hello.rank = 1;
  local.hello.policy_digest.fill(2);
  ChannelError error;
  auto client = Channel::connect(local, server.endpoint(), 0, long_deadline(), error);
  EXPECT_EQ(client, nullptr);
  EXPECT_EQ(error.code, errc::peer_policy_mismatch);
  EXPECT_EQ(server.error().code, errc::peer_policy_mismatch);
}

TEST(ChannelRefusal, PlaintextClient) {
  TestJob job(4);
  Server server(job);
  std::error_code ec;
  auto fd = transport::tcp_connect(server.endpoint(), long_deadline(), ec);
  ASSERT_TRUE(fd.valid());
  const char request[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(::send(fd.get(), request, sizeof request - 1, MSG_NOSIGNAL), 0);
  const ChannelError error = server.error();
  EXPECT_EQ(error.code, errc::not_tls);
  EXPECT_NE(error.detail.find("first byte 0x47 is not a TLS handshake"), std::string::npos)
      << error.detail;  // 'G', in hex
}

TEST(ChannelRefusal, ClientThatNeverStartsTheHandshake) {
  TestJob job(4);
  Server server(job, nullptr, 500ms);
  std::error_code ec;
  auto fd = transport::tcp_connect(server.endpoint(), long_deadline(), ec);
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(server.error().code, errc::timeout);
}

TEST(ChannelRefusal, ClientThatStallsMidHandshake) {
  TestJob job(4);
  Server server(job, nullptr, 500ms);
  std::error_code ec;
  auto fd = transport::tcp_connect(server.endpoint(), long_deadline(), ec);
  ASSERT_TRUE(fd.valid());
  const std::uint8_t partial_record[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  ASSERT_GT(::send(fd.get(), partial_record, sizeof partial_record, MSG_NOSIGNAL), 0);
  EXPECT_EQ(server.error().code, errc::timeout);
}

TEST(ChannelRefusal, CaCertificateAsRankIdentity) {
  TestJob job(4);
  // The attacker somehow holds the CA key: the CA certificate still names no rank.
  Credentials creds{job.ca().certificate(),
                    std::make_shared<const pki::PrivateKey>(
                        pki::PrivateKey::from_pem(job.ca().key().to_pem()))};
  Server server(job);
  EXPECT_EQ(attack_with(job, server, &creds), 0u);
  const auto code = server.error().code;
  EXPECT_TRUE(code == errc::peer_bad_usage || code == errc::peer_bad_identity ||
              code == errc::peer_untrusted)
      << code.message();
}

// An authenticated peer announcing a HELLO of many megabytes: refused from the header, before
// anything near that size is allocated (the frame limit applies only after HELLO).
TEST(ChannelRefusal, OversizeHello) {
  TestJob job(4);
  Server server(job);
  const auto creds = job.issue(1);
  RawClientOptions options{job.ca().certificate()};
  options.cert = creds.cert;
  options.key = creds.key.get();
  RawTlsClient client(server.endpoint(), options);
  ASSERT_TRUE(client.handshake());
  transport::FrameHeader h;
  h.type = FrameType::hello;
  h.length = 32ull << 20;  // within the 64 MiB frame limit
  client.write(transport::encode_frame_header(h));
  EXPECT_EQ(server.error().code, errc::frame_too_large);
}

// --- hostile frames after a valid handshake -------------------------------------------------

// Hands the established raw TLS stream to `attack`, and returns what the server's channel
// reports when it reads.
template <class Attack>
std::error_code server_error_after(Attack&& attack, int& frames_delivered) {
  EstablishedPeer peer;
  Channel* channel = peer.channel();
  if (channel == nullptr) return errc::connection_failed;
  attack(peer.client);
  RecordingSink sink;
  const auto deadline = long_deadline();
  std::error_code ec;
  while (!(ec = channel->read_available(sink))) {
    if (!channel->has_buffered_input() &&
        transport::wait_fd(channel->native_handle(), transport::WaitFor::read, deadline)) {
      return errc::timeout;
    }
  }
  frames_delivered = sink.frames;
  return ec;
}

// A peer that sends the first bytes of a TLS record and then nothing: the reader must wait
// for the socket and honour its deadline, not spin on the partial record.
TEST(HostileFrames, PeerStallingMidRecordTimesOut) {
  EstablishedPeer peer;
  Channel* channel = peer.channel();
  ASSERT_NE(channel, nullptr);
  // An application-data record header announcing 200 bytes, then 20 of them, in clear.
  const std::uint8_t partial[25] = {0x17, 0x03, 0x03, 0x00, 200};
  ASSERT_EQ(::send(peer.client.fd(), partial, sizeof partial, MSG_NOSIGNAL), 25);
  auto reader = std::async(std::launch::async, [&] {
    FrameHeader h;
    std::vector<std::uint8_t> payload;
    return channel->receive_frame(h, payload, deadline_in(std::chrono::seconds(2)));
  });
  if (reader.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ::shutdown(peer.client.fd(), SHUT_RDWR);  // unblock the reader so the test can end
    reader.wait();
    FAIL() << "receive_frame did not honour its deadline with a partial record buffered";
  }
  EXPECT_EQ(reader.get(), errc::timeout);
  EXPECT_FALSE(channel->has_buffered_input());
}

FrameHeader valid_header(std::uint64_t sequence) {
  FrameHeader h;
  h.type = FrameType::eager;
  h.sequence = sequence;
  return h;
}

TEST(HostileFrames, TruncatedHeaderThenClose) {
  int frames = -1;
  const auto ec = server_error_after(
      [](RawTlsClient& c) {
        const auto bytes = transport::encode_frame_header(valid_header(1));
        c.write(std::span(bytes).first(20));
        c.close_notify();
      },
      frames);
  EXPECT_EQ(ec, errc::connection_closed);
  EXPECT_EQ(frames, 0);
}

TEST(HostileFrames, TruncatedPayloadThenCloseIsNeverDelivered) {
  int frames = -1;
  const auto ec = server_error_after(
      [](RawTlsClient& c) {
        auto h = valid_header(1);
        h.length = 1000;
        const auto bytes = transport::encode_frame_header(h);
        c.write(bytes);
        c.write(std::vector<std::uint8_t>(500, 7));
        c.close_notify();
      },
      frames);
  EXPECT_EQ(ec, errc::connection_closed);
  EXPECT_EQ(frames, 0);
}

TEST(HostileFrames, OversizeLength) {
  int frames = -1;
  const auto ec = server_error_after(
      [](RawTlsClient& c) {
        auto h = valid_header(1);
        h.length = (64ull << 20) + 1;
        c.write(transport::encode_frame_header(h));
      },
      frames);
  EXPECT_EQ(ec, errc::frame_too_large);
  EXPECT_EQ(frames, 0);
}

TEST(HostileFrames, UnknownType) {
  int frames = -1;
  const auto ec = server_error_after(
      [](RawTlsClient& c) {
        auto bytes = transport::encode_frame_header(valid_header(1));
        bytes[3] = 42;
        c.write(bytes);
      },
      frames);
  EXPECT_EQ(ec, errc::frame_unknown_type);
  EXPECT_EQ(frames, 0);
}

TEST(HostileFrames, GarbageAfterHello) {
  int frames = -1;
  const auto ec = server_error_after(
      [](RawTlsClient& c) {
        std::vector<std::uint8_t> garbage(4096);
        for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<std::uint8_t>(i * 131 + 7);
        c.write(garbage);
      },
      frames);
  EXPECT_EQ(ec, errc::frame_bad_magic);
  EXPECT_EQ(frames, 0);
}

TEST(HostileFrames, SequenceGapAfterValidFrame) {
  int frames = -1;
  const auto ec = server_error_after(
      [](RawTlsClient& c) {
        c.write_frame(valid_header(1), std::vector<std::uint8_t>(10, 1));
        c.write_frame(valid_header(5), std::vector<std::uint8_t>(10, 2));
      },
      frames);
  EXPECT_EQ(ec, errc::frame_bad_sequence);
  EXPECT_EQ(frames, 1);  // the valid frame before the gap, and nothing after it
}

}  // namespace
}  // namespace sempi::test
