#include "pki/key.hpp"

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/objects.h>
#include <openssl/pem.h>

#include "pki/detail.hpp"
#include "pki/secure_heap.hpp"

namespace sempi::pki {

const char* key_type_name(KeyType type) noexcept {
  switch (type) {
    case KeyType::ecdsa_p256:
      return "ecdsa-p256";
    case KeyType::ed25519:
      return "ed25519";
  }
  return "unknown";
}

KeyType parse_key_type(std::string_view name) {
  if (name == "ecdsa-p256") return KeyType::ecdsa_p256;
  if (name == "ed25519") return KeyType::ed25519;
  throw Error(ErrorClass::config,
              "unknown key type '" + std::string(name) + "': expected ecdsa-p256 or ed25519");
}

PrivateKey PrivateKey::generate(KeyType type) {
  ensure_secure_heap();  // before the key exists, so that it is born there
  OsslErrorScope scope;
  const char* algorithm = type == KeyType::ed25519 ? "ED25519" : "EC";
  EvpPkeyCtxPtr ctx{EVP_PKEY_CTX_new_from_name(nullptr, algorithm, nullptr)};
  if (!ctx) throw_openssl_error(std::string("cannot create a ") + key_type_name(type) + " context");
  if (EVP_PKEY_keygen_init(ctx.get()) != 1) throw_openssl_error("EVP_PKEY_keygen_init failed");
  if (type == KeyType::ecdsa_p256 && EVP_PKEY_CTX_set_group_name(ctx.get(), "P-256") != 1) {
    throw_openssl_error("cannot select curve P-256");
  }
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_generate(ctx.get(), &raw) != 1) {
    throw_openssl_error(std::string("cannot generate a ") + key_type_name(type) + " key");
  }
  return PrivateKey(EvpPkeyPtr{raw});
}

PrivateKey PrivateKey::from_pem(std::string_view pem) {
  ensure_secure_heap();
  BioPtr bio = detail::read_bio(pem);
  OsslErrorScope scope;
  EvpPkeyPtr key{PEM_read_bio_PrivateKey(bio.get(), nullptr, detail::refuse_password, nullptr)};
  if (!key) {
    throw_openssl_error("cannot parse the private key (expected an unencrypted PEM key)",
                        ErrorClass::config);
  }
  if (!detail::key_type_of(key.get())) {
    throw Error(ErrorClass::config, std::string("unsupported private key type '") +
                                        EVP_PKEY_get0_type_name(key.get()) +
                                        "': sempi uses ECDSA P-256 or Ed25519 keys");
  }
  return PrivateKey(std::move(key));
}

std::string PrivateKey::to_pem() const {
  BioPtr bio = detail::write_bio();
  OsslErrorScope scope;
  // PEM_write_bio_PrivateKey writes PKCS#8 ("BEGIN PRIVATE KEY"); no cipher: callers protect the
  // file with 0600 permissions instead.
  if (PEM_write_bio_PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    throw_openssl_error("cannot encode the private key");
  }
  return detail::bio_contents(bio.get());
}

std::string PrivateKey::public_pem() const {
  BioPtr bio = detail::write_bio();
  OsslErrorScope scope;
  if (PEM_write_bio_PUBKEY(bio.get(), key_.get()) != 1) {
    throw_openssl_error("cannot encode the public key");
  }
  return detail::bio_contents(bio.get());
}

namespace detail {

std::optional<KeyType> key_type_of(EVP_PKEY* key) {
  if (EVP_PKEY_is_a(key, "ED25519") == 1) return KeyType::ed25519;
  if (EVP_PKEY_is_a(key, "EC") == 1) {
    char group[64] = {};
    std::size_t len = 0;
    // OpenSSL may report the short name ("prime256v1") or the NIST name ("P-256").
    if (EVP_PKEY_get_group_name(key, group, sizeof group, &len) == 1 &&
        (OBJ_sn2nid(group) == NID_X9_62_prime256v1 ||
         EC_curve_nist2nid(group) == NID_X9_62_prime256v1)) {
      return KeyType::ecdsa_p256;
    }
  }
  return std::nullopt;
}

}  // namespace detail

KeyType PrivateKey::type() const {
  if (const auto t = detail::key_type_of(key_.get())) return *t;
  throw Error(ErrorClass::intern, "private key of an unsupported type");
}

}  // namespace sempi::pki
