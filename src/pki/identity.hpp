#pragma once
// A rank's identity as bound into its certificate:
//   SAN URI  sempi://job/<32 hex job id>/rank/<decimal rank>
//   SAN URI  sempi://job/<32 hex job id>/policy/<64 hex SHA-256 policy digest>
// Two URIs in the subjectAltName keep the identity visible to `openssl x509 -text` and to every
// X.509 tool, without a private OID.

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "pki/certificate.hpp"
#include "pki/job_id.hpp"

namespace sempi::pki {

using PolicyDigest = std::array<std::uint8_t, 32>;

struct Identity {
  JobId job;
  std::uint32_t rank = 0;
  PolicyDigest policy_digest{};

  bool operator==(const Identity&) const = default;
};

/// Highest rank number an identity may carry (ranks are 0..kMaxRank).
inline constexpr std::uint32_t kMaxRank = (1u << 24) - 1;

/// "sempi://job/<32 hex>": the URI a job CA carries in its subjectAltName.
std::string ca_uri(const JobId& job);
std::string rank_uri(const JobId& job, std::uint32_t rank);
std::string policy_uri(const JobId& job, const PolicyDigest& digest);

/// Parses a 64-hex-digit digest; nullopt if malformed.
std::optional<PolicyDigest> parse_policy_digest(std::string_view hex);

/// Extracts the identity from a certificate. On failure returns nullopt and sets `why` to a
/// precise reason (no SAN, no rank URI, two rank URIs, malformed job id, rank out of range,
/// job mismatch between the URIs, missing policy URI, ...). Never throws for bad certificates.
std::optional<Identity> parse_identity(X509* cert, std::string& why);

/// Reads the job id from a job CA certificate: its SAN must hold exactly one sempi URI, and it
/// must be ca_uri(job). On failure returns nullopt and sets `why`. Never throws for bad input.
std::optional<JobId> parse_ca_job(X509* cert, std::string& why);

/// True if the certificate's extended key usage includes both serverAuth and clientAuth.
bool has_rank_key_usage(X509* cert);

}  // namespace sempi::pki
