#pragma once
// A sempi rank 0 accepting one channel in the background (Server), and a genuine rank 1 on raw
// OpenSSL that completed the handshake and HELLO with it (EstablishedPeer): the two ends of the
// tests that attack, or interoperate with, a channel after its handshake.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "support/raw_tls_client.hpp"
#include "support/test_job.hpp"
#include "transport/channel.hpp"
#include "transport/listener.hpp"

namespace sempi::test {

// Rank 0 of `job` accepts one connection in the background.
class Server {
 public:
  explicit Server(const TestJob& job, std::function<bool(std::uint32_t)> claim = nullptr,
                  std::chrono::milliseconds handshake_deadline = std::chrono::seconds(30))
      : Server(job.endpoint(0), std::move(claim), handshake_deadline) {}
  explicit Server(transport::LocalEndpoint local,
                  std::function<bool(std::uint32_t)> claim = nullptr,
                  std::chrono::milliseconds handshake_deadline = std::chrono::seconds(30))
      : local_(std::move(local)), listener_(loopback_any_port()) {
    result_ = std::async(std::launch::async, [this, claim, handshake_deadline] {
      std::error_code ec;
      auto fd = listener_.accept(long_deadline(), ec);
      auto claim_fn = claim ? claim : [](std::uint32_t) { return true; };
      channel_ = transport::Channel::accept(local_, std::move(fd), claim_fn, deadline_in(handshake_deadline),
                                 error_);
      return error_;
    });
  }
  [[nodiscard]] transport::Endpoint endpoint() const { return listener_.endpoint(); }
  transport::ChannelError error() { return result_.get(); }
  transport::Channel* channel() { return channel_.get(); }
  /// The accepted channel, for a test that hands it to an engine (call after error()).
  std::unique_ptr<transport::Channel> take_channel() { return std::move(channel_); }

 private:
  transport::LocalEndpoint local_;
  transport::Listener listener_;
  std::unique_ptr<transport::Channel> channel_;
  transport::ChannelError error_;
  std::future<transport::ChannelError> result_;
};

inline RawClientOptions rank_options(const TestJob& job, const Credentials& creds) {
  RawClientOptions options{job.ca().certificate()};
  options.cert = creds.cert;
  options.key = creds.key.get();
  return options;
}

// A genuine rank 1 that completed the handshake and HELLO with the server (rank 0): the raw
// TLS stream the hostile-frame tests attack from.
struct EstablishedPeer {
  using ServerTweak = std::function<void(transport::LocalEndpoint&)>;
  using ClientTweak = std::function<void(RawClientOptions&)>;

  TestJob job{4};
  Credentials creds = job.issue(1);
  Server server;
  RawTlsClient client;
  transport::ChannelError accepted;

  /// The tweaks may change the server's endpoint and the client's options before they connect;
  /// `client_limits` are what the client's HELLO announces.
  explicit EstablishedPeer(const ServerTweak& server_tweak = {},
                           const ClientTweak& client_tweak = {},
                           const transport::ChannelLimits& client_limits = {})
      : server(server_endpoint(server_tweak)), client(server.endpoint(), client_options(client_tweak)) {
    establish(client_limits);
  }
  transport::Channel* channel() { return server.channel(); }

 private:
  transport::LocalEndpoint server_endpoint(const ServerTweak& tweak) const {
    auto local = job.endpoint(0);
    if (tweak) tweak(local);
    return local;
  }
  RawClientOptions client_options(const ClientTweak& tweak) const {
    auto options = rank_options(job, creds);
    if (tweak) tweak(options);
    return options;
  }
  void establish(const transport::ChannelLimits& client_limits) {
    EXPECT_TRUE(client.handshake());
    transport::Hello hello;
    hello.limits = client_limits;
    hello.job = job.ca().job();
    hello.rank = 1;
    hello.world_size = job.world_size();
    hello.policy_digest = job.digest();
    EXPECT_TRUE(client.send_hello(hello));
    std::vector<std::uint8_t> server_hello;
    EXPECT_TRUE(client.read_frame(server_hello));
    accepted = server.error();  // waits for the server side to finish accepting
    EXPECT_FALSE(accepted.code) << accepted.message();
  }
};

}  // namespace sempi::test
