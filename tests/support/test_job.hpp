#pragma once
// Test fixtures: a job CA with rank credentials issued through the real PKI code, and
// LocalEndpoints for the transport. Certificates are generated at test time, never checked in.

#include <chrono>
#include <memory>
#include <optional>

#include "pki/csr.hpp"
#include "pki/job_ca.hpp"
#include "transport/channel.hpp"
#include "transport/listener.hpp"

namespace sempi::test {

struct Credentials {
  pki::Certificate cert;
  std::shared_ptr<const pki::PrivateKey> key;
};

inline transport::Deadline deadline_in(std::chrono::milliseconds ms) {
  return transport::Clock::now() + ms;
}
/// Generous bound for anything that should succeed on a loaded 2-core machine.
inline transport::Deadline long_deadline() { return deadline_in(std::chrono::seconds(60)); }

class TestJob {
 public:
  explicit TestJob(std::uint32_t world_size, pki::PolicyDigest digest = {},
                   pki::KeyType key_type = pki::KeyType::ecdsa_p256)
      : ca_(pki::JobCa::create(pki::JobId::random(), std::chrono::hours(2), key_type)),
        world_size_(world_size),
        digest_(digest) {}

  /// Issues a rank certificate; `tweak` may change the options (validity, job, digest, ...).
  template <class Tweak>
  Credentials issue(std::uint32_t rank, Tweak&& tweak) const {
    auto key = std::make_shared<const pki::PrivateKey>(pki::PrivateKey::generate());
    pki::IssueOptions options;
    options.rank = rank;
    options.policy_digest = digest_;
    options.validity = std::chrono::hours(1);
    tweak(options);
    auto cert = ca_.issue(pki::Csr::create(*key), options);
    return {std::move(cert), std::move(key)};
  }
  Credentials issue(std::uint32_t rank) const {
    return issue(rank, [](pki::IssueOptions&) {});
  }

  [[nodiscard]] transport::LocalEndpoint endpoint(const Credentials& creds,
                                                  transport::ChannelLimits limits = {}) const {
    transport::TlsConfig config{anchor_ ? *anchor_ : ca_.certificate(), creds.cert, creds.key};
    transport::LocalEndpoint local;
    local.tls = transport::TlsContext::create(config);
    std::string why;
    auto identity = pki::parse_identity(creds.cert.get(), why);
    local.hello.job = ca_.job();
    local.hello.rank = identity ? identity->rank : 0;
    local.hello.world_size = world_size_;
    local.hello.policy_digest = digest_;
    local.hello.limits = limits;
    return local;
  }
  [[nodiscard]] transport::LocalEndpoint endpoint(std::uint32_t rank) const {
    return endpoint(issue(rank));
  }

  [[nodiscard]] const pki::JobCa& ca() const { return ca_; }
  [[nodiscard]] const pki::PolicyDigest& digest() const { return digest_; }
  [[nodiscard]] std::uint32_t world_size() const { return world_size_; }
  /// Endpoints made from now on trust `anchor` as the job CA's certificate (the same CA, as
  /// another issuer signed it).
  void trust_anchor(pki::Certificate anchor) { anchor_ = std::move(anchor); }

 private:
  pki::JobCa ca_;
  std::optional<pki::Certificate> anchor_;
  std::uint32_t world_size_;
  pki::PolicyDigest digest_;
};

inline transport::Endpoint loopback_any_port() {
  return {asio::ip::make_address("127.0.0.1"), 0};
}

}  // namespace sempi::test
