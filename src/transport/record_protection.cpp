#include "transport/record_protection.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/tls1.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "pki/ossl.hpp"

namespace sempi::transport {
namespace {

constexpr std::uint8_t kLegacyVersion[2] = {0x03, 0x03};

// HKDF-Expand-Label(secret, label, "", out.size()) of RFC 8446, 7.1.
bool expand_label(const EVP_MD* hash, std::span<const std::uint8_t> secret,
                  std::string_view label, std::span<std::uint8_t> out) {
  constexpr std::string_view kPrefix = "tls13 ";
  std::uint8_t info[2 + 1 + 255 + 1];
  std::size_t n = 0;
  info[n++] = static_cast<std::uint8_t>(out.size() >> 8);
  info[n++] = static_cast<std::uint8_t>(out.size());
  info[n++] = static_cast<std::uint8_t>(kPrefix.size() + label.size());
  std::memcpy(info + n, kPrefix.data(), kPrefix.size());
  n += kPrefix.size();
  std::memcpy(info + n, label.data(), label.size());
  n += label.size();
  info[n++] = 0;  // empty context

  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
                                       const_cast<char*>(EVP_MD_get0_name(hash)), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                        const_cast<std::uint8_t*>(secret.data()), secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n),
      OSSL_PARAM_construct_end()};
  const bool ok = ctx != nullptr && EVP_KDF_derive(ctx, out.data(), out.size(), params) == 1;
  EVP_KDF_CTX_free(ctx);
  EVP_KDF_free(kdf);
  return ok;
}

}  // namespace

std::unique_ptr<RecordProtection> RecordProtection::create(const SSL_CIPHER* suite,
                                                           std::span<const std::uint8_t> secret,
                                                           Direction direction,
                                                           std::string& error) {
  const char* cipher_name = nullptr;
  std::size_t key_size = 0;
  switch (suite != nullptr ? SSL_CIPHER_get_id(suite) : 0) {
    case TLS1_3_CK_AES_128_GCM_SHA256: cipher_name = "AES-128-GCM"; key_size = 16; break;
    case TLS1_3_CK_AES_256_GCM_SHA384: cipher_name = "AES-256-GCM"; key_size = 32; break;
    case TLS1_3_CK_CHACHA20_POLY1305_SHA256: cipher_name = "ChaCha20-Poly1305"; key_size = 32; break;
    default:
      error = std::string("no record protection for suite ") +
              (suite != nullptr ? SSL_CIPHER_get_name(suite) : "(none)");
      return nullptr;
  }
  std::unique_ptr<RecordProtection> p(new RecordProtection());
  p->sealing_ = direction == Direction::seal;
  p->hash_ = SSL_CIPHER_get_handshake_digest(suite);
  p->key_size_ = key_size;
  p->cipher_ = EVP_CIPHER_fetch(nullptr, cipher_name, nullptr);
  p->ctx_ = EVP_CIPHER_CTX_new();
  if (p->hash_ == nullptr || p->cipher_ == nullptr || p->ctx_ == nullptr) {
    error = "cannot set up " + std::string(cipher_name) + ": " + pki::drain_openssl_errors();
    return nullptr;
  }
  if (secret.size() != static_cast<std::size_t>(EVP_MD_get_size(p->hash_))) {
    error = "traffic secret of " + std::to_string(secret.size()) + " bytes for " +
            SSL_CIPHER_get_name(suite);
    return nullptr;
  }
  std::copy(secret.begin(), secret.end(), p->secret_.begin());
  p->secret_size_ = secret.size();
  if (!p->derive_keys(error)) return nullptr;
  return p;
}

RecordProtection::~RecordProtection() {
  OPENSSL_cleanse(secret_.data(), secret_.size());
  OPENSSL_cleanse(iv_.data(), iv_.size());
  EVP_CIPHER_CTX_free(ctx_);  // wipes the key schedule
  EVP_CIPHER_free(cipher_);
}

bool RecordProtection::derive_keys(std::string& error) {
  std::array<std::uint8_t, 32> key{};
  const std::span<const std::uint8_t> secret(secret_.data(), secret_size_);
  const bool ok = expand_label(hash_, secret, "key", std::span(key.data(), key_size_)) &&
                  expand_label(hash_, secret, "iv", iv_) &&
                  EVP_CipherInit_ex2(ctx_, cipher_, key.data(), nullptr, sealing_ ? 1 : 0,
                                     nullptr) == 1;
  OPENSSL_cleanse(key.data(), key.size());
  sequence_ = 0;
  if (!ok) error = "cannot derive record keys: " + pki::drain_openssl_errors();
  return ok;
}

bool RecordProtection::update(std::string& error) {
  std::array<std::uint8_t, 64> next{};
  if (!expand_label(hash_, std::span(secret_.data(), secret_size_), "traffic upd",
                    std::span(next.data(), secret_size_))) {
    error = "cannot derive the next traffic secret: " + pki::drain_openssl_errors();
    return false;
  }
  secret_ = next;
  OPENSSL_cleanse(next.data(), next.size());
  return derive_keys(error);
}

void RecordProtection::next_nonce(std::uint8_t* nonce) noexcept {
  // The per-record nonce: the static IV XOR the 64-bit sequence number, right-aligned.
  std::memcpy(nonce, iv_.data(), iv_.size());
  for (int i = 0; i < 8; ++i) {
    nonce[iv_.size() - 1 - i] ^= static_cast<std::uint8_t>(sequence_ >> (8 * i));
  }
  ++sequence_;
}

bool RecordProtection::seal(ContentType type, std::span<const std::uint8_t> first,
                            std::span<const std::uint8_t> second, std::uint8_t* out) {
  const std::size_t body = first.size() + second.size() + 1 + kAeadTagSize;
  if (body > 0xFFFF) return false;  // the header's 16-bit length would wrap
  out[0] = static_cast<std::uint8_t>(ContentType::application_data);  // outer type, always
  out[1] = kLegacyVersion[0];
  out[2] = kLegacyVersion[1];
  out[3] = static_cast<std::uint8_t>(body >> 8);
  out[4] = static_cast<std::uint8_t>(body);
  std::uint8_t nonce[12];
  next_nonce(nonce);
  const auto inner_type = static_cast<std::uint8_t>(type);
  std::uint8_t* cursor = out + kRecordHeaderSize;
  int n = 0;
  if (EVP_EncryptInit_ex2(ctx_, nullptr, nullptr, nonce, nullptr) != 1 ||
      EVP_EncryptUpdate(ctx_, nullptr, &n, out, kRecordHeaderSize) != 1) {
    return false;
  }
  for (const auto piece : {first, second, std::span<const std::uint8_t>(&inner_type, 1)}) {
    if (piece.empty()) continue;
    if (EVP_EncryptUpdate(ctx_, cursor, &n, piece.data(), static_cast<int>(piece.size())) != 1 ||
        static_cast<std::size_t>(n) != piece.size()) {
      return false;
    }
    cursor += n;
  }
  return EVP_EncryptFinal_ex(ctx_, cursor, &n) == 1 && n == 0 &&
         EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, kAeadTagSize, cursor) == 1;
}

bool RecordProtection::open(const std::uint8_t* header, std::span<const std::uint8_t> body,
                            std::span<std::uint8_t> dst, std::uint8_t* rest) {
  if (body.size() < kAeadTagSize) return false;
  const std::size_t length = body.size() - kAeadTagSize;
  const std::size_t first = std::min(length, dst.size());
  if (length > first && rest == nullptr) return false;  // nowhere for the rest to go
  std::uint8_t nonce[12];
  next_nonce(nonce);
  // The cipher decrypts before the tag is checked. A record that fails leaves no plaintext
  // behind: with a stream cipher, flipped ciphertext bits flip the same plaintext bits, and the
  // output may be the receiver's own buffer.
  const auto refuse = [&] {
    if (first > 0) std::memset(dst.data(), 0, first);
    if (length > first) std::memset(rest, 0, length - first);
    return false;
  };
  int n = 0;
  if (EVP_DecryptInit_ex2(ctx_, nullptr, nullptr, nonce, nullptr) != 1 ||
      EVP_DecryptUpdate(ctx_, nullptr, &n, header, kRecordHeaderSize) != 1) {
    return refuse();
  }
  const std::uint8_t* in = body.data();
  for (auto [out, size] : {std::pair{dst.data(), first}, std::pair{rest, length - first}}) {
    if (size == 0) continue;
    if (EVP_DecryptUpdate(ctx_, out, &n, in, static_cast<int>(size)) != 1 ||
        static_cast<std::size_t>(n) != size) {
      return refuse();
    }
    in += size;
  }
  int final_n = 0;
  std::uint8_t unused[32];  // an AEAD's final step writes nothing
  auto* tag = const_cast<std::uint8_t*>(body.data() + length);
  const bool authentic = EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_TAG, kAeadTagSize, tag) == 1 &&
                         EVP_DecryptFinal_ex(ctx_, unused, &final_n) == 1 && final_n == 0;
  return authentic || refuse();
}

}  // namespace sempi::transport
