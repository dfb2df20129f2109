#pragma once
// The launcher's enrollment bookkeeping: the job CA, one certificate per rank, the address
// table, and the finalize fence. Pure logic over bootstrap messages (no processes, no sockets),
// so it is tested directly with real CSRs.
//
// Security: the rank a certificate names is the index of the bootstrap channel the CSR arrived
// on, never a value the rank claims; each rank enrolls at most once; the CSR's self-signature
// is verified before issuance; the CA key never leaves this object.
//
// Thread safety: none; owned by the launcher's event loop.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pki/certificate.hpp"
#include "pki/job_ca.hpp"
#include "policy/policy_document.hpp"

namespace sempi::launch {

class Enrollment {
 public:
  /// `ca` and every certificate it issues are valid for `validity`. Ranks' Unix sockets are
  /// accepted only as `local_dir`/rank-N.sock (none if it is empty; job_socket_dir.hpp).
  Enrollment(pki::JobCa ca, policy::PolicyDocument policy, std::uint32_t size,
             std::chrono::seconds validity, std::filesystem::path local_dir = {});

  /// Handles {"type":"enroll","csr":PEM,"endpoint":"HOST:PORT"[,"local":{"host":ID,"path":P}]
  /// [,"pid":N]} from `rank`:
  /// validates it and issues the rank's certificate. Returns nullopt on success, or the reason
  /// the enrollment was refused (to send to the rank and report; nothing is recorded then).
  std::optional<std::string> enroll(std::uint32_t rank, const nlohmann::json& message);

  /// Handles {"type":"finalize"}. Refused (reason returned) before the welcome was sent, i.e.
  /// before every rank enrolled, and when repeated.
  std::optional<std::string> finalize(std::uint32_t rank);

  /// The welcome message for an enrolled rank; only meaningful once all_enrolled().
  [[nodiscard]] nlohmann::json welcome(std::uint32_t rank) const;

  [[nodiscard]] bool is_enrolled(std::uint32_t rank) const {
    return ranks_.at(rank).cert.has_value();
  }
  [[nodiscard]] bool is_finalized(std::uint32_t rank) const { return ranks_.at(rank).finalized; }
  [[nodiscard]] bool any_enrolled() const noexcept { return enrolled_ > 0; }
  [[nodiscard]] bool all_enrolled() const noexcept { return enrolled_ == size_; }
  /// Every rank finalized (which implies every rank enrolled).
  [[nodiscard]] bool all_finalized() const noexcept { return finalized_ == size_; }

  [[nodiscard]] std::uint32_t size() const noexcept { return size_; }
  [[nodiscard]] const pki::JobCa& ca() const noexcept { return ca_; }
  [[nodiscard]] const policy::PolicyDocument& policy() const noexcept { return policy_; }
  /// The certificate issued to `rank`, if it enrolled.
  [[nodiscard]] const std::optional<pki::Certificate>& certificate(std::uint32_t rank) const {
    return ranks_.at(rank).cert;
  }

 private:
  // A Unix socket for peers on the rank's host (transport/listener.hpp). Only passed on:
  // whoever dials it still proves the peer's identity by TLS.
  struct LocalEndpoint {
    std::string host;  // transport::local_host_identity() of the rank's host
    std::string path;
    bool operator==(const LocalEndpoint&) const = default;
  };
  struct RankState {
    std::optional<pki::Certificate> cert;
    std::string endpoint;  // canonical "host:port"
    std::optional<LocalEndpoint> local;
    bool finalized = false;
  };

  // `local_dir_`/rank-DIGITS.sock, of a length a socket address can hold.
  [[nodiscard]] bool is_rank_socket_path(const std::string& path) const;

  pki::JobCa ca_;
  policy::PolicyDocument policy_;
  std::uint32_t size_;
  std::chrono::seconds validity_;
  std::filesystem::path local_dir_;
  std::string ca_pem_;
  std::string policy_digest_hex_;
  std::vector<RankState> ranks_;
  nlohmann::json endpoints_;  // the address table, built once every rank enrolled
  nlohmann::json local_endpoints_;  // and the Unix sockets (null where a rank has none)
  std::uint32_t enrolled_ = 0;
  std::uint32_t finalized_ = 0;
};

}  // namespace sempi::launch
