// Hostile frames at the engine level: a genuine rank 1 (raw OpenSSL, its own job's certificate)
// sends frames that pass the channel's checks (valid header, right sequence) but break the
// protocol's state machine, to a real engine at rank 0. The engine must fail that peer with a
// precise reason and an audit record, and deliver nothing the peer had no right to send.

#include <gtest/gtest.h>

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "core/engine.hpp"
#include "support/established_peer.hpp"
#include "support/temp_dir.hpp"

namespace sempi::test {
namespace {

using transport::FrameHeader;
using transport::FrameType;

constexpr int kTag = 7;

// Rank 0's engine on the accepted channel, with an audit log, and rank 1's raw TLS stream.
class EngineUnderAttack {
 public:
  explicit EngineUnderAttack(const EstablishedPeer::ServerTweak& tweak = {}) : peer_(tweak) {
    std::vector<std::unique_ptr<transport::Channel>> channels;  // index: world rank
    channels.emplace_back();
    channels.push_back(peer_.server.take_channel());
    channels.resize(peer_.job.world_size());
    detail::EngineConfig config;
    config.world_rank = 0;
    config.world_size = static_cast<int>(peer_.job.world_size());
    config.audit = audit::AuditLog::create(dir_.path() / "rank-0.audit",
                                           {peer_.job.ca().job().hex(), 0, true});
    audit_ = config.audit;
    engine_ = std::make_unique<detail::Engine>(config, std::move(channels), -1);
    world_ = std::make_shared<detail::CommState>(0, std::vector<int>{0, 1, 2, 3}, 0, "world");
  }
  ~EngineUnderAttack() { engine_.reset(); }

  RawTlsClient& client() { return peer_.client; }
  detail::Engine& engine() { return *engine_; }
  const std::shared_ptr<detail::CommState>& world() const { return world_; }

  /// Writes a frame from rank 1 with the next sequence number.
  void send(FrameType type, std::span<const std::uint8_t> payload = {}, std::uint64_t aux = 0,
            std::uint16_t flags = 0, std::uint32_t source = 1, std::int32_t tag = kTag) {
    FrameHeader h;
    h.type = type;
    h.flags = flags;
    h.source = source;
    h.tag = tag;
    h.aux = aux;
    h.sequence = next_sequence_++;
    ASSERT_TRUE(peer_.client.write_frame(h, payload));
  }

  /// Waits for the request, bounded: if the engine never completes it, rank 1's socket is shut
  /// down (which must fail it) and the test fails.
  void wait(const detail::RequestState& request) {
    auto waiter = std::async(std::launch::async, [&] { engine_->wait(request); });
    if (waiter.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ::shutdown(peer_.client.fd(), SHUT_RDWR);
      waiter.wait();
      FAIL() << "the engine did not complete the request";
    }
  }

  /// Waits (bounded) until everything rank 1 wrote sits in rank 0's socket: on loopback, sent
  /// data is acknowledged once the receiving socket holds it.
  void wait_until_delivered() {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int unacknowledged = 0;
    while (::ioctl(peer_.client.fd(), SIOCOUTQ, &unacknowledged) == 0 && unacknowledged > 0 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    ASSERT_EQ(unacknowledged, 0) << "rank 1's frames never reached rank 0's socket";
  }

  /// The audit log's text, after closing it (so every record is rendered and written).
  std::string audit_text() {
    engine_.reset();
    audit_->close();
    std::ifstream in(dir_.path() / "rank-0.audit");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  EstablishedPeer peer_;
  TempDir dir_;
  std::shared_ptr<audit::AuditLog> audit_;
  std::unique_ptr<detail::Engine> engine_;
  std::shared_ptr<detail::CommState> world_;
  std::uint64_t next_sequence_ = 1;  // 0 was HELLO
};

const std::vector<std::uint8_t> kPayload{'s', 'e', 'c', 'r', 'e', 't'};

// The control case: a message before GOODBYE is delivered as usual.
TEST(EngineFrames, MessageBeforeGoodbyeIsDelivered) {
  EngineUnderAttack rank0;
  std::array<char, 16> buffer{};
  auto request = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.send(FrameType::eager, kPayload);
  rank0.send(FrameType::goodbye);
  rank0.wait(*request);
  EXPECT_EQ(request->status.error, ErrorClass::success) << request->error_message;
  EXPECT_EQ(std::string(buffer.data()), "secret");
}

// Frames that pass the channel's checks but that this peer has no right to send now. Each
// fails the peer with "protocol violation: <why>", in the failed request and in the audit log,
// and nothing of it reaches the posted receive.
struct HostileCase {
  const char* name;
  std::function<void(EngineUnderAttack&)> send;
  std::string why;
};

std::span<const std::uint8_t> bytes_of(const std::vector<std::uint8_t>& v) { return v; }

const std::vector<HostileCase>& hostile_cases() {
  using FT = FrameType;
  static const std::vector<HostileCase> cases = {
      // After GOODBYE a peer may only answer what it still reads from us (DENY) or abort;
      // anything else would be delivered past its own finalize.
      {"EagerAfterGoodbye", [](auto& r) { r.send(FT::goodbye); r.send(FT::eager, kPayload); },
       "EAGER frame after GOODBYE"},
      {"RtsAfterGoodbye", [](auto& r) { r.send(FT::goodbye); r.send(FT::rts, {}, 1u << 20); },
       "RTS frame after GOODBYE"},
      {"SyncAckAfterGoodbye", [](auto& r) { r.send(FT::goodbye); r.send(FT::sync_ack); },
       "SYNC_ACK frame after GOODBYE"},
      {"SecondGoodbye", [](auto& r) { r.send(FT::goodbye); r.send(FT::goodbye); },
       "GOODBYE frame after GOODBYE"},
      // Identity: the channel's authenticated peer is the only possible source.
      {"ForgedSource", [](auto& r) { r.send(FT::eager, kPayload, 0, 0, /*source=*/2); },
       "frame claims source rank 2"},
      // Answers to nothing we sent.
      {"DataForUnknownTransfer", [](auto& r) { r.send(FT::data, kPayload, 99); },
       "DATA frame for unknown transfer 99"},
      {"CtsForUnknownTransfer", [](auto& r) { r.send(FT::cts, {}, 99); },
       "CTS for unknown transfer 99"},
      {"SyncAckForUnknownMessage", [](auto& r) { r.send(FT::sync_ack, {}, 99); },
       "SYNC_ACK for unknown message"},
      {"DenyForUnknownTransfer", [](auto& r) { r.send(FT::deny, {}, 99); },
       "DENY for unknown transfer 99"},
      // Start-up frames, sizes and payloads out of place.
      {"HelloAfterStartUp", [](auto& r) { r.send(FT::hello); }, "HELLO frame after start-up"},
      {"EagerAboveTheEagerLimit",
       [](auto& r) {
         r.send(FT::eager, bytes_of(std::vector<std::uint8_t>(detail::EngineConfig{}.eager_limit + 1)));
       },
       "eager message of " + std::to_string(detail::EngineConfig{}.eager_limit + 1) +
           " bytes exceeds the eager limit"},
      {"PayloadOnCts", [](auto& r) { r.send(FT::cts, kPayload, 99); },
       "unexpected payload on CTS frame"},
      {"OversizedDenyReason",
       [](auto& r) { r.send(FT::deny, bytes_of(std::vector<std::uint8_t>(257, 'x')), 99); },
       "oversized DENY reason"},
  };
  return cases;
}

class HostileToEngine : public ::testing::TestWithParam<std::size_t> {};

TEST_P(HostileToEngine, FailsThePeerWithAPreciseReason) {
  const HostileCase& hostile = hostile_cases()[GetParam()];
  EngineUnderAttack rank0;
  std::array<char, 16> buffer{};
  auto request = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  hostile.send(rank0);
  rank0.wait(*request);
  const std::string expected = "protocol violation: " + hostile.why;
  EXPECT_EQ(request->status.error, ErrorClass::peer_failed);
  EXPECT_NE(request->error_message.find(expected), std::string::npos) << request->error_message;
  EXPECT_EQ(buffer[0], 0) << "a refused frame reached the receive buffer";
  const std::string audit = rank0.audit_text();
  EXPECT_NE(audit.find("peer.failure"), std::string::npos) << audit;
  EXPECT_NE(audit.find(expected), std::string::npos) << audit;
}

INSTANTIATE_TEST_SUITE_P(EngineFrames, HostileToEngine,
                         ::testing::Range<std::size_t>(0, hostile_cases().size()),
                         [](const auto& param_info) {
                           return std::string(hostile_cases()[param_info.param].name);
                         });

// Each unmatched message holds an entry, so an endless stream of empty messages must reach the
// unexpected budget like any other: the engine stops reading that peer (TCP then stalls it),
// and once receives free the budget, everything it held arrives, in order, nothing lost.
TEST(EngineFrames, EmptyMessagesCountAgainstTheUnexpectedBudget) {
  constexpr std::uint64_t kBudget = 16 * 1024;
  constexpr int kMessages = 600;  // at 256 bytes an entry, far beyond the budget
  constexpr int kMarkerTag = 8;
  EngineUnderAttack rank0(
      [](transport::LocalEndpoint& local) { local.hello.limits.max_unexpected_bytes = kBudget; });
  for (int i = 0; i < kMessages; ++i) rank0.send(FrameType::eager);
  rank0.send(FrameType::eager, kPayload, 0, 0, 1, kMarkerTag);
  rank0.wait_until_delivered();
  // A progress round reads at most 64 frames: an unbounded engine reads the marker within ten.
  for (int round = 0; round < 200; ++round) {
    ASSERT_FALSE(rank0.engine().iprobe(*rank0.world(), false, 1, kMarkerTag).has_value())
        << "the engine read past its unexpected budget (progress round " << round << ")";
  }
  char empty = 0;
  for (int i = 0; i < kMessages; ++i) {
    auto request = rank0.engine().irecv(rank0.world(), false, &empty, 0, 1, kTag);
    rank0.wait(*request);
    ASSERT_EQ(request->status.error, ErrorClass::success) << request->error_message;
  }
  std::array<char, 16> buffer{};
  auto marker =
      rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kMarkerTag);
  rank0.wait(*marker);
  EXPECT_EQ(marker->status.error, ErrorClass::success) << marker->error_message;
  EXPECT_EQ(std::string(buffer.data()), "secret");
}

// The peer's policy may refuse a message of ours that it reads while draining after its
// GOODBYE: that DENY is legitimate and fails our synchronous send with a policy error.
TEST(EngineFrames, DenyAfterGoodbyeFailsTheRefusedSend) {
  EngineUnderAttack rank0;
  const char message[] = "hi";
  auto send = rank0.engine().isend(*rank0.world(), detail::OpKind::p2p, message, sizeof message, 1, kTag,
                                   /*synchronous=*/true);
  std::vector<std::uint8_t> payload;
  FrameHeader eager;
  ASSERT_TRUE(rank0.client().read_frame(payload, 1, &eager));
  ASSERT_EQ(eager.type, FrameType::eager);
  ASSERT_NE(eager.flags & transport::frame_flags::kSynchronous, 0);
  rank0.send(FrameType::goodbye);
  const std::string reason = "not on this communicator";
  rank0.send(FrameType::deny, std::span(reinterpret_cast<const std::uint8_t*>(reason.data()), reason.size()),
             eager.aux, transport::frame_flags::kSynchronous);
  rank0.wait(*send);
  EXPECT_EQ(send->status.error, ErrorClass::policy) << send->error_message;
  EXPECT_NE(send->error_message.find(reason), std::string::npos) << send->error_message;
}

// ABORT after GOODBYE is legitimate too (the job failed while the peer was draining).
TEST(EngineFrames, AbortAfterGoodbyeAbortsTheJob) {
  EngineUnderAttack rank0;
  std::array<char, 16> buffer{};
  auto request = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.send(FrameType::goodbye);
  const std::string reason = "rank 3 failed";
  rank0.send(FrameType::abort, std::span(reinterpret_cast<const std::uint8_t*>(reason.data()), reason.size()));
  rank0.wait(*request);
  EXPECT_EQ(request->status.error, ErrorClass::peer_failed);
  EXPECT_NE(rank0.engine().abort_reason().find(reason), std::string::npos)
      << rank0.engine().abort_reason();
}

}  // namespace
}  // namespace sempi::test
