#pragma once
// The job-scoped certificate authority. Created in memory at launch; its key is never written to
// disk unless a caller explicitly exports it (the `sempi pki ca` tool does, for site/test use).

#include <chrono>
#include <cstdint>
#include <optional>

#include "pki/certificate.hpp"
#include "pki/csr.hpp"
#include "pki/identity.hpp"
#include "pki/key.hpp"

namespace sempi::pki {

/// Backdating applied to notBefore of every certificate, to tolerate clock skew between hosts.
inline constexpr std::chrono::seconds kClockSkew{300};

struct IssueOptions {
  std::uint32_t rank = 0;
  PolicyDigest policy_digest{};
  /// Validity from now (notBefore is backdated by kClockSkew).
  std::chrono::seconds validity{std::chrono::hours(24)};
  /// Explicit validity window; overrides `validity` when both are set. Tests use it to make
  /// expired and not-yet-valid certificates.
  std::optional<SystemTime> not_before;
  std::optional<SystemTime> not_after;
  /// Issue for another job id than the CA's (only for negative tests; never used by sempi).
  std::optional<JobId> job_override;
};

class JobCa {
 public:
  /// New CA for `job`: fresh key, self-signed, CA:true pathlen:0, keyCertSign|cRLSign,
  /// 128-bit random serial, valid for `validity` (+ skew margin). Throws sempi::Error.
  static JobCa create(const JobId& job, std::chrono::seconds validity,
                      KeyType key_type = KeyType::ecdsa_p256);
  /// Loads a CA from its certificate and key (PEM). Checks that the key matches the certificate
  /// and that the certificate is a sempi job CA; the job id is read from its SAN URI
  /// (sempi://job/<id>). Throws sempi::Error(config).
  static JobCa load(std::string_view cert_pem, std::string_view key_pem);

  /// Issues a rank certificate for the CSR's public key. Verifies the CSR signature first.
  /// Throws sempi::Error(arg) for a rank > kMaxRank, sempi::Error(security) for a bad CSR.
  [[nodiscard]] Certificate issue(const Csr& csr, const IssueOptions& options) const;

  [[nodiscard]] const JobId& job() const noexcept { return job_; }
  [[nodiscard]] const Certificate& certificate() const noexcept { return cert_; }
  [[nodiscard]] const PrivateKey& key() const noexcept { return key_; }

 private:
  JobCa(JobId job, Certificate cert, PrivateKey key)
      : job_(job), cert_(std::move(cert)), key_(std::move(key)) {}
  JobId job_;
  Certificate cert_;
  PrivateKey key_;
};

}  // namespace sempi::pki
