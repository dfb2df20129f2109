#include "sempi/error.hpp"

namespace sempi {

const char* error_class_name(ErrorClass cls) noexcept {
  switch (cls) {
    case ErrorClass::success: return "MPI_SUCCESS";
    case ErrorClass::buffer: return "MPI_ERR_BUFFER";
    case ErrorClass::count: return "MPI_ERR_COUNT";
    case ErrorClass::type: return "MPI_ERR_TYPE";
    case ErrorClass::tag: return "MPI_ERR_TAG";
    case ErrorClass::comm: return "MPI_ERR_COMM";
    case ErrorClass::rank: return "MPI_ERR_RANK";
    case ErrorClass::request: return "MPI_ERR_REQUEST";
    case ErrorClass::root: return "MPI_ERR_ROOT";
    case ErrorClass::group: return "MPI_ERR_GROUP";
    case ErrorClass::op: return "MPI_ERR_OP";
    case ErrorClass::arg: return "MPI_ERR_ARG";
    case ErrorClass::unknown: return "MPI_ERR_UNKNOWN";
    case ErrorClass::truncate: return "MPI_ERR_TRUNCATE";
    case ErrorClass::other: return "MPI_ERR_OTHER";
    case ErrorClass::intern: return "MPI_ERR_INTERN";
    case ErrorClass::pending: return "MPI_ERR_PENDING";
    case ErrorClass::policy: return "SEMPI_ERR_POLICY";
    case ErrorClass::security: return "SEMPI_ERR_SECURITY";
    case ErrorClass::io: return "SEMPI_ERR_IO";
    case ErrorClass::timeout: return "SEMPI_ERR_TIMEOUT";
    case ErrorClass::peer_failed: return "SEMPI_ERR_PEER_FAILED";
    case ErrorClass::config: return "SEMPI_ERR_CONFIG";
  }
  return "MPI_ERR_UNKNOWN";
}

Error::Error(ErrorClass cls, const std::string& message)
    : std::runtime_error(message), class_(cls) {}

namespace {

class SempiCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "sempi"; }

  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::ok: return "success";
      case errc::timeout: return "deadline passed before the operation completed";
      case errc::connection_closed: return "the peer closed the connection";
      case errc::connection_failed: return "could not connect to the peer (socket error)";
      case errc::not_tls:
        return "the peer did not speak TLS (plaintext or another protocol); sempi accepts only "
               "mutually authenticated TLS 1.3";
      case errc::tls_version_refused:
        return "the peer offered only TLS versions below 1.3, which sempi refuses";
      case errc::tls_handshake_failed: return "TLS handshake failed";
      case errc::tls_io_error: return "TLS record layer error";
      case errc::peer_no_certificate:
        return "the peer presented no certificate; every rank must authenticate with its "
               "job certificate";
      case errc::peer_untrusted:
        return "the peer's certificate is not issued by this job's CA";
      case errc::peer_cert_expired: return "the peer's certificate has expired";
      case errc::peer_cert_not_yet_valid:
        return "the peer's certificate is not yet valid (check clocks)";
      case errc::peer_bad_identity:
        return "the peer's certificate carries no valid sempi identity (SAN URI "
               "sempi://job/<id>/rank/<r>)";
      case errc::peer_wrong_job: return "the peer's certificate belongs to another job";
      case errc::peer_wrong_rank:
        return "the peer's certificate names a different rank than the one dialed";
      case errc::peer_rank_out_of_range:
        return "the peer's certificate names a rank outside this job";
      case errc::peer_duplicate_rank:
        return "a connection for this peer rank already exists (possible impersonation)";
      case errc::peer_bad_usage:
        return "the peer's certificate lacks the serverAuth/clientAuth extended key usage";
      case errc::peer_policy_mismatch:
        return "the peer runs under a different policy (policy digest mismatch)";
      case errc::hello_invalid:
        return "HELLO message malformed or inconsistent with the peer's certificate";
      case errc::protocol_version_mismatch:
        return "the peer speaks another sempi protocol version";
      case errc::frame_bad_magic: return "frame with bad magic (stream corrupt or not sempi)";
      case errc::frame_bad_version: return "frame with unsupported protocol version";
      case errc::frame_unknown_type: return "frame of unknown type";
      case errc::frame_too_large: return "frame payload exceeds the negotiated limit";
      case errc::frame_bad_sequence: return "frame sequence number out of order (gap or replay)";
      case errc::frame_bad_reserved: return "frame header has non-zero reserved bits";
      case errc::frame_unexpected: return "frame not allowed at this point of the protocol";
    }
    return "unknown sempi error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const SempiCategory category;
  return category;
}

}  // namespace sempi
