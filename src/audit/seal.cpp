#include "audit/seal.hpp"

#include "audit/audit_log.hpp"
#include "common/hex.hpp"
#include "pki/ossl.hpp"

namespace sempi::audit {

std::string seal_message(std::string_view line_with_zeros) {
  std::string message(kSealContext);
  message += line_with_zeros;
  return message;
}

std::optional<std::string> seal_message_of_line(std::string_view line,
                                                std::string_view signature_hex) {
  // Exactly as signed_event writes it: another spelling of the same digits (upper case)
  // would change the line's bytes, and so its hash, without changing what is verified.
  const bool canonical =
      signature_hex.size() == AuditLog::kSignatureHexDigits && is_lower_hex(signature_hex);
  const std::string field = "\"signature\":\"" + std::string(signature_hex) + "\"";
  const auto at = line.find(field);
  if (!canonical || at == std::string_view::npos ||
      line.find(field, at + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  std::string message = seal_message(line);
  message.replace(kSealContext.size() + at + field.size() - 1 - signature_hex.size(),
                  signature_hex.size(), signature_hex.size(), '0');
  return message;
}

SealKey SealKey::generate() { return SealKey(pki::PrivateKey::generate(pki::KeyType::ed25519)); }

std::string SealKey::public_key_hex() const {
  pki::OsslErrorScope scope;
  std::uint8_t raw[32];
  std::size_t len = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key_.get(), raw, &len) != 1 || len != sizeof raw) {
    pki::throw_openssl_error("cannot export the audit public key");
  }
  return to_hex(std::span<const std::uint8_t>(raw, len));
}

std::string SealKey::sign(std::string_view message) const {
  pki::OsslErrorScope scope;
  pki::EvpMdCtxPtr ctx{EVP_MD_CTX_new()};
  std::uint8_t sig[64];
  std::size_t len = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &len, reinterpret_cast<const std::uint8_t*>(message.data()),
                     message.size()) != 1) {
    pki::throw_openssl_error("cannot sign the audit seal");
  }
  return to_hex(std::span<const std::uint8_t>(sig, len));
}

bool verify_seal_signature(std::string_view public_key_hex, std::string_view message,
                           std::string_view signature_hex) {
  const auto pub = from_hex(public_key_hex);
  const auto sig = from_hex(signature_hex);
  if (!pub || pub->size() != 32 || !sig || sig->size() != 64) return false;
  pki::OsslErrorScope scope;
  pki::EvpPkeyPtr key{
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, pub->data(), pub->size())};
  pki::EvpMdCtxPtr ctx{EVP_MD_CTX_new()};
  const bool ok =
      key && ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
      EVP_DigestVerify(ctx.get(), sig->data(), sig->size(),
                       reinterpret_cast<const std::uint8_t*>(message.data()), message.size()) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace sempi::audit
