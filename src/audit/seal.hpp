#pragma once
// The job's audit seal: the launcher's last record, signed with an Ed25519 key generated for the
// job (its public key is in the launcher log's first record, "job.start").
//
// The seal object (sempi.seal in the "audit.seal" record) names every chain head:
//   {"job":HEX, "sealed_at":TIMESTAMP,
//    "launcher":{"seq":N,"hash":HEX},            head of launcher.jsonl before the seal
//    "ranks":[{"rank":R,"seq":N,"hash":HEX,"source":S}, ...]}
// S is "reported" (the rank sent its head when it finalized), "file" (the rank did not
// report - it died or was killed - so the launcher took the last complete record of its file),
// "missing" (welcomed, but no file was found) or "none" (no file: the rank never joined).
// "file" adds "cut_off" ({"bytes":N,"hash":HEX}: what follows the last newline). A reported head
// may add "write_error": the rank could not write its whole chain to its file (ENOSPC, EIO), and
// says why.
//
// The signature (sempi.signature, hex, the record's last field before "prev") covers
// kSealContext followed by the whole record line as written, with the signature's digits all
// '0' (AuditLog::signed_event). So every byte of the seal record is signed: not only the seal
// object but its timestamp, outcome, sequence number and link to the record before.
//
// What the seal proves: nothing in the sealed chains changed after the launcher signed, given
// that the verifier trusts the public key. A rewrite with a fresh key (of the launcher log
// alone, which then seals any rank's log re-chained) is detectable only against a key obtained
// out of band: `sempi audit verify --public-key HEX` (sempirun
// --audit-key-out writes it where the job's logs are not).

#include <optional>
#include <string>
#include <string_view>

#include "pki/key.hpp"

namespace sempi::audit {

inline constexpr std::string_view kSealContext = "sempi audit seal v2\n";

/// What the seal signature covers, given the record line with the signature's digits all '0'.
std::string seal_message(std::string_view line_with_zeros);
/// The same for the line as written, whose sempi.signature is `signature_hex`: nullopt unless
/// that is 128 lower-case hex digits and "signature":"<signature_hex>" occurs in the line
/// exactly once.
std::optional<std::string> seal_message_of_line(std::string_view line,
                                                std::string_view signature_hex);

class SealKey {
 public:
  /// A fresh Ed25519 key, in memory only. Throws sempi::Error(security).
  static SealKey generate();
  /// Raw 32-byte public key, hex.
  [[nodiscard]] std::string public_key_hex() const;
  /// Ed25519 signature (hex) over `message`.
  [[nodiscard]] std::string sign(std::string_view message) const;

 private:
  explicit SealKey(pki::PrivateKey key) : key_(std::move(key)) {}
  pki::PrivateKey key_;
};

/// Checks an Ed25519 signature (hex) by a raw public key (hex). False on any malformed input.
bool verify_seal_signature(std::string_view public_key_hex, std::string_view message,
                           std::string_view signature_hex);

}  // namespace sempi::audit
