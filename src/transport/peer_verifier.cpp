#include "transport/peer_verifier.hpp"

#include "common/hex.hpp"
#include "sempi/error.hpp"

namespace sempi::transport {

std::error_code map_verify_result(long verify_result) noexcept {
  switch (verify_result) {
    case X509_V_OK: return {};
    case X509_V_ERR_CERT_HAS_EXPIRED: return errc::peer_cert_expired;
    case X509_V_ERR_CERT_NOT_YET_VALID: return errc::peer_cert_not_yet_valid;
    case X509_V_ERR_INVALID_PURPOSE: return errc::peer_bad_usage;
    default: return errc::peer_untrusted;
  }
}

std::error_code verify_peer(SSL* ssl, const PeerRequirements& req, pki::Identity& identity,
                            std::string& detail) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) {
    detail = "no peer certificate";
    return errc::peer_no_certificate;
  }
  // Defence in depth: the handshake fails on a bad chain, but never trust that alone.
  if (const long result = SSL_get_verify_result(ssl); result != X509_V_OK) {
    detail = X509_verify_cert_error_string(result);
    return map_verify_result(result);
  }
  if (!pki::has_rank_key_usage(cert)) {
    detail = "extended key usage must contain serverAuth and clientAuth";
    return errc::peer_bad_usage;
  }
  std::string why;
  auto parsed = pki::parse_identity(cert, why);
  if (!parsed) {
    detail = why;
    return errc::peer_bad_identity;
  }
  if (parsed->job != req.job) {
    detail = "certificate is for job " + parsed->job.hex() + ", this job is " + req.job.hex();
    return errc::peer_wrong_job;
  }
  if (parsed->rank >= req.world_size) {
    detail = "certificate names rank " + std::to_string(parsed->rank) + " but the job has " +
             std::to_string(req.world_size) + " ranks";
    return errc::peer_rank_out_of_range;
  }
  if (req.expected_rank && parsed->rank != *req.expected_rank) {
    detail = "dialed rank " + std::to_string(*req.expected_rank) + " but the certificate names rank " +
             std::to_string(parsed->rank);
    return errc::peer_wrong_rank;
  }
  if (parsed->policy_digest != req.policy_digest) {
    detail = "peer policy digest " + to_hex(parsed->policy_digest) + ", ours " +
             to_hex(req.policy_digest);
    return errc::peer_policy_mismatch;
  }
  identity = *parsed;
  return {};
}

}  // namespace sempi::transport
