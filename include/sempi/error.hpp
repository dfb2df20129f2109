#pragma once
/// \file
/// sempi's two error channels.
///
/// * `sempi::Error` (an exception carrying an MPI-like `ErrorClass`) reports misuse of the API and
///   bad configuration: things the caller can fix.
/// * `std::error_code` values in `sempi::error_category()` report conditions a peer or the network
///   can cause (handshake failures, refused identities, malformed frames). The data plane never
///   throws or asserts for those; it returns a code and closes the affected channel.

#include <stdexcept>
#include <string>
#include <system_error>

namespace sempi {

/// Error classes, after MPI's (MPI 3.1 section 8.4), plus sempi's own security classes.
enum class ErrorClass : int {
  success = 0,
  buffer,
  count,
  type,
  tag,
  comm,
  rank,
  request,
  root,
  group,
  op,
  arg,
  unknown,
  truncate,
  other,
  intern,
  pending,
  // sempi-specific classes.
  policy,        ///< the job's policy denies the operation
  security,      ///< identity, certificate or TLS failure
  io,            ///< a channel or file failed
  timeout,       ///< a deadline passed
  peer_failed,   ///< the peer rank died or disconnected
  config,        ///< bad configuration or command-line input
};

/// Human-readable name of an error class, e.g. "MPI_ERR_RANK".
const char* error_class_name(ErrorClass cls) noexcept;

/// Exception for API misuse and configuration errors. The message says what happened and, where
/// possible, what to do about it.
class Error : public std::runtime_error {
 public:
  Error(ErrorClass cls, const std::string& message);
  [[nodiscard]] ErrorClass error_class() const noexcept { return class_; }

 private:
  ErrorClass class_;
};

/// Error codes for conditions caused by peers, the network or the TLS layer.
enum class errc : int {
  ok = 0,
  // Connection and TLS.
  timeout = 1,              ///< a deadline passed
  connection_closed,        ///< the peer closed the connection
  connection_failed,        ///< connect or socket error (TCP or Unix)
  not_tls,                  ///< the peer spoke something other than TLS (e.g. plaintext)
  tls_version_refused,      ///< the peer offered only a TLS version below 1.3
  tls_handshake_failed,     ///< TLS handshake failed for another reason
  tls_io_error,             ///< TLS record layer failure after the handshake
  // Peer identity.
  peer_no_certificate,      ///< the peer presented no certificate
  peer_untrusted,           ///< the peer's chain does not lead to this job's CA
  peer_cert_expired,        ///< the peer's certificate has expired
  peer_cert_not_yet_valid,  ///< the peer's certificate is not valid yet
  peer_bad_identity,        ///< no or malformed sempi identity in the certificate
  peer_wrong_job,           ///< the certificate names another job
  peer_wrong_rank,          ///< the certificate names another rank than the one dialed
  peer_rank_out_of_range,   ///< the certificate's rank is outside the job
  peer_duplicate_rank,      ///< a second connection claims an already connected rank
  peer_bad_usage,           ///< the certificate lacks the required key usage / EKU
  peer_policy_mismatch,     ///< the peer runs under a different policy digest
  // Wire protocol.
  hello_invalid,            ///< HELLO malformed or inconsistent with the certificate
  protocol_version_mismatch,
  frame_bad_magic,
  frame_bad_version,
  frame_unknown_type,
  frame_too_large,
  frame_bad_sequence,
  frame_bad_reserved,
  frame_unexpected,         ///< a valid frame at a point where the protocol forbids it
};

/// The category of `sempi::errc`; its messages name the condition and the likely remedy.
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

}  // namespace sempi

template <>
struct std::is_error_code_enum<sempi::errc> : std::true_type {};
