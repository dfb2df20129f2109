#pragma once
// Rank 0's real engine on a channel accepted from rank 1, a genuine rank on raw OpenSSL (its
// own job's certificate) that the test drives frame by frame: the harness of the tests that
// attack the engine's protocol state machine (tests/security/engine_*_test.cpp).

#include <gtest/gtest.h>

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "audit/audit_log.hpp"
#include "core/comm_state.hpp"
#include "core/engine.hpp"
#include "policy/policy.hpp"
#include "support/established_peer.hpp"
#include "support/temp_dir.hpp"
#include "transport/frame.hpp"

namespace sempi::test {

inline constexpr int kTag = 7;

// Rank 0's engine on the accepted channel, with an audit log, and rank 1's raw TLS stream.
class EngineUnderAttack {
 public:
  explicit EngineUnderAttack(const EstablishedPeer::ServerTweak& tweak = {},
                             std::shared_ptr<const policy::Policy> policy = nullptr,
                             const transport::ChannelLimits& rank1_limits = {},
                             int bootstrap_fd = -1)
      : peer_(tweak, {}, rank1_limits) {
    std::vector<std::unique_ptr<transport::Channel>> channels;  // index: world rank
    channels.emplace_back();
    channels.push_back(peer_.server.take_channel());
    server_fd_ = channels.back()->native_handle();
    channels.resize(peer_.job.world_size());
    detail::EngineConfig config;
    config.policy = std::move(policy);
    config.world_rank = 0;
    config.world_size = static_cast<int>(peer_.job.world_size());
    config.audit = audit::AuditLog::create(dir_.path() / "rank-0.audit",
                                           {peer_.job.ca().job().hex(), 0, true});
    audit_ = config.audit;
    engine_ = std::make_unique<detail::Engine>(config, std::move(channels), bootstrap_fd);
    world_ = std::make_shared<detail::CommState>(0, std::vector<int>{0, 1, 2, 3}, 0, "world");
  }
  ~EngineUnderAttack() { engine_.reset(); }

  RawTlsClient& client() { return peer_.client; }
  detail::Engine& engine() { return *engine_; }
  const std::shared_ptr<detail::CommState>& world() const { return world_; }

  /// Writes a frame from rank 1 with the next sequence number.
  void send(transport::FrameType type, std::span<const std::uint8_t> payload = {},
            std::uint64_t aux = 0, std::uint16_t flags = 0, std::uint32_t source = 1,
            std::int32_t tag = kTag) {
    transport::FrameHeader h;
    h.type = type;
    h.flags = flags;
    h.source = source;
    h.tag = tag;
    h.aux = aux;
    send(h, payload);
  }
  /// The same for a header filled in by the caller (its sequence and length are set here).
  void send(transport::FrameHeader h, std::span<const std::uint8_t> payload) {
    h.sequence = next_sequence_++;
    ASSERT_TRUE(peer_.client.write_frame(h, payload));
  }
  /// Frames from rank 1 in one TLS record, so that rank 0 reads them in one round.
  void send_together(
      std::vector<std::pair<transport::FrameHeader, std::vector<std::uint8_t>>> frames) {
    ASSERT_TRUE(try_send_together(std::move(frames)));
  }
  /// The same; false if the write fails (rank 0 closed the channel on an earlier frame).
  bool try_send_together(
      std::vector<std::pair<transport::FrameHeader, std::vector<std::uint8_t>>> frames) {
    std::vector<std::uint8_t> bytes;
    for (auto& [h, payload] : frames) {
      h.sequence = next_sequence_++;
      h.length = payload.size();
      const auto encoded = transport::encode_frame_header(h);
      bytes.insert(bytes.end(), encoded.begin(), encoded.end());
      bytes.insert(bytes.end(), payload.begin(), payload.end());
    }
    return peer_.client.write(bytes);
  }

  /// Writes only a frame's header, announcing `length` payload bytes.
  void send_header(transport::FrameHeader h, std::uint64_t length) {
    h.sequence = next_sequence_++;
    h.length = length;
    const auto encoded = transport::encode_frame_header(h);
    ASSERT_TRUE(peer_.client.write(encoded));
  }
  /// A frame whose header and payload travel in two TLS records. `between` runs once rank 0
  /// has read the header (and so waits for the payload), before the payload is written.
  void send_in_two(transport::FrameHeader h, std::span<const std::uint8_t> payload,
                   const std::function<void()>& between) {
    send_header(h, payload.size());
    wait_until_delivered();
    until_rank0_read();
    between();
    ASSERT_TRUE(peer_.client.write(payload));
  }

  /// Drives rank 0's progress (bounded) until its socket is empty. The engine reads and
  /// handles a round's frames under its lock: once the socket is empty, what rank 1 sent has
  /// been handled, and the next call into the engine comes after it.
  void until_rank0_read() {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int unread = 1;
    while (::ioctl(server_fd_, FIONREAD, &unread) == 0 && unread > 0 &&
           std::chrono::steady_clock::now() < give_up) {
      (void)engine_->iprobe(*world_, false, ANY_SOURCE, ANY_TAG);  // a progress round
    }
    ASSERT_EQ(unread, 0) << "rank 0 never read what rank 1 sent";
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

  /// Shrinks the socket buffers of the connection, so that little of what rank 0 sends fits
  /// in it while rank 1 reads nothing.
  void shrink_socket_buffers() {
    const int small = 4096;
    ASSERT_EQ(::setsockopt(server_fd_, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    ASSERT_EQ(::setsockopt(peer_.client.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
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
  int server_fd_ = -1;
  std::uint64_t next_sequence_ = 1;  // 0 was HELLO
};

}  // namespace sempi::test
