#pragma once
// Private keys, generated in memory, in OpenSSL's secure heap (pki/secure_heap.hpp). A key
// reaches disk only through an explicit to_pem() call by a caller that asked for it (e.g.
// `sempi pki ca --out`).

#include <string>
#include <string_view>

#include "pki/ossl.hpp"

namespace sempi::pki {

enum class KeyType { ecdsa_p256, ed25519 };

/// "ecdsa-p256" / "ed25519"; parse_key_type throws sempi::Error(config) on anything else.
const char* key_type_name(KeyType type) noexcept;
KeyType parse_key_type(std::string_view name);

class PrivateKey {
 public:
  /// Generates a new key pair. Throws sempi::Error(security) with OpenSSL's error text on failure.
  static PrivateKey generate(KeyType type = KeyType::ecdsa_p256);
  /// Loads an unencrypted PKCS#8 / traditional PEM private key. Throws sempi::Error(config).
  static PrivateKey from_pem(std::string_view pem);

  /// PKCS#8 PEM, unencrypted. Callers write it only with 0600 permissions.
  [[nodiscard]] std::string to_pem() const;
  /// SubjectPublicKeyInfo PEM of the public half.
  [[nodiscard]] std::string public_pem() const;
  [[nodiscard]] KeyType type() const;
  [[nodiscard]] EVP_PKEY* get() const noexcept { return key_.get(); }

 private:
  explicit PrivateKey(EvpPkeyPtr key) : key_(std::move(key)) {}
  EvpPkeyPtr key_;
};

}  // namespace sempi::pki
