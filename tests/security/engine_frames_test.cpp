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
#include <map>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "core/comm_factory.hpp"
#include "core/engine.hpp"
#include "core/internal_tags.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "policy/policy.hpp"
#include "policy/policy_document.hpp"
#include "support/engine_under_attack.hpp"

namespace sempi::test {
namespace {

using transport::FrameHeader;
using transport::FrameType;

constexpr int kStepTag = detail::internal_tag::kScheduleBit | kTag;  // a collective schedule's

const std::vector<std::uint8_t> kPayload{'s', 'e', 'c', 'r', 'e', 't'};

std::span<const std::uint8_t> text_bytes(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

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

// A frame of rank 1 with `tag` on world's collective context (1).
FrameHeader collective_header(FrameType type, std::int32_t tag) {
  FrameHeader h;
  h.type = type;
  h.context = 1;
  h.source = 1;
  h.tag = tag;
  return h;
}

// Every rank may talk to every rank, on the communicators named `communicators` (a name or
// "*"), in `mode` ("enforce" or "audit").
std::shared_ptr<const policy::Policy> policy_for(const std::string& mode,
                                                 const std::string& communicators,
                                                 const std::string& message_audit = "off") {
  const std::string text = R"({"version": 1, "mode": ")" + mode + R"(", "on_violation": "drop",
    "groups": {"all": "*"}, "segmentation": [{"between": ["all", "all"]}],
    "communicators": [{"name": ")" + communicators +
                           R"(", "members": "*", "collectives": "*", "p2p_tags": "*"}],
    "limits": {}, "audit": {"messages": ")" + message_audit + R"("}})";
  return std::make_shared<const policy::Policy>(
      policy::Policy::compile(policy::PolicyDocument::parse(text, "test")));
}

// The lines of an audit log's text whose event.action is `action`.
std::vector<std::string> audit_records(const std::string& text, const std::string& action) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"action\":\"" + action + "\"") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// Rank 1's FINALIZING, then `next` in the same TLS record: rank 0 reads both in one round, so
// the receive waiting on rank 1 fails with the violation, not as one nothing can match.
void finalizing_then(EngineUnderAttack& r, FrameHeader next,
                     std::vector<std::uint8_t> payload = {}) {
  FrameHeader finalizing;
  finalizing.type = FrameType::finalizing;
  finalizing.source = 1;
  next.source = 1;
  r.send_together({{finalizing, {}}, {next, std::move(payload)}});
}

FrameHeader header_of(FrameType type, std::uint64_t aux = 0, std::int32_t tag = kTag) {
  FrameHeader h;
  h.type = type;
  h.tag = tag;
  h.aux = aux;
  return h;
}

// Rank 1 withdraws from collective number `sequence`.
FrameHeader withdrawn_header(std::uint64_t error_class, std::uint32_t sequence = 0) {
  FrameHeader h = collective_header(FrameType::withdrawn, 0);
  h.aux = error_class | (std::uint64_t{sequence} << 32);
  return h;
}

const std::vector<HostileCase>& hostile_cases() {
  using FT = FrameType;
  static const std::vector<HostileCase> cases = {
      // After GOODBYE a peer may only answer what it still reads from us (DENY) or abort;
      // anything else would be delivered past its own finalize.
      {"EagerAfterGoodbye",
       [](auto& r) {
         r.send(FT::goodbye);
         r.send(FT::eager, kPayload);
       },
       "EAGER frame after GOODBYE"},
      {"RtsAfterGoodbye",
       [](auto& r) {
         r.send(FT::goodbye);
         r.send(FT::rts, {}, 1u << 20);
       },
       "RTS frame after GOODBYE"},
      {"SyncAckAfterGoodbye",
       [](auto& r) {
         r.send(FT::goodbye);
         r.send(FT::sync_ack);
       },
       "SYNC_ACK frame after GOODBYE"},
      {"SecondGoodbye",
       [](auto& r) {
         r.send(FT::goodbye);
         r.send(FT::goodbye);
       },
       "GOODBYE frame after GOODBYE"},
      // Identity: the channel's authenticated peer is the only possible source.
      {"ForgedSource", [](auto& r) { r.send(FT::eager, kPayload, 0, 0, /*source=*/2); },
       "frame claims source rank 2"},
      {"NegativePointToPointTag", [](auto& r) { r.send(FT::eager, kPayload, 0, 0, 1, -1); },
       "point-to-point message with tag -1"},
      // Answers to nothing we sent.
      {"DataForUnknownTransfer", [](auto& r) { r.send(FT::data, kPayload, 99); },
       "DATA frame for unknown transfer 99"},
      {"CtsForUnknownTransfer", [](auto& r) { r.send(FT::cts, {}, 99); },
       "CTS for unknown transfer 99"},
      {"SyncAckForUnknownMessage", [](auto& r) { r.send(FT::sync_ack, {}, 99); },
       "SYNC_ACK for unknown synchronous message 99"},
      {"DenyForUnknownSynchronousMessage",
       [](auto& r) { r.send(FT::deny, {}, 99, transport::frame_flags::kSynchronous); },
       "DENY for unknown synchronous message 99"},
      {"EmptyDataFrame", [](auto& r) { r.send(FT::data, {}, 99); },
       "empty DATA frame for transfer 99"},
      // A rendezvous announced by rank 1 (its RTS is frame 1, so the transfer's id is 1) and
      // matched by the posted receive: DATA must flag exactly its last chunk.
      {"DataEndingWithoutTheLastFlag",
       [](auto& r) {
         r.send(FT::rts, {}, kPayload.size());
         r.send(FT::data, kPayload, 1);
       },
       "DATA frame ending transfer 1 without the LAST flag"},
      {"LastFlagBeforeTheEnd",
       [](auto& r) {
         r.send(FT::rts, {}, 2 * kPayload.size());
         r.send(FT::data, kPayload, 1, transport::frame_flags::kLast);
       },
       "LAST flag before the end of transfer 1"},
      {"RtsAnnouncingAnImpossibleSize", [](auto& r) { r.send(FT::rts, {}, 1ull << 63); },
       "RTS announcing 9223372036854775808 bytes"},
      {"RtsForAnEmptyMessage", [](auto& r) { r.send(FT::rts, {}, 0); },
       "RTS announcing an empty message"},
      {"DenyForUnknownTransfer", [](auto& r) { r.send(FT::deny, {}, 99); },
       "DENY for unknown transfer 99"},
      // Start-up frames, sizes and payloads out of place.
      {"HelloAfterStartUp", [](auto& r) { r.send(FT::hello); }, "HELLO frame after start-up"},
      // Eager credit: only what rank 0 lent can come back, and not after GOODBYE.
      {"CreditNeverLent", [](auto& r) { r.send(FT::credit, {}, 1); },
       "CREDIT returning 1 bytes of 0 lent"},
      {"EmptyCredit", [](auto& r) { r.send(FT::credit, {}, 0); },
       "CREDIT returning 0 bytes of 0 lent"},
      {"CreditAfterGoodbye",
       [](auto& r) {
         r.send(FT::goodbye);
         r.send(FT::credit, {}, 1);
       },
       "CREDIT frame after GOODBYE"},
      {"PayloadOnCredit", [](auto& r) { r.send(FT::credit, kPayload, 1); },
       "unexpected payload on CREDIT frame"},
      // The header alone: refused before its payload, which would then meet a closed socket.
      {"EagerAboveTheEagerLimit",
       [](auto& r) {
         FrameHeader h;
         h.type = FT::eager;
         h.source = 1;
         h.tag = kTag;
         r.send_header(h, detail::EngineConfig{}.eager_limit + 1);
       },
       "eager message of " + std::to_string(detail::EngineConfig{}.eager_limit + 1) +
           " bytes exceeds the eager limit"},
      {"PayloadOnCts", [](auto& r) { r.send(FT::cts, kPayload, 99); },
       "unexpected payload on CTS frame"},
      {"OversizedDenyReason",
       [](auto& r) { r.send(FT::deny, bytes_of(std::vector<std::uint8_t>(257, 'x')), 99); },
       "oversized DENY reason"},
      // WITHDRAWN: only for a collective context, with a real error class, before GOODBYE.
      {"WithdrawnOutsideACollectiveContext",
       [](auto& r) { r.send(FT::withdrawn, {}, static_cast<std::uint64_t>(ErrorClass::policy)); },
       "WITHDRAWN outside a collective context"},
      {"WithdrawnWithAnUnknownErrorClass", [](auto& r) { r.send(withdrawn_header(999), {}); },
       "WITHDRAWN with error class 999"},
      {"WithdrawnWithoutAnError", [](auto& r) { r.send(withdrawn_header(0), {}); },
       "WITHDRAWN with error class 0"},
      {"WithdrawnAsPending",
       [](auto& r) {
         r.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::pending)), {});
       },
       "WITHDRAWN with error class " + std::to_string(static_cast<int>(ErrorClass::pending))},
      {"WithdrawnTwice",
       [](auto& r) {
         r.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy), 3), {});
         r.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy), 3), {});
       },
       "WITHDRAWN twice from collective 3"},
      {"WithdrawnAfterGoodbye",
       [](auto& r) {
         r.send(FT::goodbye);
         r.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy)), {});
       },
       "WITHDRAWN frame after GOODBYE"},
      {"OversizedWithdrawnReason",
       [](auto& r) {
         r.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy)),
                bytes_of(std::vector<std::uint8_t>(detail::Engine::kMaxWithdrawReason + 1, 'x')));
       },
       "oversized WITHDRAWN reason"},
      // A withdrawal names a collective, not a message: a tag would be a lie about what it
      // covers.
      {"WithdrawnWithATag",
       [](auto& r) {
         FrameHeader h = withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy), 5);
         h.tag = kTag;
         r.send(h, {});
       },
       "WITHDRAWN with flags 0 and tag 7"},
      // FINALIZING: after it, no new message; it names nothing and comes once.
      {"EagerAfterFinalizing",
       [](auto& r) {
         finalizing_then(r, header_of(FT::eager), {1, 2, 3});
       },
       "EAGER frame after FINALIZING"},
      {"RtsAfterFinalizing", [](auto& r) { finalizing_then(r, header_of(FT::rts, 1u << 20)); },
       "RTS frame after FINALIZING"},
      {"FinalizingTwice", [](auto& r) { finalizing_then(r, header_of(FT::finalizing, 0, 0)); },
       "FINALIZING frame after FINALIZING"},
      {"FinalizingWithATag", [](auto& r) { r.send(FT::finalizing); }, "FINALIZING with fields set"},
      {"FinalizingWithAux", [](auto& r) { r.send(FT::finalizing, {}, 5, 0, 1, 0); },
       "FINALIZING with fields set"},
      {"PayloadOnFinalizing", [](auto& r) { r.send(FT::finalizing, kPayload, 0, 0, 1, 0); },
       "unexpected payload on FINALIZING frame"},
      {"UnreceivedBeforeFinalizing",
       [](auto& r) { r.send(FT::deny, {}, 99, transport::frame_flags::kUnreceived); },
       "DENY flagged UNRECEIVED before FINALIZING"},
      {"UnreceivedWithAReason",
       [](auto& r) {
         FrameHeader deny = header_of(FT::deny, 99, 0);
         deny.flags = transport::frame_flags::kUnreceived;
         finalizing_then(r, deny, kPayload);
       },
       "DENY flagged UNRECEIVED with a reason"},
      {"UnreceivedOnACts",
       [](auto& r) { r.send(FT::cts, {}, 99, transport::frame_flags::kUnreceived); },
       "CTS flagged UNRECEIVED"},
      {"FinalizingAfterGoodbye",
       [](auto& r) {
         r.send(FT::goodbye);
         r.send(FT::finalizing, {}, 0, 0, 1, 0);
       },
       "FINALIZING frame after GOODBYE"},
      {"WithdrawnAsSynchronous",
       [](auto& r) {
         FrameHeader h = withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy));
         h.flags = transport::frame_flags::kSynchronous;
         r.send(h, {});
       },
       "WITHDRAWN with flags 1 and tag 0"},
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
  // Packed into few TLS records, so that all of it fits the socket's receive queue.
  FrameHeader empty_message;
  empty_message.source = 1;
  empty_message.tag = kTag;
  std::vector<std::pair<FrameHeader, std::vector<std::uint8_t>>> frames(kMessages,
                                                                         {empty_message, {}});
  FrameHeader marker_message = empty_message;
  marker_message.tag = kMarkerTag;
  frames.emplace_back(marker_message, kPayload);
  rank0.send_together(std::move(frames));
  rank0.wait_until_delivered();
  // A progress round reads at most 64 frames: an unbounded engine reads the marker within ten.
  // (Probing for rank 1 reads it on to twice the budget, 128 entries: still far short of it.)
  for (int round = 0; round < 200; ++round) {
    ASSERT_FALSE(rank0.engine().iprobe(*rank0.world(), false, 1, kMarkerTag).has_value())
        << "the engine read past twice its unexpected budget (progress round " << round << ")";
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

// The budget ends the read round at the frame that reaches it, even with further frames
// already decrypted: a peer cannot push a whole round (64 frames, each up to the eager limit)
// past it. Probing for rank 1 reads it on to twice the budget (as any wait on it does), so
// that is the limit reached here.
TEST(EngineFrames, TheUnexpectedBudgetStopsReadingAtTheFrameThatReachesIt) {
  constexpr std::uint64_t kBudget = 16 * 1024;
  constexpr int kMessages = 12;
  constexpr int kFirstTag = 100;
  // Each holds 4 KiB + 256 bytes: the 4th reaches the budget, the 8th twice it.
  constexpr std::size_t kSize = 4096;
  EngineUnderAttack rank0(
      [](transport::LocalEndpoint& local) { local.hello.limits.max_unexpected_bytes = kBudget; });
  std::vector<std::pair<FrameHeader, std::vector<std::uint8_t>>> frames;
  for (int i = 0; i < kMessages; ++i) {
    FrameHeader h;
    h.source = 1;
    h.tag = kFirstTag + i;
    frames.emplace_back(h, std::vector<std::uint8_t>(kSize, static_cast<std::uint8_t>(i)));
  }
  rank0.send_together(std::move(frames));
  rank0.wait_until_delivered();
  // Probed until it arrives (the background thread may hold the progress token meanwhile).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!rank0.engine().iprobe(*rank0.world(), false, 1, kFirstTag + 7).has_value()) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "the 8th message was never read";
  }
  for (int round = 0; round < 50; ++round) {
    ASSERT_FALSE(rank0.engine().iprobe(*rank0.world(), false, 1, kFirstTag + 8).has_value())
        << "the engine read past the frame that reached twice its unexpected budget";
  }
  std::vector<std::uint8_t> buffer(kSize);
  for (int i = 0; i < kMessages; ++i) {
    auto request = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1,
                                        kFirstTag + i);
    rank0.wait(*request);
    ASSERT_EQ(request->status.error, ErrorClass::success) << request->error_message;
    EXPECT_EQ(buffer, std::vector<std::uint8_t>(kSize, static_cast<std::uint8_t>(i)));
  }
}

// A budget of 0 means one unmatched message at a time, not a peer paused for good.
TEST(EngineFrames, AnUnexpectedBudgetOfZeroStillDeliversEveryMessage) {
  EngineUnderAttack rank0(
      [](transport::LocalEndpoint& local) { local.hello.limits.max_unexpected_bytes = 0; });
  for (int i = 0; i < 3; ++i) {
    // Each arrives unmatched (so it counts against the budget) after the last was received.
    rank0.send(FrameType::eager, kPayload);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!rank0.engine().iprobe(*rank0.world(), false, 1, kTag).has_value()) {
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "message " << i << " never read";
    }
    std::array<char, 16> buffer{};
    auto request = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
    rank0.wait(*request);
    ASSERT_EQ(request->status.error, ErrorClass::success) << request->error_message;
    EXPECT_EQ(std::string(buffer.data()), "secret");
  }
}

std::uint64_t eager_cost(std::size_t bytes) { return transport::eager_credit_cost(bytes); }

// Rank 0 sends eagerly only within the credit rank 1's budget grants (half of it, counted as
// rank 1 holds each message); past it, by rendezvous, whose RTS holds only a small entry
// there. A CREDIT from rank 1 gives credit back, and eager sends resume.
TEST(EngineFrames, EagerSendsStayWithinTheReceiversCredit) {
  constexpr std::uint64_t kBudget = 64 * 1024;
  constexpr std::size_t kSize = 4096;
  const std::uint64_t cost = eager_cost(kSize);
  const int within_credit = static_cast<int>(kBudget / 2 / cost);
  EngineUnderAttack rank0({}, nullptr, transport::ChannelLimits{64ull << 20, kBudget});
  const std::vector<std::uint8_t> message(kSize, 'm');
  std::vector<std::shared_ptr<detail::RequestState>> sends;
  const auto send_one = [&] {
    sends.push_back(rank0.engine().isend(*rank0.world(), detail::OpKind::p2p, message.data(),
                                         kSize, 1, kTag, /*synchronous=*/false));
  };
  std::uint64_t sequence = 1;  // 0 was HELLO
  const auto next_frame = [&] {
    std::vector<std::uint8_t> payload;
    FrameHeader h;
    EXPECT_TRUE(rank0.client().read_frame(payload, sequence++, &h));
    return h.type;
  };
  for (int i = 0; i < within_credit + 2; ++i) send_one();
  for (int i = 0; i < within_credit; ++i) ASSERT_EQ(next_frame(), FrameType::eager) << i;
  EXPECT_EQ(next_frame(), FrameType::rts);
  EXPECT_EQ(next_frame(), FrameType::rts);
  rank0.send(FrameType::credit, {}, cost);  // one message's worth
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  send_one();
  EXPECT_EQ(next_frame(), FrameType::eager);
  send_one();
  EXPECT_EQ(next_frame(), FrameType::rts);
}

// Rank 0 gives rank 1's credit back for each eager message it no longer holds, received from
// the unexpected queue or matched on arrival, in CREDIT frames of at least an eighth of its
// budget.
TEST(EngineFrames, ReceivedEagerMessagesGiveTheirCreditBack) {
  constexpr std::uint64_t kBudget = 16 * 1024;
  const std::uint64_t cost = eager_cost(kPayload.size());
  const std::uint64_t batch = (kBudget / 8 + cost - 1) / cost;  // messages per CREDIT
  ASSERT_GE(batch, 2u);
  EngineUnderAttack rank0(
      [](transport::LocalEndpoint& local) { local.hello.limits.max_unexpected_bytes = kBudget; });
  std::array<char, 16> buffer{};
  for (std::uint64_t i = 0; i + 1 < batch; ++i) rank0.send(FrameType::eager, kPayload);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  for (std::uint64_t i = 0; i + 1 < batch; ++i) {
    auto request =
        rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
    rank0.wait(*request);
    ASSERT_EQ(request->status.error, ErrorClass::success) << request->error_message;
  }
  auto last = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.send(FrameType::eager, kPayload);
  rank0.wait(*last);
  ASSERT_EQ(last->status.error, ErrorClass::success) << last->error_message;
  std::vector<std::uint8_t> payload;
  FrameHeader credit;
  ASSERT_TRUE(rank0.client().read_frame(payload, 1, &credit));
  EXPECT_EQ(credit.type, FrameType::credit);
  EXPECT_EQ(credit.aux, batch * cost);
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
  rank0.send(FrameType::deny, text_bytes(reason),
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
  rank0.send(FrameType::abort, text_bytes(reason));
  rank0.wait(*request);
  EXPECT_EQ(request->status.error, ErrorClass::peer_failed);
  EXPECT_NE(rank0.engine().abort_reason().find(reason), std::string::npos)
      << rank0.engine().abort_reason();
}

// A peer withdraws from a collective: this rank's transfers with it in that collective fail,
// those waiting (a rendezvous send waiting for the peer's CTS included) and those posted
// later, with the peer's class and reason. What it sent before the withdrawal is still
// received. Transfers of other collectives, and the runtime's own on the collective context
// (communicator creation, which has no sequence number), are not touched, and the peer stays
// healthy. The withdrawal is forgotten once this rank is 64 collectives further.
TEST(EngineFrames, AWithdrawalFailsEveryTransferWithThePeerInThatCollective) {
  EngineUnderAttack rank0;
  auto& engine = rank0.engine();
  std::array<char, 16> buffer{};
  const auto post_recv = [&](int tag, std::uint32_t sequence) {
    return engine.irecv(rank0.world(), true, buffer.data(), buffer.size(), 1, tag, sequence);
  };
  const std::vector<std::uint8_t> large(detail::EngineConfig{}.eager_limit + 1, 'L');
  const auto post_send = [&](std::span<const std::uint8_t> data, std::uint32_t sequence) {
    return engine.isend(*rank0.world(), detail::OpKind::bcast, data.data(), data.size(), 1,
                        kStepTag, false, sequence);
  };
  auto first = post_recv(kStepTag, 5);
  auto second = post_recv(kStepTag + 3, 5);
  auto runtime_own = post_recv(detail::internal_tag::kCommCreate, 5);  // no schedule's
  auto rendezvous = post_send(large, 5);
  auto other_recv = post_recv(kStepTag, 6);
  auto other_send = post_send(large, 6);
  std::uint64_t sequence = 1;  // 0 was HELLO
  std::vector<std::uint8_t> payload;
  std::uint64_t withdrawn_rts = 0;  // the rendezvous id: the RTS frame's sequence number
  for (int i = 0; i < 2; ++i) {  // the two sends' RTS
    FrameHeader rts;
    ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &rts));
    ASSERT_EQ(rts.type, FrameType::rts);
    if (i == 0) withdrawn_rts = rts.sequence;
  }

  rank0.send(collective_header(FrameType::eager, kStepTag + 5), kPayload);  // sent before
  const std::string reason = "rank 1's part failed: policy\x1b";  // escaped when shown
  const std::string expected = "rank 1's part failed: policy\\x1b (withdrawn by rank 1)";
  rank0.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy), 5),
             text_bytes(reason));
  for (const auto& request : {first, second, rendezvous}) {
    rank0.wait(*request);
    EXPECT_EQ(request->status.error, ErrorClass::policy);
    EXPECT_EQ(request->error_message, expected);
  }
  EXPECT_FALSE(other_recv->done.load());
  EXPECT_FALSE(other_send->done.load());
  EXPECT_FALSE(runtime_own->done.load());
  // A DENY of that send can cross the WITHDRAWN (rank 1 freed the communicator, say): no
  // violation, the peer stays healthy (checked at the end).
  rank0.send(FrameType::deny, text_bytes("crossed"), withdrawn_rts);

  // Posted later: the withdrawal is kept, so each fails as it is posted; a send sends nothing.
  for (const auto& request :
       {post_recv(kStepTag + 9, 5), post_recv(kStepTag, 5), post_send(kPayload, 5)}) {
    ASSERT_TRUE(request->done.load());
    EXPECT_EQ(request->status.error, ErrorClass::policy);
    EXPECT_EQ(request->error_message, expected);
  }
  auto before = post_recv(kStepTag + 5, 5);
  ASSERT_TRUE(before->done.load());
  EXPECT_EQ(before->status.error, ErrorClass::success) << before->error_message;
  auto next = post_send(kPayload, 6);
  FrameHeader eager;
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &eager));
  EXPECT_EQ(eager.type, FrameType::eager) << "a send of the withdrawn collective went out";
  EXPECT_EQ(payload, kPayload);

  rank0.send(collective_header(FrameType::eager, kStepTag), kPayload);
  rank0.send(collective_header(FrameType::eager, detail::internal_tag::kCommCreate), kPayload);
  for (const auto& request : {other_recv, runtime_own}) {
    rank0.wait(*request);
    EXPECT_EQ(request->status.error, ErrorClass::success) << request->error_message;
  }
  EXPECT_EQ(std::string(buffer.data()), "secret");

  // 65 collectives on: the withdrawal is gone, and a receive of that collective waits.
  EXPECT_FALSE(post_recv(kStepTag, 5 + 65)->done.load());
  EXPECT_FALSE(post_recv(kStepTag + 1, 5)->done.load());

  // The audit log says who left which collective, and why (escaped as in the error).
  const auto withdrawn = audit_records(rank0.audit_text(), "collective.withdrawn");
  ASSERT_EQ(withdrawn.size(), 1u);
  for (const std::string field :
       {"\"outcome\":\"failure\"", "\"reason\":\"rank 1's part failed: policy\\\\x1b\"",
        "\"peer\":1", "\"context\":1", "\"sequence\":5", "\"class\":\"SEMPI_ERR_POLICY\""}) {
    EXPECT_NE(withdrawn[0].find(field), std::string::npos) << field << " in " << withdrawn[0];
  }
}

// Messages of a collective this rank's part has left (failed, or abandoned) are dropped, those
// already waiting and those arriving later, and their sender's credit comes back: they would
// otherwise hold it for good, and could match a collective 65,536 calls later. Another
// collective's message with the same step is kept.
TEST(EngineFrames, MessagesOfADiscardedCollectiveAreDroppedAndTheirCreditReturned) {
  constexpr std::uint64_t kBudget = 16 * 1024;  // CREDIT frames from kBudget / 8 owed
  EngineUnderAttack rank0(
      [](transport::LocalEndpoint& local) { local.hello.limits.max_unexpected_bytes = kBudget; });
  const auto step_tag = [](std::uint32_t sequence, int step) {
    return detail::internal_tag::kScheduleBit |
           static_cast<int>(sequence << detail::internal_tag::kScheduleStepBits) | step;
  };
  const std::vector<std::uint8_t> message(kBudget / 8, 'm');
  const std::uint64_t cost = transport::eager_credit_cost(message.size());
  rank0.send(collective_header(FrameType::eager, step_tag(5, 1)), message);
  rank0.send(collective_header(FrameType::eager, step_tag(6, 1)), kPayload);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();

  rank0.engine().withdraw(*rank0.world(), detail::OpKind::bcast, 5, {}, ErrorClass::other, "");
  std::uint64_t sequence = 1;  // 0 was HELLO
  std::vector<std::uint8_t> payload;
  FrameHeader credit;
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &credit));
  EXPECT_EQ(credit.type, FrameType::credit);
  EXPECT_EQ(credit.aux, cost);

  // Arriving later: an RTS gets no answer (its sender fails it on rank 0's WITHDRAWN), an
  // EAGER message is dropped and its credit returned (the next frame rank 0 sends).
  FrameHeader rts = collective_header(FrameType::rts, step_tag(5, 3));
  rts.aux = 1 << 20;
  rank0.send(rts, {});
  rank0.send(collective_header(FrameType::eager, step_tag(5, 2)), message);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &credit));
  EXPECT_EQ(credit.type, FrameType::credit);
  EXPECT_EQ(credit.aux, cost);

  std::array<char, 16> buffer{};
  const auto post = [&](int tag, std::uint32_t collective) {
    return rank0.engine().irecv(rank0.world(), true, buffer.data(), buffer.size(), 1, tag,
                                collective);
  };
  auto dropped = post(step_tag(5, 1), 5);
  auto dropped_rts = post(step_tag(5, 3), 5);
  auto kept = post(step_tag(6, 1), 6);
  ASSERT_TRUE(kept->done.load());
  EXPECT_EQ(kept->status.error, ErrorClass::success) << kept->error_message;
  EXPECT_EQ(std::string(buffer.data()), "secret");
  EXPECT_FALSE(dropped->done.load());
  EXPECT_FALSE(dropped_rts->done.load());

  // Each dropped message is audited as dropped (frames 1, 3 and 4: the queued EAGER, the
  // later RTS and the later EAGER), and the withdrawal itself once, before them.
  const std::string audit = rank0.audit_text();
  const auto ids = [&audit](const std::string& action) {
    std::vector<std::string> out;
    for (const std::string& line : audit_records(audit, action)) {
      const auto at = line.find("\"msg\":");
      if (at == std::string::npos) return std::vector<std::string>{"no msg in " + line};
      out.push_back(line.substr(at + 6, line.find_first_of(",}", at) - at - 6));
    }
    return out;
  };
  EXPECT_EQ(ids("message.drop"), (std::vector<std::string>{"1", "3", "4"})) << audit;
  for (const std::string& line : audit_records(audit, "message.drop")) {
    EXPECT_NE(line.find("\"reason\":\"this rank left the collective\""), std::string::npos)
        << line;
  }
  EXPECT_LT(audit.find("collective.withdraw\""), audit.find("message.drop")) << audit;
  const auto withdraw = audit_records(audit, "collective.withdraw");
  ASSERT_EQ(withdraw.size(), 1u) << audit;
  EXPECT_NE(withdraw[0].find("\"sequence\":5"), std::string::npos) << withdraw[0];
  EXPECT_NE(withdraw[0].find("\"op\":\"bcast\""), std::string::npos) << withdraw[0];
  EXPECT_NE(withdraw[0].find("\"notified\":0"), std::string::npos) << withdraw[0];
}

// Withdrawals and discards go once the communicator's collectives have moved on, also when
// none of those collectives posted a transfer (zero counts): a discard kept 65,536
// collectives would drop the messages of the live one whose 16 tag bits it shares.
TEST(EngineFrames, WithdrawalsAndDiscardsGoAsCollectivesStartWithoutTransfers) {
  EngineUnderAttack rank0;
  auto& engine = rank0.engine();
  const auto step_tag = [](std::uint32_t sequence, int step) {
    const std::uint32_t low = sequence & ((1u << detail::internal_tag::kScheduleSequenceBits) - 1);
    return detail::internal_tag::kScheduleBit |
           static_cast<int>(low << detail::internal_tag::kScheduleStepBits) | step;
  };
  rank0.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy), 5),
             text_bytes("rank 1 left"));
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  engine.withdraw(*rank0.world(), detail::OpKind::bcast, 7, {}, ErrorClass::other, "");

  const std::uint32_t later = 7 + (1u << 16);  // the same 16 bits as collective 7
  ASSERT_EQ(step_tag(later, 1), step_tag(7, 1));
  rank0.world()->collective_sequence.store(later);
  engine.collective_starting(*rank0.world());

  rank0.send(collective_header(FrameType::eager, step_tag(later, 1)), kPayload);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  std::array<char, 16> buffer{};
  auto live = engine.irecv(rank0.world(), true, buffer.data(), buffer.size(), 1,
                           step_tag(later, 1), later);
  ASSERT_TRUE(live->done.load()) << "the live collective's message was dropped";
  EXPECT_EQ(live->status.error, ErrorClass::success) << live->error_message;
  EXPECT_EQ(std::string(buffer.data()), "secret");
  auto old = engine.irecv(rank0.world(), true, buffer.data(), buffer.size(), 1, step_tag(5, 1), 5);
  EXPECT_FALSE(old->done.load()) << "rank 1's withdrawal was kept: " << old->error_message;
}

// A rank that withdraws cancels its rendezvous sends in that collective still waiting for a
// CTS: they have read nothing from the application's buffer, and waiting for them would wait
// for the peer to reach that receive. A CTS that crossed the WITHDRAWN is ignored; no DATA.
TEST(EngineFrames, WithdrawingCancelsTheRendezvousSendsWithoutACts) {
  EngineUnderAttack rank0;
  auto& engine = rank0.engine();
  const std::vector<std::uint8_t> large(detail::EngineConfig{}.eager_limit + 1, 'L');
  auto send = engine.isend(*rank0.world(), detail::OpKind::bcast, large.data(), large.size(), 1,
                           kStepTag, false, 5);
  auto other = engine.isend(*rank0.world(), detail::OpKind::bcast, large.data(), large.size(), 1,
                            kStepTag, false, 6);
  std::uint64_t sequence = 1;  // 0 was HELLO
  std::vector<std::uint8_t> payload;
  FrameHeader rts;
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &rts));
  ASSERT_EQ(rts.type, FrameType::rts);
  FrameHeader other_rts;
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &other_rts));
  std::array<int, 1> peers{1};
  engine.withdraw(*rank0.world(), detail::OpKind::bcast, 5, peers, ErrorClass::buffer, "left");
  ASSERT_TRUE(send->done.load());
  EXPECT_EQ(send->status.error, ErrorClass::buffer);
  EXPECT_FALSE(other->done.load());
  FrameHeader withdrawn;
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &withdrawn));
  EXPECT_EQ(withdrawn.type, FrameType::withdrawn);

  rank0.send(FrameType::cts, {}, rts.sequence);  // crossed the WITHDRAWN: ignored
  rank0.send(FrameType::cts, {}, other_rts.sequence);
  FrameHeader data;
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &data));
  EXPECT_EQ(data.type, FrameType::data);
  EXPECT_EQ(data.aux, other_rts.sequence) << "data went out for the cancelled send";
  while (data.flags == 0) ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &data));

  // More cancelled sends than the ids kept: a CTS for the oldest is still no violation.
  std::vector<std::shared_ptr<detail::RequestState>> many;
  std::vector<std::uint64_t> ids;
  const std::size_t count = 66;  // more than the 64 ids a peer keeps (kMaxWithdrawnSends)
  for (std::size_t i = 0; i < count; ++i) {
    many.push_back(engine.isend(*rank0.world(), detail::OpKind::bcast, large.data(),
                                large.size(), 1, kStepTag, false, 7));
    FrameHeader h;
    ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &h));
    ASSERT_EQ(h.type, FrameType::rts);
    ids.push_back(h.sequence);
  }
  engine.withdraw(*rank0.world(), detail::OpKind::bcast, 7, peers, ErrorClass::buffer, "left");
  for (const auto& request : many) EXPECT_TRUE(request->done.load());
  ASSERT_TRUE(rank0.client().read_frame(payload, sequence++, &withdrawn));
  EXPECT_EQ(withdrawn.type, FrameType::withdrawn);
  rank0.send(FrameType::cts, {}, ids.front());
  rank0.send(FrameType::cts, {}, ids.back());
  // The peer is still healthy: its next message, read after both CTS, is received.
  std::array<char, 16> buffer{};
  auto after = engine.irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.send(FrameType::eager, kPayload);
  rank0.wait(*after);
  EXPECT_EQ(after->status.error, ErrorClass::success) << after->error_message;
}

// A peer's WITHDRAWN also cancels its rendezvous sends that had no CTS: their RTS waiting here
// are dropped, and a receive that matched one (its CTS crossed the WITHDRAWN) fails instead of
// waiting for data that will not come. Both are audited as dropped.
TEST(EngineFrames, AWithdrawalDropsThePeersUnansweredRendezvousMessages) {
  EngineUnderAttack rank0;
  auto& engine = rank0.engine();
  // Collective 5's tags, as its schedule makes them.
  const int step1 = kStepTag | (5 << detail::internal_tag::kScheduleStepBits);
  const int step2 = step1 + 1;
  std::array<char, 16> buffer{};
  auto matched = engine.irecv(rank0.world(), true, buffer.data(), buffer.size(), 1, step1, 5);
  FrameHeader rts = collective_header(FrameType::rts, step1);
  rts.aux = 1 << 20;
  rank0.send(rts, {});  // frame 1: matched, CTS sent
  FrameHeader queued = collective_header(FrameType::rts, step2);
  queued.aux = 1 << 20;
  rank0.send(queued, {});  // frame 2: waits as unexpected
  FrameHeader queued_too = collective_header(FrameType::rts, step2 + 1);
  queued_too.aux = 1 << 20;
  rank0.send(queued_too, {});  // frame 3: the same
  rank0.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::buffer), 5),
             text_bytes("rank 1 left"));
  rank0.wait(*matched);
  EXPECT_EQ(matched->status.error, ErrorClass::buffer);
  // Its RTS stays as a tombstone: a receive posted later fails with the withdrawal's error,
  // also once the withdrawal itself is forgotten (here pushed out by 8 later ones).
  for (std::uint32_t s = 6; s < 6 + detail::Engine::kMaxWithdrawnPerPeer; ++s) {
    rank0.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::other), s), {});
  }
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  auto later = engine.irecv(rank0.world(), true, buffer.data(), buffer.size(), 1, step2, 5);
  ASSERT_TRUE(later->done.load()) << "the cancelled RTS was matched";
  EXPECT_EQ(later->status.error, ErrorClass::buffer);
  EXPECT_NE(later->error_message.find("rank 1 left"), std::string::npos) << later->error_message;
  // Also after rank 1 has failed: the tombstone says more than "rank 1 failed".
  auto p2p = engine.irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  ::shutdown(rank0.client().fd(), SHUT_RDWR);
  rank0.wait(*p2p);
  ASSERT_EQ(p2p->status.error, ErrorClass::peer_failed) << p2p->error_message;
  auto last = engine.irecv(rank0.world(), true, buffer.data(), buffer.size(), 1, step2 + 1, 5);
  ASSERT_TRUE(last->done.load());
  EXPECT_EQ(last->status.error, ErrorClass::buffer) << last->error_message;
  const auto drops = audit_records(rank0.audit_text(), "message.drop");
  ASSERT_EQ(drops.size(), 3u);
  for (const auto& line : drops) {
    EXPECT_NE(line.find("\"reason\":\"the sender left the collective\""), std::string::npos)
        << line;
  }
}

// Under message audit, a message that arrives for a collective this rank left is audited as
// dropped only; one that was waiting when it left was received first, then dropped.
TEST(EngineFrames, AMessageDroppedOnArrivalIsNotAuditedAsReceived) {
  EngineUnderAttack rank0({}, policy_for("enforce", "*", "metadata"));
  rank0.engine().register_comm(*rank0.world());
  auto step = [](int tag) {
    FrameHeader h = collective_header(FrameType::eager, tag);
    h.op = static_cast<std::uint16_t>(detail::OpKind::bcast);
    return h;
  };
  rank0.send(step(kStepTag), kPayload);  // frame 1: waits as unexpected
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  rank0.engine().withdraw(*rank0.world(), detail::OpKind::bcast, 0, {}, ErrorClass::other, "");
  rank0.send(step(kStepTag + 1), kPayload);  // frame 2: arrives after
  rank0.send(FrameType::eager, kPayload);    // frame 3, point-to-point: all before it are read
  std::array<char, 16> buffer{};
  auto marker = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*marker);
  ASSERT_EQ(marker->status.error, ErrorClass::success) << marker->error_message;
  const std::string audit = rank0.audit_text();
  const auto msgs = [&audit](const std::string& action) {
    std::string out;
    for (const std::string& line : audit_records(audit, action)) {
      const auto at = line.find("\"msg\":");
      if (at == std::string::npos) return "no msg in " + line;
      out += line.substr(at + 6, line.find_first_of(",}", at) - at - 6) + ' ';
    }
    return out;
  };
  EXPECT_EQ(msgs("message.receive"), "1 3 ") << audit;
  EXPECT_EQ(msgs("message.drop"), "1 2 ") << audit;
}

// A peer cannot turn a stream of WITHDRAWN frames into audit records without bound: past
// kAuditedDeparturesPerPeer, one record says that no more follow.
TEST(EngineFrames, DepartureRecordsOfAPeerAreBounded) {
  EngineUnderAttack rank0;
  const std::uint32_t limit = detail::Engine::kAuditedDeparturesPerPeer;
  for (std::uint32_t first = 0; first < limit + 10; first += 100) {
    std::vector<std::pair<FrameHeader, std::vector<std::uint8_t>>> batch;
    for (std::uint32_t s = first; s < first + 100; ++s) {
      batch.emplace_back(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::other), s),
                         std::vector<std::uint8_t>{});
    }
    rank0.send_together(std::move(batch));
  }
  rank0.send(FrameType::eager, kPayload);  // point-to-point, after all of them
  std::array<char, 16> buffer{};
  auto marker = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*marker);
  ASSERT_EQ(marker->status.error, ErrorClass::success) << marker->error_message;
  const std::string audit = rank0.audit_text();
  EXPECT_EQ(audit_records(audit, "collective.withdrawn").size(), limit);
  const auto note = audit_records(audit, "audit.limit");
  ASSERT_EQ(note.size(), 1u);
  EXPECT_NE(note[0].find("\"peer\":1"), std::string::npos) << note[0];
  EXPECT_EQ(audit.find("peer.failure"), std::string::npos) << "an honest-looking peer was cut off";
}

// Withdrawals are kept per peer up to a bound; past it the oldest goes, and a receive of that
// collective waits for its message as it would without WITHDRAWN.
TEST(EngineFrames, WithdrawalsAreBoundedPerPeer) {
  EngineUnderAttack rank0;
  const int kept = static_cast<int>(detail::Engine::kMaxWithdrawnPerPeer);
  for (int i = 0; i <= kept; ++i) {
    rank0.send(withdrawn_header(static_cast<std::uint64_t>(ErrorClass::policy),
                                static_cast<std::uint32_t>(i)),
               text_bytes("gone"));
  }
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  std::array<char, 16> buffer{};
  const auto post = [&](std::uint32_t collective) {
    return rank0.engine().irecv(rank0.world(), true, buffer.data(), buffer.size(), 1, kStepTag,
                                collective);
  };
  auto oldest = post(0);
  EXPECT_FALSE(oldest->done.load());
  for (int i = 1; i <= kept; ++i) {
    auto r = post(static_cast<std::uint32_t>(i));
    ASSERT_TRUE(r->done.load()) << i;
    EXPECT_EQ(r->status.error, ErrorClass::policy);
  }
  rank0.send(collective_header(FrameType::eager, kStepTag), kPayload);
  rank0.wait(*oldest);
  EXPECT_EQ(oldest->status.error, ErrorClass::success) << oldest->error_message;
}

// A peer that never says GOODBYE holds finalize only until its deadline, and is then named in
// the audit log, before the chain closes: closing on it is no clean end. One that said GOODBYE
// is not.
TEST(EngineFrames, APeerWithoutGoodbyeAtTheFinalizeDeadlineIsAFailure) {
  {
    EngineUnderAttack rank0;
    rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
    const auto failures = audit_records(rank0.audit_text(), "peer.failure");
    ASSERT_EQ(failures.size(), 1u);
    EXPECT_NE(failures[0].find("no GOODBYE before the finalize deadline"), std::string::npos)
        << failures[0];
    EXPECT_NE(failures[0].find("\"peer\":1"), std::string::npos) << failures[0];
  }
  {
    EngineUnderAttack rank0;
    rank0.send(FrameType::goodbye);
    rank0.wait_until_delivered();
    rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
    EXPECT_TRUE(audit_records(rank0.audit_text(), "peer.failure").empty());
  }
  // A launcher that never confirmed that every rank reached finalize: no peer could have said
  // GOODBYE, so none is blamed; the timeout itself is recorded.
  int launcher[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, launcher), 0);
  EngineUnderAttack rank0({}, nullptr, {}, launcher[0]);
  rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
  const std::string audit = rank0.audit_text();
  ::close(launcher[0]);
  ::close(launcher[1]);
  EXPECT_TRUE(audit_records(audit, "peer.failure").empty());
  EXPECT_EQ(audit_records(audit, "finalize.timeout").size(), 1u);
}

// Messages still queued at finalize were never received: each is a message.drop record, so
// that the sender's message.send has a counterpart, and one on a communicator this rank never
// created (which the policy never judged) leaves a trace at all.
TEST(EngineFrames, MessagesNeverReceivedAreAuditedAsDroppedAtFinalize) {
  EngineUnderAttack rank0({}, policy_for("enforce", "*"));
  rank0.engine().register_comm(*rank0.world());
  rank0.send(FrameType::eager, kPayload);  // on world, never received (channel sequence 1)
  FrameHeader unknown;
  unknown.type = FrameType::eager;
  unknown.context = 40;  // no communicator of rank 0 has it (sequence 2)
  unknown.source = 1;
  unknown.tag = kTag;
  rank0.send(unknown, kPayload);
  rank0.send(FrameType::goodbye);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  const auto drops = audit_records(rank0.audit_text(), "message.drop");
  ASSERT_EQ(drops.size(), 2u);
  EXPECT_NE(drops[0].find("\"msg\":1,"), std::string::npos) << drops[0];
  EXPECT_NE(drops[0].find("not received before finalize"), std::string::npos) << drops[0];
  EXPECT_NE(drops[1].find("\"msg\":2,"), std::string::npos) << drops[1];
  EXPECT_NE(drops[1].find("\"context\":40,"), std::string::npos) << drops[1];
  EXPECT_NE(drops[1].find("its communicator was never created on this rank"), std::string::npos)
      << drops[1];
}

// An RTS whose data can no longer come leaves the queue when its sender's channel closes, or
// the job aborts: it is a message.drop then, saying which.
TEST(EngineFrames, AnRtsLeftWhenItsSenderClosesIsAuditedAsDropped) {
  const std::vector<std::pair<FrameType, std::string>> endings = {
      {FrameType::goodbye, "its sender finalized"},
      {FrameType::hello, "its sender failed"},  // hello: no frame, the channel just closes
      {FrameType::abort, "the job aborted"}};
  for (const auto& [ending, reason] : endings) {
    EngineUnderAttack rank0;
    rank0.send(FrameType::rts, {}, 1u << 20);  // channel sequence 1, never received
    if (ending == FrameType::goodbye) rank0.send(ending);
    if (ending == FrameType::abort) rank0.send(ending, text_bytes("bye"));
    rank0.client().close_notify();
    ::shutdown(rank0.client().fd(), SHUT_RDWR);
    // Rank 1 is gone before rank 0 finalizes (which would drop the RTS as not received, and
    // tell its sender so).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      const auto found = rank0.engine().iprobe(*rank0.world(), false, 1, kTag + 1);
      if (found && found->error != ErrorClass::success) break;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "rank 1's close was never read";
    }
    rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::seconds(30));
    const auto drops = audit_records(rank0.audit_text(), "message.drop");
    ASSERT_EQ(drops.size(), 1u) << reason;
    EXPECT_NE(drops[0].find("\"msg\":1,"), std::string::npos) << drops[0];
    EXPECT_NE(drops[0].find(reason), std::string::npos) << drops[0];
  }
}

// In dry-run mode a would-be denial is delivered, so the refusal cut-off never ends a stream
// of them: past kAuditedDryRunDenials per peer, communicator, reason and direction one
// audit.limit record says so, and finalize records how many were not written.
TEST(EngineFrames, DryRunDenialsAreAuditedUpToALimitThenCounted) {
  EngineUnderAttack rank0({}, policy_for("audit", "not-world"));
  rank0.engine().register_comm(*rank0.world());
  const auto limit = detail::Engine::kAuditedDryRunDenials;
  for (std::uint64_t i = 0; i < limit + 5; ++i) rank0.send(FrameType::eager, kPayload);
  rank0.send(FrameType::goodbye);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  const std::string audit = rank0.audit_text();
  const auto denials = audit_records(audit, "policy.deny");
  ASSERT_EQ(denials.size(), limit) << audit.substr(0, 2000);
  EXPECT_NE(denials[0].find("\"dry_run\":true"), std::string::npos) << denials[0];
  const auto limits = audit_records(audit, "audit.limit");
  ASSERT_EQ(limits.size(), 2u) << audit.substr(0, 2000);
  EXPECT_NE(limits[0].find("\"limit\":" + std::to_string(limit)), std::string::npos) << limits[0];
  EXPECT_NE(limits[1].find("\"not_written\":5"), std::string::npos) << limits[1];
  for (const auto& line : limits) {
    EXPECT_NE(line.find("\"records\":\"policy.deny\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"direction\":\"receive\""), std::string::npos) << line;
  }
  // Delivered all the same (never received here, so each is a drop at finalize).
  EXPECT_EQ(audit_records(audit, "message.drop").size(), limit + 5);
}

// The reasons a peer gives (ABORT, DENY) end up in error messages on terminals: a peer's
// control characters and line breaks are escaped, not passed on.
TEST(EngineFrames, ReasonsFromAPeerAreMadePrintable) {
  const std::string hostile = "stop\x1b[2J\n[rank 0] forged line";
  const std::string escaped = "stop\\x1b[2J\\x0a[rank 0] forged line";
  {
    EngineUnderAttack rank0;
    const char message[] = "hi";
    auto send = rank0.engine().isend(*rank0.world(), detail::OpKind::p2p, message,
                                     sizeof message, 1, kTag, /*synchronous=*/true);
    std::vector<std::uint8_t> payload;
    FrameHeader eager;
    ASSERT_TRUE(rank0.client().read_frame(payload, 1, &eager));
    rank0.send(FrameType::deny, text_bytes(hostile), eager.aux,
               transport::frame_flags::kSynchronous);
    rank0.wait(*send);
    EXPECT_EQ(send->status.error, ErrorClass::policy);
    EXPECT_NE(send->error_message.find(escaped), std::string::npos) << send->error_message;
  }
  EngineUnderAttack rank0;
  std::array<char, 16> buffer{};
  auto request = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.send(FrameType::abort, text_bytes(hostile));
  rank0.wait(*request);
  const std::string reason = rank0.engine().abort_reason();
  EXPECT_NE(reason.find(escaped), std::string::npos) << reason;
  EXPECT_EQ(reason.find_first_of("\x1b\n"), std::string::npos) << reason;
}

// A synchronous send whose frame is still queued here cannot have been read by the peer, so a
// DENY for it is forged. Accepting it would complete the send while the queue still encrypts
// from the application's buffer, which the application may then free or reuse.
TEST(EngineFrames, DenyForAMessageStillQueuedIsAProtocolViolation) {
  EngineUnderAttack rank0;
  rank0.shrink_socket_buffers();
  // Rank 1 reads nothing: these fill the connection, so what follows stays queued at rank 0.
  const std::vector<std::uint8_t> bulk(60000, 1);
  std::vector<std::shared_ptr<detail::RequestState>> sends;
  for (int i = 0; i < 64; ++i) {
    sends.push_back(rank0.engine().isend(*rank0.world(), detail::OpKind::p2p, bulk.data(),
                                         bulk.size(), 1, kTag, false));
  }
  const std::vector<std::uint8_t> secret(60000, 's');
  auto ssend = rank0.engine().isend(*rank0.world(), detail::OpKind::p2p, secret.data(),
                                    secret.size(), 1, kTag, /*synchronous=*/true);
  rank0.send(FrameType::deny, text_bytes("refused"), /*aux=*/1,  // sync ids count from 1
             transport::frame_flags::kSynchronous);
  rank0.wait(*ssend);
  EXPECT_EQ(ssend->status.error, ErrorClass::peer_failed) << ssend->error_message;
  EXPECT_NE(ssend->error_message.find("protocol violation: DENY for a message not sent yet"),
            std::string::npos)
      << ssend->error_message;
  for (const auto& send : sends) rank0.wait(*send);  // the closed channel lets go of `bulk`
}

// Frames behind an ABORT, in the same read, are not delivered: the job is over.
// FINALIZING promises no new message, not silence: what rank 1 sent before it is still
// received, a rendezvous it announced before still completes (its DATA follows the frame),
// and a point-to-point receive nothing matches now is marked, not failed, until waited on.
TEST(EngineFrames, WhatAPeerSentBeforeFinalizingStillArrives) {
  EngineUnderAttack rank0;
  std::array<char, 16> big{};
  auto rendezvous = rank0.engine().irecv(rank0.world(), false, big.data(), big.size(), 1, kTag);
  rank0.send(FrameType::rts, {}, kPayload.size());  // channel sequence 1: transfer 1
  rank0.send(FrameType::eager, kPayload, 0, 0, 1, kTag + 1);
  rank0.send(FrameType::finalizing, {}, 0, 0, 1, 0);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  std::array<char, 16> small{};
  auto early = rank0.engine().irecv(rank0.world(), false, small.data(), small.size(), 1, kTag + 1);
  rank0.wait(*early);
  EXPECT_EQ(early->status.error, ErrorClass::success) << early->error_message;
  EXPECT_EQ(std::memcmp(small.data(), kPayload.data(), kPayload.size()), 0);
  std::array<char, 16> none{};
  auto never = rank0.engine().irecv(rank0.world(), false, none.data(), none.size(), 1, kTag + 2);
  EXPECT_FALSE(rank0.engine().test(*never));
  EXPECT_TRUE(never->unmatchable.load());
  rank0.send(FrameType::data, kPayload, 1, transport::frame_flags::kLast);
  rank0.wait(*rendezvous);
  EXPECT_EQ(rendezvous->status.error, ErrorClass::success) << rendezvous->error_message;
  EXPECT_EQ(std::memcmp(big.data(), kPayload.data(), kPayload.size()), 0);
  rank0.wait(*never);
  EXPECT_EQ(never->status.error, ErrorClass::peer_failed);
  EXPECT_NE(never->error_message.find("rank 1 has begun to finalize"), std::string::npos)
      << never->error_message;
}

// A finalizing rank tells each sender waiting on a message it holds (an RTS, a synchronous
// EAGER) that it will not receive it: a DENY flagged UNRECEIVED, after its FINALIZING. The
// sender's send then fails as a peer's failure, not a policy refusal.
TEST(EngineFrames, AFinalizingRankTellsWaitingSendersItWillNotReceive) {
  EngineUnderAttack rank0;
  rank0.send(FrameType::rts, {}, 1u << 20);                                          // id 1
  rank0.send(FrameType::eager, kPayload, 42, transport::frame_flags::kSynchronous);  // sync 42
  rank0.send(FrameType::goodbye);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  std::vector<std::uint8_t> payload;
  FrameHeader frame;
  ASSERT_TRUE(rank0.client().read_frame(payload, 1, &frame));
  EXPECT_EQ(frame.type, FrameType::finalizing);
  std::map<std::uint64_t, std::uint16_t> denied;  // aux -> flags
  for (std::uint64_t sequence = 2; sequence <= 3; ++sequence) {
    ASSERT_TRUE(rank0.client().read_frame(payload, sequence, &frame));
    EXPECT_EQ(frame.type, FrameType::deny);
    denied[frame.aux] = frame.flags;
  }
  using transport::frame_flags::kSynchronous;
  using transport::frame_flags::kUnreceived;
  EXPECT_EQ(denied, (std::map<std::uint64_t, std::uint16_t>{{1, kUnreceived},
                                                            {42, kUnreceived | kSynchronous}}));
  ASSERT_TRUE(rank0.client().read_frame(payload, 4, &frame));
  EXPECT_EQ(frame.type, FrameType::goodbye);
  const auto drops = audit_records(rank0.audit_text(), "message.drop");
  EXPECT_EQ(drops.size(), 2u);  // neither was received
}

// An RTS on a communicator this rank never created, answered so at finalize, is dropped
// saying that, as one left to the end of finalize would be.
TEST(EngineFrames, AnRtsOnACommunicatorNeverCreatedIsDroppedSayingSo) {
  EngineUnderAttack rank0({}, policy_for("enforce", "*"));
  rank0.engine().register_comm(*rank0.world());
  FrameHeader unknown;
  unknown.type = FrameType::rts;
  unknown.context = 40;  // no communicator of rank 0 has it
  unknown.source = 1;
  unknown.tag = kTag;
  unknown.aux = 1u << 20;
  rank0.send(unknown, {});
  rank0.send(FrameType::goodbye);
  rank0.wait_until_delivered();
  rank0.until_rank0_read();
  rank0.engine().finalize(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  const auto drops = audit_records(rank0.audit_text(), "message.drop");
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_NE(drops[0].find("its communicator was never created on this rank"), std::string::npos)
      << drops[0];
}

TEST(EngineFrames, SendsAFinalizingPeerWillNotReceiveFail) {
  EngineUnderAttack rank0;
  const std::vector<char> large(4 << 20, 'x');  // above the eager limit: an RTS
  const char small[] = "hi";
  auto rendezvous = rank0.engine().isend(*rank0.world(), detail::OpKind::p2p, large.data(),
                                         large.size(), 1, kTag, false);
  auto synchronous = rank0.engine().isend(*rank0.world(), detail::OpKind::p2p, small, sizeof small,
                                          1, kTag, /*synchronous=*/true);
  std::vector<std::uint8_t> payload;
  FrameHeader rts;
  ASSERT_TRUE(rank0.client().read_frame(payload, 1, &rts));
  ASSERT_EQ(rts.type, FrameType::rts);
  FrameHeader eager;
  ASSERT_TRUE(rank0.client().read_frame(payload, 2, &eager));
  ASSERT_NE(eager.flags & transport::frame_flags::kSynchronous, 0);
  rank0.send(FrameType::finalizing, {}, 0, 0, 1, 0);
  rank0.send(FrameType::deny, {}, rts.sequence, transport::frame_flags::kUnreceived);
  rank0.send(FrameType::deny, {}, eager.aux,
             transport::frame_flags::kUnreceived | transport::frame_flags::kSynchronous);
  rank0.wait(*rendezvous);
  rank0.wait(*synchronous);
  for (const auto* send : {rendezvous.get(), synchronous.get()}) {
    EXPECT_EQ(send->status.error, ErrorClass::peer_failed) << send->error_message;
    EXPECT_NE(send->error_message.find("rank 1 has begun to finalize: it will not receive"),
              std::string::npos)
        << send->error_message;
  }
}

TEST(EngineFrames, FramesAfterAbortAreNotDelivered) {
  EngineUnderAttack rank0;
  FrameHeader abort;
  abort.type = FrameType::abort;
  abort.source = 1;
  FrameHeader eager;
  eager.source = 1;
  eager.tag = kTag;
  const std::string reason = "rank 2 failed";
  rank0.send_together({{abort, std::vector<std::uint8_t>(reason.begin(), reason.end())},
                       {eager, kPayload}});
  // The job aborted: a receive fails instead of matching what followed the ABORT.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (rank0.engine().abort_reason().empty() && std::chrono::steady_clock::now() < give_up) {
    (void)rank0.engine().iprobe(*rank0.world(), false, 1, kTag + 1);  // a round of progress
  }
  ASSERT_FALSE(rank0.engine().abort_reason().empty()) << "the ABORT was never read";
  std::array<char, 16> buffer{};
  auto request = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*request);
  EXPECT_EQ(request->status.error, ErrorClass::peer_failed) << request->error_message;
  EXPECT_EQ(buffer[0], 0) << "a message sent after ABORT was delivered";
}

// Communicator creation where rank 1 is the parent's rank 0 (the root, which hands out the new
// context id) and lies in its table.
class HostileRoot {
 public:
  explicit HostileRoot(EngineUnderAttack& rank0) : rank0_(rank0) {}

  /// Runs a split (color 0, key 0) at rank 0 while rank 1 answers with `table`; returns the
  /// error that the split raised ("" if it succeeded).
  std::string split(std::vector<std::array<std::int64_t, 3>> table) {
    auto created = std::async(std::launch::async, [&]() -> std::string {
      try {
        detail::split_communicator(rank0_.engine(), parent_, 0, 0, "hostile");
        return "";
      } catch (const Error& e) {
        return e.what();
      }
    });
    std::vector<std::uint8_t> entry;
    FrameHeader header;
    EXPECT_TRUE(rank0_.client().read_frame(entry, next_in_++, &header));
    FrameHeader reply;
    reply.context = parent_->collective_context();
    reply.source = 1;
    reply.tag = header.tag;
    reply.op = header.op;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(table.data());
    rank0_.send(reply, {bytes, table.size() * sizeof table[0]});
    if (created.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ::shutdown(rank0_.client().fd(), SHUT_RDWR);
      return "split did not finish";
    }
    return created.get();
  }

 private:
  EngineUnderAttack& rank0_;
  // The parent: world rank 1 is its rank 0; this engine (world rank 0) is its rank 1.
  std::shared_ptr<const detail::CommState> parent_ =
      std::make_shared<detail::CommState>(0, std::vector<int>{1, 0}, 0, "parent");
  std::uint64_t next_in_ = 1;  // rank 0's frames to rank 1; 0 was HELLO
};

// Context ids of world rank 1 in a 4-rank job: 2 * (2 + 4n + 1), see Engine::allocate_context.
constexpr std::int64_t kRank1Context = 6;
constexpr std::int64_t kRank0Context = 4;

TEST(EngineFrames, SplitRefusesAContextNotInTheRootsShare) {
  EngineUnderAttack rank0;
  HostileRoot root(rank0);
  const std::string error = root.split({{0, 0, kRank0Context}, {0, 0, 0}});
  EXPECT_NE(error.find("handed out context id 4, which is not its own to give"), std::string::npos)
      << error;
}

TEST(EngineFrames, SplitRefusesAContextHandedOutTwice) {
  EngineUnderAttack rank0;
  HostileRoot root(rank0);
  EXPECT_EQ(root.split({{0, 0, kRank1Context}, {0, 0, 0}}), "");
  const std::string error = root.split({{0, 0, kRank1Context}, {0, 0, 0}});
  EXPECT_NE(error.find("is already in use"), std::string::npos) << error;
}

TEST(EngineFrames, SplitRefusesATableThatAltersThisRanksEntry) {
  EngineUnderAttack rank0;
  HostileRoot root(rank0);
  const std::string error = root.split({{0, 0, kRank1Context}, {5, 0, 0}});
  EXPECT_NE(error.find("altered this rank's color or key"), std::string::npos) << error;
}


// Messages for a communicator not created here yet are decided when it is; refused then, they
// count towards the hostile cut-off like refusals decided on arrival.
TEST(EngineFrames, RefusalsDecidedAtRegistrationCountTowardsTheCutOff) {
  EngineUnderAttack rank0({}, policy_for("enforce", "world"));
  rank0.engine().register_comm(*rank0.world());
  FrameHeader early;
  early.context = kRank0Context;
  early.source = 1;
  early.tag = kTag;
  for (std::uint32_t i = 0; i < detail::Engine::kRefusalsBeforeCutoff; ++i) rank0.send(early, {});
  rank0.send(FrameType::eager, kPayload);  // on the world, after all of them
  std::array<char, 16> buffer{};
  auto marker = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*marker);
  ASSERT_EQ(marker->status.error, ErrorClass::success) << marker->error_message;
  // The communicator the early messages were for: no rule names it, so all are refused now.
  auto unnamed =
      std::make_shared<detail::CommState>(kRank0Context, std::vector<int>{0, 1}, 0, "unnamed");
  rank0.engine().register_comm(*unnamed);
  auto next = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*next);
  EXPECT_EQ(next->status.error, ErrorClass::peer_failed);
  EXPECT_NE(next->error_message.find("cut off as hostile"), std::string::npos)
      << next->error_message;
}

// Sends a message on the world behind what was sent before and receives it: once it is here,
// so is everything sent before it.
void receive_world_marker(EngineUnderAttack& rank0) {
  rank0.send(FrameType::eager, kPayload);
  std::array<char, 16> buffer{};
  auto marker = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*marker);
  ASSERT_EQ(marker->status.error, ErrorClass::success) << marker->error_message;
}

// Refused messages decided together (at registration) are each answered with their own
// reason, not the reason of the last one decided.
TEST(EngineFrames, EachDenyNamesItsOwnMessagesReason) {
  const std::string text = R"({"version": 1, "mode": "enforce", "on_violation": "drop",
    "groups": {"all": "*"}, "segmentation": [{"between": ["all", "all"]}],
    "communicators": [
      {"name": "world", "members": "*", "collectives": "*", "p2p_tags": "*"},
      {"name": "limited", "members": "*", "collectives": "*", "p2p_tags": [5],
       "max_message_bytes": 4}],
    "limits": {}, "audit": {"messages": "off"}})";
  EngineUnderAttack rank0({}, std::make_shared<const policy::Policy>(policy::Policy::compile(
                                  policy::PolicyDocument::parse(text, "test"))));
  rank0.engine().register_comm(*rank0.world());
  FrameHeader early;  // synchronous: each waits for an answer
  early.type = FrameType::eager;
  early.context = kRank0Context;
  early.source = 1;
  early.flags = transport::frame_flags::kSynchronous;
  early.tag = 9;  // not allowed on "limited"
  early.aux = 101;
  rank0.send(early, text_bytes("ok"));
  early.tag = 5;  // allowed, but too large
  early.aux = 102;
  rank0.send(early, text_bytes("ten bytes!"));
  receive_world_marker(rank0);  // once it is here, so are they
  auto limited =
      std::make_shared<detail::CommState>(kRank0Context, std::vector<int>{0, 1}, 0, "limited");
  rank0.engine().register_comm(*limited);

  std::map<std::uint64_t, std::string> reasons;
  for (std::uint64_t sequence = 1; sequence <= 2; ++sequence) {
    std::vector<std::uint8_t> payload;
    FrameHeader deny;
    ASSERT_TRUE(rank0.client().read_frame(payload, sequence, &deny));
    ASSERT_EQ(deny.type, FrameType::deny);
    reasons[deny.aux] = std::string(payload.begin(), payload.end());
  }
  EXPECT_EQ(reasons[101], policy::verdict_text(policy::Verdict::deny_tag));
  EXPECT_EQ(reasons[102], policy::verdict_text(policy::Verdict::deny_size));
}

// A policy with an open communicator and a restricted one: a communicator renamed from the
// first to the second takes on the second's rules.
std::shared_ptr<const policy::Policy> open_and_limited_policy() {
  const std::string text = R"({"version": 1, "mode": "enforce", "on_violation": "drop",
    "groups": {"all": "*"}, "segmentation": [{"between": ["all", "all"]}],
    "communicators": [
      {"name": "world", "members": "*", "collectives": "*", "p2p_tags": "*"},
      {"name": "open", "members": "*", "collectives": "*", "p2p_tags": "*"},
      {"name": "limited", "members": "*", "collectives": "*", "p2p_tags": [5]}],
    "limits": {}, "audit": {"messages": "off"}})";
  return std::make_shared<const policy::Policy>(
      policy::Policy::compile(policy::PolicyDocument::parse(text, "test")));
}

// Messages queued under a communicator's first name are judged again when it is renamed:
// otherwise a sender gets a message past the new name's rule by sending it early (even before
// the communicator exists here: it is then admitted at registration, under its first name).
TEST(EngineFrames, ARenameJudgesTheQueuedMessagesUnderTheNewName) {
  EngineUnderAttack rank0({}, open_and_limited_policy());
  rank0.engine().register_comm(*rank0.world());
  FrameHeader early;
  early.type = FrameType::eager;
  early.context = kRank0Context;
  early.source = 1;
  early.flags = transport::frame_flags::kSynchronous;  // waits for an answer
  early.tag = 9;                                       // not allowed on "limited"
  early.aux = 101;
  rank0.send(early, text_bytes("tag nine"));
  early.flags = 0;
  early.tag = 5;
  rank0.send(early, text_bytes("tag five"));
  receive_world_marker(rank0);  // once it is here, so are they
  auto comm = std::make_shared<detail::CommState>(kRank0Context, std::vector<int>{0, 1}, 0, "open");
  rank0.engine().register_comm(*comm);  // both admitted under "open"
  rank0.engine().rename_comm(*comm, "limited");

  std::array<char, 16> got{};
  auto first = rank0.engine().irecv(comm, false, got.data(), got.size(), ANY_SOURCE, ANY_TAG);
  rank0.wait(*first);
  ASSERT_EQ(first->status.error, ErrorClass::success) << first->error_message;
  ASSERT_EQ(first->status.tag, 5) << "a message of a tag 'limited' refuses was received";
  auto second = rank0.engine().irecv(comm, false, got.data(), got.size(), ANY_SOURCE, ANY_TAG);
  EXPECT_FALSE(second->done.load());
  // The synchronous sender is told, as if refused on arrival.
  const timeval limit{60, 0};
  ASSERT_EQ(::setsockopt(rank0.client().fd(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit), 0);
  std::vector<std::uint8_t> payload;
  FrameHeader deny;
  ASSERT_TRUE(rank0.client().read_frame(payload, 1, &deny));
  EXPECT_EQ(deny.type, FrameType::deny);
  EXPECT_EQ(deny.aux, 101u);
  EXPECT_EQ(std::string(payload.begin(), payload.end()),
            policy::verdict_text(policy::Verdict::deny_tag));
  EXPECT_EQ(audit_records(rank0.audit_text(), "policy.deny").size(), 1u) << rank0.audit_text();
}

// Rank 0 under open_and_limited_policy(), with an "open" communicator of ranks 0 and 1.
struct RenameScene {
  EngineUnderAttack rank0{{}, open_and_limited_policy()};
  std::shared_ptr<detail::CommState> comm =
      std::make_shared<detail::CommState>(kRank0Context, std::vector<int>{0, 1}, 0, "open");
  RenameScene() {
    rank0.engine().register_comm(*rank0.world());
    rank0.engine().register_comm(*comm);
  }
  // An eager message from rank 1 on it, of a tag "limited" does not allow.
  static FrameHeader tag_nine() {
    FrameHeader h;
    h.type = FrameType::eager;
    h.context = kRank0Context;
    h.source = 1;
    h.tag = 9;
    return h;
  }
};

// A message taken by a matched probe and put back after a rename is judged under the new
// name before anything can match it.
TEST(EngineFrames, AMatchedMessagePutBackAfterARenameIsJudgedUnderTheNewName) {
  RenameScene scene;
  auto& rank0 = scene.rank0;
  auto& comm = scene.comm;
  rank0.send(RenameScene::tag_nine(), text_bytes("tag nine"));
  receive_world_marker(rank0);  // once it is here, so is the first
  auto probed = rank0.engine().improbe(*comm, ANY_SOURCE, ANY_TAG);
  ASSERT_TRUE(probed.has_value() && probed->message != nullptr);
  rank0.engine().rename_comm(*comm, "limited");
  rank0.engine().restore_matched(*probed->message);  // dropped without being received
  std::array<char, 16> got{};
  auto recv = rank0.engine().irecv(comm, false, got.data(), got.size(), ANY_SOURCE, ANY_TAG);
  EXPECT_FALSE(recv->done.load()) << "a message of a tag 'limited' refuses was received";
  EXPECT_EQ(audit_records(rank0.audit_text(), "policy.deny").size(), 1u) << rank0.audit_text();
}

// This rank's own messages were checked as it sent them: a rename does not refuse them (a
// synchronous send to itself would otherwise never complete).
TEST(EngineFrames, ARenameLeavesThisRanksOwnQueuedMessages) {
  RenameScene scene;
  auto& rank0 = scene.rank0;
  auto& comm = scene.comm;
  const std::string text = "to myself";
  auto send =
      rank0.engine().isend(*comm, detail::OpKind::p2p, text.data(), text.size(), 0, 9, true);
  rank0.engine().rename_comm(*comm, "limited");
  std::array<char, 16> got{};
  // Delivered within irecv, which completes the synchronous send too (no wait: a message to
  // itself that never came would leave nothing for a timeout to fail).
  auto recv = rank0.engine().irecv(comm, false, got.data(), got.size(), 0, 9);
  ASSERT_TRUE(recv->done.load()) << "this rank's own message was refused at the rename";
  ASSERT_TRUE(send->done.load());
  EXPECT_EQ(recv->status.error, ErrorClass::success) << recv->error_message;
  EXPECT_EQ(send->status.error, ErrorClass::success) << send->error_message;
}

// Refusals at a rename are not the sender's doing (its messages were allowed when sent):
// they do not count towards its cut-off.
TEST(EngineFrames, RefusalsAtARenameDoNotCutTheSenderOff) {
  RenameScene scene;
  auto& rank0 = scene.rank0;
  for (std::uint32_t i = 0; i < detail::Engine::kRefusalsBeforeCutoff; ++i) {
    rank0.send(RenameScene::tag_nine(), {});
  }
  receive_world_marker(rank0);                         // once it is here, so are they
  rank0.engine().rename_comm(*scene.comm, "limited");  // refuses every one of them
  receive_world_marker(rank0);                         // rank 1 is still a peer
  EXPECT_EQ(audit_records(rank0.audit_text(), "peer.failure").size(), 0u) << rank0.audit_text();
}

// A message whose payload was still being read when the rename came is judged under the new
// name too, at the end of its frame.
TEST(EngineFrames, ARenameJudgesAMessageBeingReadUnderTheNewName) {
  RenameScene scene;
  auto& rank0 = scene.rank0;
  auto& comm = scene.comm;
  rank0.send_in_two(RenameScene::tag_nine(), kPayload,
                    [&] { rank0.engine().rename_comm(*comm, "limited"); });
  receive_world_marker(rank0);  // arrives after it
  std::array<char, 16> got{};
  auto recv = rank0.engine().irecv(comm, false, got.data(), got.size(), ANY_SOURCE, ANY_TAG);
  EXPECT_FALSE(recv->done.load()) << "a message of a tag 'limited' refuses was received";
  EXPECT_FALSE(rank0.engine().iprobe(*comm, false, ANY_SOURCE, ANY_TAG).has_value());
  EXPECT_EQ(audit_records(rank0.audit_text(), "policy.deny").size(), 1u) << rank0.audit_text();
}

// The launcher's abort can come right behind the welcome, and the rank's start-up reads both
// at once: the engine takes over what start-up read, so the abort is not lost (the rank
// used to wire the mesh and run on until SIGTERM).
TEST(EngineFrames, AnAbortReadWithTheWelcomeAbortsTheJob) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  transport::UniqueFd launcher(pair[0]);
  transport::UniqueFd rank(pair[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  ASSERT_FALSE(launch::write_bootstrap_message(launcher.get(), {{"type", "welcome"}}, deadline));
  ASSERT_FALSE(launch::write_bootstrap_message(
      launcher.get(), {{"type", "abort"}, {"reason", "rank 3 failed"}}, deadline));
  launch::BootstrapReader reader;
  nlohmann::json welcome;
  ASSERT_FALSE(launch::read_bootstrap_message(rank.get(), reader, welcome, deadline));
  ASSERT_EQ(welcome.value("type", ""), "welcome");
  detail::EngineConfig config;
  config.world_rank = 0;
  config.world_size = 1;
  detail::Engine engine(config, {}, rank.get(), std::move(reader));
  EXPECT_EQ(engine.abort_reason(), "rank 3 failed");
}

// The same decision for an eager message whose header came before its communicator existed
// here and whose payload came after: registration cannot see a message still being read, so
// the end of the frame must decide it, whether a receive was posted for it meanwhile or not.
class SplitFrame : public ::testing::TestWithParam<bool> {};

TEST_P(SplitFrame, IsRefusedToANonMemberWhenItsCommunicatorAppearsMidFrame) {
  const bool posted = GetParam();
  EngineUnderAttack rank0({}, policy_for("enforce", "*"));
  rank0.engine().register_comm(*rank0.world());
  // A communicator of world ranks 0 and 2 only: rank 1 has no right to send on it.
  auto pair = std::make_shared<detail::CommState>(kRank0Context, std::vector<int>{0, 2}, 0, "pair");
  FrameHeader intruder;
  intruder.type = FrameType::eager;
  intruder.context = kRank0Context;
  intruder.source = 1;
  intruder.tag = kTag;
  std::array<char, 16> pair_buffer{};
  std::shared_ptr<detail::RequestState> pair_recv;
  rank0.send_in_two(intruder, kPayload, [&] {
    rank0.engine().register_comm(*pair);
    if (posted) {
      pair_recv = rank0.engine().irecv(pair, false, pair_buffer.data(), pair_buffer.size(),
                                       ANY_SOURCE, ANY_TAG);
    }
  });
  rank0.send(FrameType::eager, kPayload);  // on the world: arrives after the intruder
  std::array<char, 16> buffer{};
  auto marker = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*marker);
  ASSERT_EQ(marker->status.error, ErrorClass::success) << marker->error_message;
  if (posted) {
    EXPECT_FALSE(pair_recv->done.load()) << "a non-member's message completed a receive";
  } else {
    pair_recv = rank0.engine().irecv(pair, false, pair_buffer.data(), pair_buffer.size(),
                                     ANY_SOURCE, ANY_TAG);
    EXPECT_FALSE(pair_recv->done.load()) << "a non-member's message was received";
  }
  EXPECT_FALSE(rank0.engine().iprobe(*pair, false, ANY_SOURCE, ANY_TAG).has_value());
  EXPECT_EQ(std::string(pair_buffer.data(), kPayload.size()).find("secret"), std::string::npos);
  const std::string audit = rank0.audit_text();
  EXPECT_NE(audit.find("policy.deny"), std::string::npos) << audit;
}

INSTANTIATE_TEST_SUITE_P(EngineFrames, SplitFrame, ::testing::Bool(),
                         [](const auto& param_info) {
                           return std::string(param_info.param ? "ReceivePosted" : "NoReceive");
                         });

// Audit mode relaxes the policy, not MPI's communicator semantics: a message on a communicator
// its sender is not a member of is still refused (and recorded as enforced, not dry run),
// whether a rule names that communicator ("*") or none does ("world" only).
class AuditMode : public ::testing::TestWithParam<const char*> {};

TEST_P(AuditMode, StillRefusesNonMembers) {
  EngineUnderAttack rank0({}, policy_for("audit", GetParam()));
  rank0.engine().register_comm(*rank0.world());
  // A communicator of world ranks 0 and 2 only.
  auto pair = std::make_shared<detail::CommState>(kRank0Context, std::vector<int>{0, 2}, 0, "pair");
  rank0.engine().register_comm(*pair);
  FrameHeader intruder;
  intruder.context = kRank0Context;
  intruder.source = 1;
  intruder.tag = kTag;
  rank0.send(intruder, kPayload);
  rank0.send(FrameType::eager, kPayload);  // on the world: arrives after the intruder
  std::array<char, 16> buffer{};
  auto marker = rank0.engine().irecv(rank0.world(), false, buffer.data(), buffer.size(), 1, kTag);
  rank0.wait(*marker);
  ASSERT_EQ(marker->status.error, ErrorClass::success) << marker->error_message;
  EXPECT_FALSE(rank0.engine().iprobe(*pair, false, ANY_SOURCE, ANY_TAG).has_value())
      << "a non-member's message was accepted in audit mode";
  const std::string audit = rank0.audit_text();
  EXPECT_NE(audit.find("policy.deny"), std::string::npos) << audit;
  EXPECT_EQ(audit.find("\"dry_run\":true"), std::string::npos) << audit;
}

INSTANTIATE_TEST_SUITE_P(EngineFrames, AuditMode, ::testing::Values("*", "world"),
                         [](const auto& param_info) {
                           return std::string(param_info.param[0] == '*' ? "AnyCommunicatorRule"
                                                                         : "NoRuleForIt");
                         });

}  // namespace
}  // namespace sempi::test
