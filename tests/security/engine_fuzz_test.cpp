// Random frame sequences against the engine's protocol state machine: a genuine rank 1 (raw
// OpenSSL, its own job's certificate) sends frames whose every field is drawn at random, mostly
// near valid values (the contexts, tags, ids and sizes the engine knows), to a real engine at
// rank 0 with receives and sends of its own in flight. Whatever the sequence, the engine must
// handle it without crashing (the sanitizer build runs this too), without writing past a
// receive buffer, without hanging (a marker frame sent last is received, or fails with the
// peer), and its audit log must stay well-formed.
//
// Deterministic: a fixed seed, so a failure reproduces; it prints the sequence that failed.
// SEMPI_ENGINE_FUZZ_ITERATIONS runs more (the default keeps CI's sanitizer run short).

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <nlohmann/json.hpp>

#include "core/internal_tags.hpp"
#include "policy/policy.hpp"
#include "policy/policy_document.hpp"
#include "support/engine_under_attack.hpp"

namespace sempi::test {
namespace {

using transport::FrameHeader;
using transport::FrameType;

constexpr int kMarkerTag = 4242;  // never drawn at random: only the markers carry it
// The markers' communicator: no receive the run posts on the world can take a marker.
constexpr std::uint32_t kMarkerContext = 100;
constexpr std::size_t kGuard = 64;  // bytes checked on each side of a receive buffer
constexpr std::uint8_t kGuardByte = 0xa5;

// A receive buffer between two guard zones.
struct GuardedBuffer {
  explicit GuardedBuffer(std::size_t capacity) : bytes(capacity + 2 * kGuard, kGuardByte) {}
  void* data() { return bytes.data() + kGuard; }
  [[nodiscard]] std::size_t capacity() const { return bytes.size() - 2 * kGuard; }
  [[nodiscard]] bool guards_intact() const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (bytes[i] != kGuardByte || bytes[bytes.size() - 1 - i] != kGuardByte) return false;
    }
    return true;
  }
  std::vector<std::uint8_t> bytes;
};

class FrameSource {
 public:
  explicit FrameSource(std::uint64_t seed) : rng_(seed) {}

  std::uint64_t below(std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng_);
  }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }
  template <class T>
  T pick(std::initializer_list<T> values) {
    return *(values.begin() + below(values.size()));
  }

  // Frame number `sequence` of the run (the harness numbers them from 1, after HELLO), its
  // fields mostly what its type allows, now and then anything. A DATA frame mostly continues
  // an RTS sent before it (`rts`: their sequences, which are their rendezvous ids).
  // `first_round`: mostly frames that start something (messages, withdrawals), so that more
  // runs live to answer what rank 0 sends back; later, any type.
  std::pair<FrameHeader, std::vector<std::uint8_t>> frame(
      std::uint64_t sequence, std::map<std::uint64_t, std::uint64_t>& rts, bool first_round) {
    using FT = FrameType;
    FrameHeader h;
    if (!chance(90)) {
      h.type = static_cast<FT>(1 + below(transport::kMaxFrameType));
    } else if (first_round) {
      h.type = pick({FT::eager, FT::eager, FT::eager, FT::rts, FT::rts, FT::withdrawn});
    } else {
      h.type = pick({FT::eager, FT::eager, FT::eager, FT::rts, FT::rts, FT::data, FT::data, FT::cts,
                     FT::sync_ack, FT::deny, FT::credit, FT::withdrawn, FT::goodbye});
    }
    const bool wild = chance(5);  // any value in every field
    h.source = wild && chance(50) ? pick<std::uint32_t>({0, 2, 3, 0xffffffffu}) : 1;
    h.op = wild ? static_cast<std::uint16_t>(below(20)) : 0;
    const bool collective = chance(30);
    h.context =
        wild ? static_cast<std::uint32_t>(rng_()) : pick<std::uint32_t>({0, 0, 2, 40}) | collective;
    const std::int32_t step_tag = detail::internal_tag::kScheduleBit | kTag;
    h.tag = wild         ? static_cast<std::int32_t>(rng_())
            : collective ? pick<std::int32_t>({step_tag, step_tag, 0, 1})
                         : pick<std::int32_t>({kTag, kTag, 0, 1});
    if (h.tag == kMarkerTag) h.tag = kTag;
    h.flags = wild ? pick<std::uint16_t>({transport::frame_flags::kSynchronous,
                                          transport::frame_flags::kLast,
                                          transport::frame_flags::kKnownMask})
                   : 0;
    std::size_t length = 0;
    switch (h.type) {
      case FT::eager:
        if (chance(20)) h.flags = transport::frame_flags::kSynchronous;
        length = chance(70) ? below(65) : below(8192);
        break;
      case FT::rts:
        h.aux = pick<std::uint64_t>({1, 64, 70000, 300000, 100u << 20});
        if (chance(20)) h.flags = transport::frame_flags::kSynchronous;
        rts[sequence] = h.aux;
        break;
      case FT::data:
        h.aux = !rts.empty() && chance(80)
                    ? std::next(rts.begin(), static_cast<long>(below(rts.size())))->first
                    : 1 + below(4);
        length = pick<std::size_t>({1, 64, 4096, 70000});
        if (chance(50)) h.flags = transport::frame_flags::kLast;
        break;
      case FT::cts:
      case FT::sync_ack:
        h.aux = 1 + below(3);  // rank 0's first frames after its HELLO
        break;
      case FT::deny:
        h.aux = 1 + below(3);
        if (chance(50)) h.flags = transport::frame_flags::kSynchronous;
        length = below(40);
        break;
      case FT::credit:
        h.aux = pick<std::uint64_t>({1, 256, 4096, 1u << 20});
        break;
      case FT::withdrawn:
        h.context |= 1;
        h.tag = 0;
        h.flags = 0;
        h.aux = (1 + below(11)) | (below(3) << 32);
        length = below(40);
        break;
      default:
        length = chance(80) ? 0 : below(64);
        break;
    }
    if (wild) {
      switch (below(3)) {
        case 0:
          h.aux = rng_();
          break;
        case 1:
          h.aux = below(12) | (below(3) << 32);
          break;
        default:
          break;
      }
      if (chance(50)) length = below(8192);
    }
    std::vector<std::uint8_t> payload(length);
    for (auto& b : payload) b = static_cast<std::uint8_t>(rng_());
    return {h, std::move(payload)};
  }

  // Rank 1's answers to what rank 0 sent: mostly what a genuine peer would say (a CTS for its
  // RTS, a SYNC_ACK or DENY for its synchronous message, the DATA of an RTS of ours it
  // cleared), now and then a DENY instead, or a transfer cut short or overlong.
  std::vector<std::pair<FrameHeader, std::vector<std::uint8_t>>> answers(
      const std::vector<FrameHeader>& from_rank0,
      const std::map<std::uint64_t, std::uint64_t>& rts) {
    std::vector<std::pair<FrameHeader, std::vector<std::uint8_t>>> out;
    const auto answer = [&out](FrameType type, std::uint64_t aux, std::uint16_t flags,
                               std::vector<std::uint8_t> payload) {
      FrameHeader h;
      h.type = type;
      h.source = 1;
      h.aux = aux;
      h.flags = flags;
      out.emplace_back(h, std::move(payload));
    };
    const std::vector<std::uint8_t> reason{'n', 'o'};
    for (const FrameHeader& h : from_rank0) {
      const bool synchronous = (h.flags & transport::frame_flags::kSynchronous) != 0;
      if (h.type == FrameType::rts) {
        if (chance(75))
          answer(FrameType::cts, h.sequence, 0, {});
        else if (chance(50))
          answer(FrameType::deny, h.sequence, 0, reason);
      } else if (h.type == FrameType::eager && synchronous) {
        if (chance(70))
          answer(FrameType::sync_ack, h.sequence, 0, {});
        else if (chance(50))
          answer(FrameType::deny, h.sequence, transport::frame_flags::kSynchronous, reason);
      } else if (h.type == FrameType::cts) {
        const auto it = rts.find(h.aux);
        if (it == rts.end()) continue;
        // At most 1 MiB of it; the rest of a larger message never comes.
        std::uint64_t left = std::min<std::uint64_t>(it->second, 1u << 20);
        if (chance(10)) left = chance(50) ? left / 2 : left + 1;  // cut short, or one too many
        while (left > 0) {
          const std::uint64_t chunk = std::min<std::uint64_t>(left, 65536);
          left -= chunk;
          const bool last = left == 0 && it->second <= (1u << 20);
          answer(FrameType::data, h.aux, last ? transport::frame_flags::kLast : 0,
                 std::vector<std::uint8_t>(chunk, 3));
        }
      }
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

std::string describe(const FrameHeader& h, std::size_t length) {
  std::ostringstream s;
  s << transport::frame_type_name(h.type) << " flags " << h.flags << " op " << h.op << " context "
    << h.context << " source " << h.source << " tag " << h.tag << " aux " << h.aux << " length "
    << length;
  return s.str();
}

// The headers of the frames rank 0 has sent so far, read without waiting for more (a frame
// still on its way is waited for, bounded by the socket's receive timeout). `next_sequence`
// becomes 0 once the stream is closed or out of step: nothing more is read from it.
std::vector<FrameHeader> frames_from_rank0(RawTlsClient& client, std::uint64_t& next_sequence) {
  std::vector<FrameHeader> headers;
  std::vector<std::uint8_t> payload;
  while (next_sequence != 0) {
    pollfd p{client.fd(), POLLIN, 0};
    if (SSL_pending(client.ssl()) == 0 && ::poll(&p, 1, 0) != 1) break;
    FrameHeader h;
    if (!client.read_frame(payload, next_sequence, &h)) {
      next_sequence = 0;
      break;
    }
    ++next_sequence;
    headers.push_back(h);
  }
  return headers;
}

// A marker: once rank 0 has received it (or failed it with its peer), every frame before it
// has been handled.
std::pair<FrameHeader, std::vector<std::uint8_t>> marker_frame() {
  FrameHeader h;
  h.type = FrameType::eager;
  h.context = kMarkerContext;
  h.source = 1;
  h.tag = kMarkerTag;
  return {h, {'m'}};
}

// The policies a sequence runs under: none, all allowed, a tag list that refuses most of the
// drawn tags (the marker's allowed), and a dry run that refuses everything but delivers it.
std::shared_ptr<const policy::Policy> policy_number(std::uint64_t n) {
  if (n == 0) return nullptr;
  std::string communicators;
  std::string mode = "enforce";
  if (n == 1) {
    communicators = R"([{"name": "*", "members": "*", "collectives": "*", "p2p_tags": "*"}])";
  } else if (n == 2) {
    communicators = R"([{"name": "world", "members": "*", "collectives": ["barrier"],
                         "p2p_tags": [0], "max_message_bytes": 64},
                        {"name": "fuzz-marker", "members": "*", "p2p_tags": [4242]}])";
  } else {
    mode = "audit";
    communicators = R"([{"name": "other", "members": "*", "collectives": "*", "p2p_tags": "*"}])";
  }
  const std::string text = R"({"version": 1, "mode": ")" + mode +
                           R"(", "on_violation": "drop", "groups": {"all": "*"},
      "segmentation": [{"between": ["all", "all"]}], "communicators": )" +
                           communicators + R"(, "limits": {}, "audit": {"messages": "metadata"}})";
  return std::make_shared<const policy::Policy>(
      policy::Policy::compile(policy::PolicyDocument::parse(text, "engine fuzz")));
}

int iterations() {
  const char* text = std::getenv("SEMPI_ENGINE_FUZZ_ITERATIONS");
  return text != nullptr && std::atoi(text) > 0 ? std::atoi(text) : 400;
}

TEST(EngineFuzz, RandomFrameSequencesNeitherCrashNorHangNorOverrunBuffers) {
  const int runs = iterations();
  for (int run = 0; run < runs; ++run) {
    FrameSource random(0x5e3b1 + static_cast<std::uint64_t>(run));
    std::ostringstream story;  // what this run did, printed if it fails
    const std::uint64_t policy_kind = random.below(4);
    story << "run " << run << ", policy " << policy_kind << "\n";
    // The application's buffers outlive the engine, as they must.
    std::array<GuardedBuffer, 2> marker_buffers{GuardedBuffer(16), GuardedBuffer(16)};
    std::vector<GuardedBuffer> buffers;
    buffers.reserve(4);
    const std::vector<std::uint8_t> outgoing(random.chance(20) ? 300000 : 32, 7);
    EngineUnderAttack rank0({}, policy_number(policy_kind));
    detail::Engine& engine = rank0.engine();
    engine.register_comm(*rank0.world());

    const auto markers = std::make_shared<detail::CommState>(
        kMarkerContext, std::vector<int>{0, 1, 2, 3}, 0, "fuzz-marker");
    engine.register_comm(*markers);
    timeval read_timeout{10, 0};  // bounds frames_from_rank0
    ::setsockopt(rank0.client().fd(), SOL_SOCKET, SO_RCVTIMEO, &read_timeout, sizeof read_timeout);

    std::vector<std::shared_ptr<detail::RequestState>> requests;
    for (std::uint64_t i = random.below(4); i > 0; --i) {
      buffers.emplace_back(random.pick<std::size_t>({0, 1, 8, 64, 4096}));
      const bool collective = random.chance(30);
      const int source = random.chance(70) ? 1 : ANY_SOURCE;
      const int tag = random.chance(70) ? kTag : ANY_TAG;
      story << "irecv collective " << collective << " source " << source << " tag " << tag
            << " capacity " << buffers.back().capacity() << "\n";
      requests.push_back(engine.irecv(rank0.world(), collective, buffers.back().data(),
                                      buffers.back().capacity(), source, tag,
                                      static_cast<std::uint32_t>(random.below(3))));
    }
    if (random.chance(50)) {
      const bool synchronous = random.chance(50);
      story << "isend " << outgoing.size() << " bytes, synchronous " << synchronous << "\n";
      requests.push_back(engine.isend(*rank0.world(), detail::OpKind::p2p, outgoing.data(),
                                      outgoing.size(), 1, kTag, synchronous));
    }

    // Two rounds: random frames, then rank 1's answers to what rank 0 sent meanwhile (and a
    // few more random ones), each closed by a marker.
    std::map<std::uint64_t, std::uint64_t> rts;  // rank 1's RTS: sequence (its id), size
    std::uint64_t sequence = 1;                  // rank 1's next frame (0 was HELLO)
    std::uint64_t rank0_sequence = 1;            // rank 0's next frame
    for (std::size_t round = 0; round < marker_buffers.size(); ++round) {
      GuardedBuffer& buffer = marker_buffers[round];
      auto marker = engine.irecv(markers, false, buffer.data(), buffer.capacity(), 1, kMarkerTag);
      std::vector<std::pair<FrameHeader, std::vector<std::uint8_t>>> frames;
      if (round > 0) {
        frames = random.answers(frames_from_rank0(rank0.client(), rank0_sequence), rts);
      }
      for (std::uint64_t i = round == 0 ? 1 + random.below(8) : random.below(3); i > 0; --i) {
        frames.push_back(random.frame(sequence + frames.size(), rts, round == 0));
      }
      for (const auto& [h, payload] : frames) {
        story << "frame " << describe(h, payload.size()) << "\n";
      }
      frames.push_back(marker_frame());
      sequence += frames.size();
      story << "marker " << round << "\n";
      // The write fails only if rank 0 closed the channel on an earlier frame of this run.
      if (!rank0.try_send_together(std::move(frames))) story << "(rank 0 closed the channel)\n";
      rank0.wait(*marker);
      ASSERT_TRUE(marker->done.load()) << story.str();
      if (marker->status.error == ErrorClass::success) {
        EXPECT_EQ(marker->status.bytes, 1u) << story.str();
      } else {
        EXPECT_FALSE(marker->error_message.empty()) << story.str();
        break;  // the channel is gone: no answers to give
      }
    }
    (void)engine.iprobe(*rank0.world(), false, ANY_SOURCE, ANY_TAG);
    for (const auto& buffer : marker_buffers) EXPECT_TRUE(buffer.guards_intact()) << story.str();
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      EXPECT_TRUE(buffers[i].guards_intact()) << "receive " << i << "\n" << story.str();
    }
    for (const auto& request : requests) {
      if (request->done.load() && request->status.error == ErrorClass::success &&
          request->kind == detail::RequestKind::recv) {
        EXPECT_LE(request->status.bytes, request->capacity) << story.str();
      }
    }

    // Now and then the run ends in finalize (what is still queued is audited there): rank 1
    // says GOODBYE and reads whatever rank 0 still sends until rank 0 closes the channel, so
    // that a full socket holds nothing up.
    const bool finalize = random.chance(35);
    if (finalize) {
      story << "GOODBYE, finalize\n";
      FrameHeader goodbye;
      goodbye.type = FrameType::goodbye;
      goodbye.source = 1;
      (void)rank0.try_send_together({{goodbye, {}}});
      auto reader = std::async(std::launch::async, [&rank0] { rank0.client().drain(); });
      engine.finalize(std::chrono::steady_clock::now() + std::chrono::seconds(30));
      if (reader.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
        ::shutdown(rank0.client().fd(), SHUT_RDWR);
        ADD_FAILURE() << "rank 0 never closed the channel after finalize\n" << story.str();
      }
    }

    // Every audit record is one well-formed JSON object on its own line.
    const std::string text = rank0.audit_text();
    std::istringstream audit(text);
    for (std::string line; std::getline(audit, line);) {
      const auto record = nlohmann::json::parse(line, nullptr, false);
      ASSERT_TRUE(record.is_object()) << line << "\n" << story.str();
    }
    if (finalize) {
      EXPECT_NE(text.find("\"action\":\"rank.finalize\""), std::string::npos) << story.str();
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace sempi::test
