#pragma once
// The TLS 1.3 application traffic secrets of one connection, captured as OpenSSL derives them
// during the handshake, so that the channel's record layer can take over record protection
// afterwards (record_layer.hpp explains why).
//
// OpenSSL 3.0 hands these secrets out only through its key-log callback. The callback installed
// here copies the two application traffic secrets into the connection's own TrafficSecrets,
// if the connection has one, and ignores every other line: nothing is written to a file or a
// log. Secrets are wiped on destruction.

#include <openssl/ssl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace sempi::transport {

struct TrafficSecrets {
  std::array<std::uint8_t, 64> client{};
  std::array<std::uint8_t, 64> server{};
  std::size_t client_size = 0;
  std::size_t server_size = 0;

  TrafficSecrets() = default;
  TrafficSecrets(const TrafficSecrets&) = delete;
  TrafficSecrets& operator=(const TrafficSecrets&) = delete;
  ~TrafficSecrets();

  [[nodiscard]] bool complete() const noexcept { return client_size > 0 && server_size > 0; }
  /// The secret this side writes with, and the one it reads with.
  [[nodiscard]] std::span<const std::uint8_t> writing(bool is_client) const noexcept;
  [[nodiscard]] std::span<const std::uint8_t> reading(bool is_client) const noexcept;
};

/// Installs the capturing key-log callback on a context (once, at context creation).
void enable_secret_capture(SSL_CTX* ctx);
/// Makes `ssl`'s handshake fill `secrets`, which must outlive the handshake. false on failure.
bool capture_secrets_into(SSL* ssl, TrafficSecrets* secrets);

}  // namespace sempi::transport
