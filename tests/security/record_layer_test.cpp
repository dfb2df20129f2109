// sempi's TLS 1.3 record layer against OpenSSL's, on real connections: every record one writes,
// the other reads, for each permitted suite and sizes around the record limit; key updates in
// both directions; close_notify both ways; and hostile records, each refused with its own error.

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <string>

#include "sempi/error.hpp"
#include "support/established_peer.hpp"
#include "support/rank_check.hpp"
#include "transport/record_layer.hpp"
#include "transport/record_protection.hpp"
#include "transport/socket_buffers.hpp"

namespace sempi::test {
namespace {

using transport::FrameHeader;
using transport::FrameType;

// 48-byte frame headers: sizes that put frames just under, at and over one record's 2^14 bytes.
const std::vector<std::size_t> kSizes = {0,     1,     100,   16336, 16337,
                                         16384, 70000, 1 << 20};

FrameHeader eager(std::uint64_t sequence) {
  FrameHeader h;
  h.type = FrameType::eager;
  h.sequence = sequence;
  return h;
}

// Counts the KeyUpdate messages OpenSSL receives on `ssl`.
int key_updates_received = 0;
void count_key_updates(int write_p, int, int content_type, const void* buf, std::size_t len,
                       SSL*, void*) {
  if (write_p == 0 && content_type == SSL3_RT_HANDSHAKE && len > 0 &&
      static_cast<const std::uint8_t*>(buf)[0] == SSL3_MT_KEY_UPDATE) {
    ++key_updates_received;
  }
}

// sempi sends `count` frames of each size; OpenSSL's record layer must read them all intact.
void sempi_to_openssl(EstablishedPeer& peer, int count = 1) {
  auto* channel = peer.channel();
  ASSERT_NE(channel, nullptr);
  auto sender = std::async(std::launch::async, [&] {
    std::uint64_t sequence = 1;
    for (int round = 0; round < count; ++round) {
      for (std::size_t i = 0; i < kSizes.size(); ++i) {
        const auto payload = pattern(kSizes[i], static_cast<std::uint8_t>(i));
        if (auto ec = channel->send_frame(eager(sequence++), payload, long_deadline()); ec) return ec;
      }
    }
    return std::error_code{};
  });
  std::uint64_t sequence = 1;
  for (int round = 0; round < count; ++round) {
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      std::vector<std::uint8_t> payload;
      ASSERT_TRUE(peer.client.read_frame(payload, sequence++)) << "size " << kSizes[i];
      EXPECT_EQ(payload, pattern(kSizes[i], static_cast<std::uint8_t>(i))) << "size " << kSizes[i];
    }
  }
  EXPECT_FALSE(sender.get());
}

// OpenSSL sends one frame of each size; sempi must read them all intact.
void openssl_to_sempi(EstablishedPeer& peer, std::uint64_t first_sequence = 1) {
  auto* channel = peer.channel();
  ASSERT_NE(channel, nullptr);
  auto receiver = std::async(std::launch::async, [&] {
    std::vector<std::vector<std::uint8_t>> received;
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      FrameHeader h;
      std::vector<std::uint8_t> payload;
      if (channel->receive_frame(h, payload, long_deadline())) break;
      received.push_back(std::move(payload));
    }
    return received;
  });
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    ASSERT_TRUE(peer.client.write_frame(eager(first_sequence + i),
                                        pattern(kSizes[i], static_cast<std::uint8_t>(i + 7))));
  }
  const auto received = receiver.get();
  ASSERT_EQ(received.size(), kSizes.size()) << channel->failure().message();
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    EXPECT_EQ(received[i], pattern(kSizes[i], static_cast<std::uint8_t>(i + 7))) << kSizes[i];
  }
}

class RecordLayerInterop : public ::testing::TestWithParam<std::string> {};

TEST_P(RecordLayerInterop, EveryRecordSempiWritesOpenSslReads) {
  EstablishedPeer peer({}, [](RawClientOptions& o) { o.ciphersuites = GetParam(); });
  ASSERT_NE(peer.channel(), nullptr);
  ASSERT_EQ(peer.channel()->cipher(), GetParam());
  sempi_to_openssl(peer);
}

TEST_P(RecordLayerInterop, EveryRecordOpenSslWritesSempiReads) {
  EstablishedPeer peer({}, [](RawClientOptions& o) { o.ciphersuites = GetParam(); });
  ASSERT_NE(peer.channel(), nullptr);
  ASSERT_EQ(peer.channel()->cipher(), GetParam());
  openssl_to_sempi(peer);
}

TEST_P(RecordLayerInterop, SempiUpdatesItsKeyAndOpenSslFollows) {
  EstablishedPeer peer([](transport::LocalEndpoint& local) { local.rekey_after_records = 3; },
                       [](RawClientOptions& o) { o.ciphersuites = GetParam(); });
  ASSERT_NE(peer.channel(), nullptr);
  key_updates_received = 0;
  SSL_set_msg_callback(peer.client.ssl(), count_key_updates);
  sempi_to_openssl(peer, 2);
  // 16 frames of up to 1 MiB are well over 3 records per key: many updates, all followed.
  EXPECT_GE(key_updates_received, 20);
}

INSTANTIATE_TEST_SUITE_P(Suites, RecordLayerInterop,
                         ::testing::Values("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                           "TLS_CHACHA20_POLY1305_SHA256"),
                         [](const auto& suite) { return suite.param.substr(4); });

TEST(RecordLayer, KeyUpdateRequestedByOpenSslIsFollowedAndAnswered) {
  EstablishedPeer peer;
  ASSERT_NE(peer.channel(), nullptr);
  key_updates_received = 0;
  SSL_set_msg_callback(peer.client.ssl(), count_key_updates);
  // OpenSSL's next record carries the KeyUpdate; everything after it uses the new key, which
  // sempi must follow to read the frames at all.
  ASSERT_EQ(SSL_key_update(peer.client.ssl(), SSL_KEY_UPDATE_REQUESTED), 1);
  openssl_to_sempi(peer);
  // The peer asked: sempi's next records must start with its own KeyUpdate.
  sempi_to_openssl(peer);
  EXPECT_EQ(key_updates_received, 1);
  // Not asked: no answer.
  ASSERT_EQ(SSL_key_update(peer.client.ssl(), SSL_KEY_UPDATE_NOT_REQUESTED), 1);
  openssl_to_sempi(peer, 1 + kSizes.size());
  EXPECT_EQ(key_updates_received, 1);
}

TEST(RecordLayer, CloseNotifyFromOpenSslClosesTheChannel) {
  EstablishedPeer peer;
  auto* channel = peer.channel();
  ASSERT_NE(channel, nullptr);
  peer.client.close_notify();
  FrameHeader h;
  std::vector<std::uint8_t> payload;
  EXPECT_EQ(channel->receive_frame(h, payload, long_deadline()), errc::connection_closed);
  EXPECT_EQ(channel->failure().detail, "peer closed the channel");
}

TEST(RecordLayer, CloseNotifyFromSempiReachesOpenSsl) {
  EstablishedPeer peer;
  auto* channel = peer.channel();
  ASSERT_NE(channel, nullptr);
  channel->shutdown();
  std::uint8_t byte = 0;
  const int n = SSL_read(peer.client.ssl(), &byte, 1);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(SSL_get_error(peer.client.ssl(), n), SSL_ERROR_ZERO_RETURN);
}

// --- hostile records: raw bytes on the socket after a valid handshake and HELLO --------------

// Sends `bytes` in clear on the established connection; returns the channel's error.
transport::ChannelError refusal_of(std::vector<std::uint8_t> bytes) {
  EstablishedPeer peer;
  auto* channel = peer.channel();
  if (channel == nullptr) return {errc::connection_failed, "no channel"};
  EXPECT_EQ(::send(peer.client.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  FrameHeader h;
  std::vector<std::uint8_t> payload;
  EXPECT_TRUE(channel->receive_frame(h, payload, long_deadline()));
  return channel->failure();
}

std::vector<std::uint8_t> record(std::uint8_t type, std::size_t body_size) {
  std::vector<std::uint8_t> bytes = {type, 3, 3, static_cast<std::uint8_t>(body_size >> 8),
                                     static_cast<std::uint8_t>(body_size)};
  const auto body = pattern(body_size, 99);
  bytes.insert(bytes.end(), body.begin(), body.end());
  return bytes;
}

TEST(RecordLayerRefusal, ForgedRecordFailsAuthentication) {
  const auto error = refusal_of(record(0x17, 100));
  EXPECT_EQ(error.code, errc::tls_io_error);
  EXPECT_NE(error.detail.find("bad_record_mac"), std::string::npos) << error.detail;
}

TEST(RecordLayerRefusal, OversizeRecordIsRefusedBeforeItArrives) {
  auto bytes = record(0x17, 0);
  bytes[3] = 0x48;  // 18432 bytes announced, over 2^14 + 256; none sent
  const auto error = refusal_of(bytes);
  EXPECT_EQ(error.code, errc::tls_io_error);
  EXPECT_NE(error.detail.find("record_overflow"), std::string::npos) << error.detail;
}

TEST(RecordLayerRefusal, PlaintextHandshakeRecordAfterTheHandshake) {
  const auto error = refusal_of(record(0x16, 40));
  EXPECT_EQ(error.code, errc::tls_io_error);
  EXPECT_NE(error.detail.find("record type 22"), std::string::npos) << error.detail;
}

TEST(RecordLayerRefusal, RecordTooShortToCarryATag) {
  const auto error = refusal_of(record(0x17, 10));
  EXPECT_EQ(error.code, errc::tls_io_error);
  EXPECT_NE(error.detail.find("too short"), std::string::npos) << error.detail;
}

TEST(RecordLayerRefusal, PeerClosingMidRecordIsALostConnection) {
  EstablishedPeer peer;
  auto* channel = peer.channel();
  ASSERT_NE(channel, nullptr);
  const auto bytes = record(0x17, 200);
  ASSERT_EQ(::send(peer.client.fd(), bytes.data(), 50, MSG_NOSIGNAL), 50);
  ::shutdown(peer.client.fd(), SHUT_WR);
  FrameHeader h;
  std::vector<std::uint8_t> payload;
  EXPECT_EQ(channel->receive_frame(h, payload, long_deadline()), errc::connection_closed);
  EXPECT_NE(channel->failure().detail.find("without close_notify"), std::string::npos)
      << channel->failure().detail;
}

// --- the record layer alone: records sealed here with the peer's keys, read over a socketpair --

using transport::ContentType;
using transport::RecordLayer;
using transport::RecordProtection;

std::unique_ptr<RecordProtection> test_keys(std::uint8_t secret_byte,
                                            RecordProtection::Direction direction) {
  static SSL_CTX* const ctx = SSL_CTX_new(TLS_method());
  static SSL* const ssl = SSL_new(ctx);
  static const unsigned char kAes128Gcm[2] = {0x13, 0x01};
  const std::vector<std::uint8_t> secret(32, secret_byte);
  std::string error;
  auto keys = RecordProtection::create(SSL_CIPHER_find(ssl, kAes128Gcm), secret, direction, error);
  EXPECT_NE(keys, nullptr) << error;
  return keys;
}

// The peer's sealer and a RecordLayer reading what it seals through a socketpair.
struct LocalRecords {
  int fds[2] = {-1, -1};
  std::unique_ptr<RecordProtection> peer = test_keys(1, RecordProtection::Direction::seal);
  std::unique_ptr<transport::SocketBuffers> io;
  std::unique_ptr<RecordLayer> reader;

  LocalRecords() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    io = std::make_unique<transport::SocketBuffers>(fds[0]);
    reader = std::make_unique<RecordLayer>(*io, test_keys(2, RecordProtection::Direction::seal),
                                           test_keys(1, RecordProtection::Direction::open));
  }
  ~LocalRecords() {
    reader.reset();
    ::close(fds[0]);
    ::close(fds[1]);
  }
  // Seals content || type || `padding` zeros with the peer's next sequence number and sends it.
  void send(ContentType type, std::vector<std::uint8_t> content, std::size_t padding = 0) {
    if (padding > 0) {
      content.push_back(static_cast<std::uint8_t>(type));
      content.insert(content.end(), padding - 1, 0);
      type = static_cast<ContentType>(0);  // the last padding byte
    }
    std::vector<std::uint8_t> wire(content.size() + transport::kRecordOverhead);
    ASSERT_TRUE(peer->seal(type, content, {}, wire.data()));
    ASSERT_EQ(::send(fds[1], wire.data(), wire.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(wire.size()));
  }
  void send_key_update() {
    send(ContentType::handshake, {24, 0, 0, 1, 0});
    std::string error;
    ASSERT_TRUE(peer->update(error)) << error;
  }
};

// The alert the reader sent back: the description byte of the next record it wrote, opened
// with its keys (-1 if there is none or it is not an alert).
int alert_sent_back(LocalRecords& records) {
  std::vector<std::uint8_t> wire(transport::kRecordOverhead + 64);
  const ssize_t n = ::recv(records.fds[1], wire.data(), wire.size(), 0);
  if (n < static_cast<ssize_t>(transport::kRecordHeaderSize)) return -1;
  const auto opener = test_keys(2, RecordProtection::Direction::open);
  const std::span body(wire.data() + transport::kRecordHeaderSize,
                       static_cast<std::size_t>(n) - transport::kRecordHeaderSize);
  if (body.size() != 3 + transport::kAeadTagSize) return -1;  // level, description, type
  std::vector<std::uint8_t> plain(3);
  if (!opener->open(wire.data(), body, plain, nullptr) || plain[2] != 21) return -1;
  return plain[1];
}

TEST(RecordLayerAlone, MalformedControlRecordsGetTheAlertsTheRfcNames) {
  struct Case {
    ContentType type;
    std::vector<std::uint8_t> content;
    int alert;
  };
  const Case cases[] = {
      {ContentType::alert, {}, 10},                        // empty alert: unexpected_message
      {ContentType::handshake, {}, 10},                    // empty handshake: unexpected_message
      {ContentType::handshake, {24, 0, 0, 1, 2}, 47},      // request_update 2: illegal_parameter
      {ContentType::handshake, {24, 0, 0, 2, 0, 0}, 50},   // wrong length: decode_error
      {ContentType::alert, {2, 10, 0}, 50},                // three-byte alert: decode_error
  };
  for (const auto& c : cases) {
    LocalRecords records;
    records.send(c.type, c.content);
    std::uint8_t byte = 0;
    EXPECT_EQ(records.reader->read(&byte, 1), -1);
    EXPECT_EQ(alert_sent_back(records), c.alert) << records.reader->detail();
  }
}

// A forged record's plaintext is not left in the reader's buffer: the cipher decrypts before
// the tag is checked, and a flipped ciphertext bit flips the same plaintext bit.
TEST(RecordLayerAlone, AForgedRecordLeavesNoPlaintextInTheBuffer) {
  LocalRecords records;
  const std::vector<std::uint8_t> content(1000, 'A');
  std::vector<std::uint8_t> wire(content.size() + transport::kRecordOverhead);
  ASSERT_TRUE(records.peer->seal(ContentType::application_data, content, {}, wire.data()));
  wire[transport::kRecordHeaderSize + 10] ^= 0x01;  // 'A' becomes '@' at byte 10
  ASSERT_EQ(::send(records.fds[1], wire.data(), wire.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(wire.size()));
  std::vector<std::uint8_t> buffer(2000, 0x55);
  EXPECT_EQ(records.reader->read(buffer.data(), buffer.size()), -1);
  EXPECT_NE(records.reader->detail().find("bad_record_mac"), std::string::npos)
      << records.reader->detail();
  EXPECT_EQ(std::count(buffer.begin(), buffer.end(), 'A'), 0);
  EXPECT_EQ(buffer[10], 0) << "the forged plaintext byte";
}

TEST(RecordLayerAlone, PaddedRecordsAreReadIntact) {
  LocalRecords records;
  records.send(ContentType::application_data, {1, 2, 3}, 1000);
  records.send(ContentType::application_data, {4, 5, 6, 7}, 16384 - 4);  // exactly 2^14 + 1
  std::uint8_t buffer[5] = {};
  std::vector<std::uint8_t> got;
  while (got.size() < 7) {
    const long n = records.reader->read(buffer, sizeof buffer);
    ASSERT_GT(n, 0) << records.reader->detail();
    got.insert(got.end(), buffer, buffer + n);
  }
  EXPECT_EQ(got, (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(RecordLayerAlone, InnerPlaintextOverTheLimitIsRefusedEvenWhenItIsPadding) {
  // RFC 8446, 5.4: the whole TLSInnerPlaintext, padding included, is at most 2^14 + 1 bytes.
  LocalRecords records;
  records.send(ContentType::application_data, {1, 2, 3}, 16384);
  std::vector<std::uint8_t> buffer(20000);
  EXPECT_EQ(records.reader->read(buffer.data(), buffer.size()), -1);
  EXPECT_NE(records.reader->detail().find("record_overflow"), std::string::npos)
      << records.reader->detail();
}

TEST(RecordLayerAlone, EndlessKeyUpdatesAreRefused) {
  // Without a limit, a peer that keeps sending KeyUpdates (or empty records) keeps read() busy
  // for as long as it likes: the channel's thread never gets back to anything else.
  LocalRecords records;
  for (std::size_t i = 0; i <= transport::kMaxRecordsWithoutData; ++i) records.send_key_update();
  records.send(ContentType::application_data, {42});
  std::uint8_t byte = 0;
  EXPECT_EQ(records.reader->read(&byte, 1), -1);
  EXPECT_NE(records.reader->detail().find("without application data"), std::string::npos)
      << records.reader->detail();
}

TEST(RecordLayerAlone, EndlessEmptyRecordsAreRefused) {
  LocalRecords records;
  for (std::size_t i = 0; i <= transport::kMaxRecordsWithoutData; ++i) {
    records.send(ContentType::application_data, {});
  }
  records.send(ContentType::application_data, {42});
  std::uint8_t byte = 0;
  EXPECT_EQ(records.reader->read(&byte, 1), -1);
  EXPECT_NE(records.reader->detail().find("without application data"), std::string::npos)
      << records.reader->detail();
}

TEST(RecordLayerAlone, KeyUpdatesAndEmptyRecordsBetweenDataAreFine) {
  LocalRecords records;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < transport::kMaxRecordsWithoutData / 2; ++i) {
      records.send_key_update();
      records.send(ContentType::application_data, {});
    }
    records.send(ContentType::application_data, {static_cast<std::uint8_t>(round)});
  }
  for (std::uint8_t round = 0; round < 3; ++round) {
    std::uint8_t byte = 0xff;
    ASSERT_EQ(records.reader->read(&byte, 1), 1) << records.reader->detail();
    EXPECT_EQ(byte, round);
  }
}

TEST(RecordLayerAlone, AZeroByteReadLosesNoData) {
  // A read into an empty buffer spills the whole record; the next record must not overwrite it.
  LocalRecords records;
  records.send(ContentType::application_data, {1, 2, 3});
  records.send(ContentType::application_data, {4, 5, 6});
  std::uint8_t buffer[8] = {};
  EXPECT_EQ(records.reader->read(buffer, 0), 0);
  EXPECT_TRUE(records.reader->has_buffered_input());
  std::vector<std::uint8_t> got;
  for (int i = 0; i < 4 && got.size() < 6; ++i) {
    const long n = records.reader->read(buffer, sizeof buffer);
    ASSERT_GE(n, 0) << records.reader->detail();
    got.insert(got.end(), buffer, buffer + n);
  }
  EXPECT_EQ(got, (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}));
}

// --- secrets: nothing of the handshake's key schedule outlives the hand-over ---------------

int ssl_objects_freed = 0;
void count_ssl_free(void*, void*, CRYPTO_EX_DATA*, int, long, void*) { ++ssl_objects_freed; }

TEST(RecordLayerSecrets, OpenSslsConnectionStateIsFreedAtTheHandOver) {
  // The SSL holds the generation-0 application traffic secrets (and OpenSSL's keys for them):
  // kept alive, they would let a later memory disclosure decrypt the whole connection, key
  // updates or not. OpenSSL calls every SSL ex_data free function when it frees an SSL.
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, count_ssl_free);
  ASSERT_GE(index, 0);
  const int before = ssl_objects_freed;
  EstablishedPeer peer;
  ASSERT_NE(peer.channel(), nullptr);
  // The server channel's SSL is gone; the raw client's is still in use.
  EXPECT_EQ(ssl_objects_freed - before, 1);
  EXPECT_EQ(peer.channel()->cipher().rfind("TLS_", 0), 0u) << peer.channel()->cipher();
  sempi_to_openssl(peer);
  openssl_to_sempi(peer);
}

}  // namespace
}  // namespace sempi::test
