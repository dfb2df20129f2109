#pragma once
// Identity pinning after the TLS handshake. OpenSSL has already verified the chain to the job CA;
// this checks that the certificate names a rank of *this* job, the rank we expect, with the
// right key usage and policy digest.

#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include <openssl/ssl.h>

#include "pki/identity.hpp"

namespace sempi::transport {

/// What this rank requires of any peer.
struct PeerRequirements {
  pki::JobId job;
  std::uint32_t world_size = 0;
  pki::PolicyDigest policy_digest{};
  /// The dialer knows whom it dialed; the acceptor leaves this empty and checks range only.
  std::optional<std::uint32_t> expected_rank;
};

/// Maps an X509_V_ERR_* code from chain verification to a sempi error code.
std::error_code map_verify_result(long verify_result) noexcept;

/// Checks the peer of a completed handshake. On success fills `identity`; on failure returns a
/// specific code and sets `detail` to a message naming the offending value.
std::error_code verify_peer(SSL* ssl, const PeerRequirements& requirements,
                            pki::Identity& identity, std::string& detail);

}  // namespace sempi::transport
