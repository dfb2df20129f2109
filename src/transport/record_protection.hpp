#pragma once
// TLS 1.3 record protection for one direction of a connection (RFC 8446, sections 5.2-5.3 and
// 7.1-7.3): the AEAD key and IV derived from a traffic secret, the record sequence number that
// makes each nonce unique, and the key update that replaces the secret.
//
// Why sempi protects records itself once OpenSSL has completed the handshake: record_layer.hpp.
//
// Secrets and keys are wiped when replaced and on destruction.

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace sempi::transport {

/// TLS record content types (RFC 8446, 5.1) sempi meets after the handshake.
enum class ContentType : std::uint8_t { alert = 21, handshake = 22, application_data = 23 };

inline constexpr std::size_t kRecordHeaderSize = 5;
/// Largest plaintext of one record (2^14).
inline constexpr std::size_t kMaxRecordPlaintext = 16384;
/// Largest encrypted record body a peer may send (2^14 + 256).
inline constexpr std::size_t kMaxRecordBody = kMaxRecordPlaintext + 256;
inline constexpr std::size_t kAeadTagSize = 16;
/// Bytes a record adds to its content: header, inner content type, AEAD tag.
inline constexpr std::size_t kRecordOverhead = kRecordHeaderSize + 1 + kAeadTagSize;

class RecordProtection {
 public:
  enum class Direction { seal, open };

  /// Keys for `suite` (AES-128/256-GCM or ChaCha20-Poly1305) from a traffic secret, for
  /// sealing (our writes) or opening (the peer's). nullptr with `error` set if the suite is not
  /// one of these or OpenSSL fails.
  static std::unique_ptr<RecordProtection> create(const SSL_CIPHER* suite,
                                                  std::span<const std::uint8_t> secret,
                                                  Direction direction, std::string& error);
  RecordProtection(const RecordProtection&) = delete;
  RecordProtection& operator=(const RecordProtection&) = delete;
  ~RecordProtection();

  /// Protects one record with the next sequence number: writes header, encrypted
  /// (content || type) and tag to `out`, which must hold content.size() + kRecordOverhead
  /// bytes. `content` may come in two pieces (e.g. frame header and payload), and must not
  /// overlap `out`. Returns false if OpenSSL fails or the record's length does not fit its
  /// header (callers keep content within kMaxRecordPlaintext; only tests write more).
  bool seal(ContentType type, std::span<const std::uint8_t> first,
            std::span<const std::uint8_t> second, std::uint8_t* out);

  /// Decrypts the record with header `header` and `body` (ciphertext and tag): the first
  /// dst.size() bytes of the inner plaintext into `dst`, the rest (if any) into `rest`. Either
  /// may be the body itself. Returns false if the record is not authentic; the outputs are then
  /// zeroed, so no unauthenticated plaintext is left in them.
  bool open(const std::uint8_t* header, std::span<const std::uint8_t> body,
            std::span<std::uint8_t> dst, std::uint8_t* rest);

  /// Replaces the secret by the next generation and derives new keys (RFC 8446, 7.2); the
  /// sequence number starts again at 0.
  bool update(std::string& error);

  /// Records protected or opened under the current key.
  [[nodiscard]] std::uint64_t records() const noexcept { return sequence_; }

 private:
  RecordProtection() = default;
  bool derive_keys(std::string& error);
  void next_nonce(std::uint8_t* nonce) noexcept;

  EVP_CIPHER* cipher_ = nullptr;  // fetched once
  EVP_CIPHER_CTX* ctx_ = nullptr;
  const EVP_MD* hash_ = nullptr;
  std::size_t key_size_ = 0;
  std::array<std::uint8_t, 64> secret_{};
  std::size_t secret_size_ = 0;
  std::array<std::uint8_t, 12> iv_{};
  std::uint64_t sequence_ = 0;
  bool sealing_ = true;
};

}  // namespace sempi::transport
