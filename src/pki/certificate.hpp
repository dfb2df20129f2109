#pragma once
// An X.509 certificate with the accessors sempi needs (validity, fingerprint, PEM).

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pki/ossl.hpp"

namespace sempi::pki {

using SystemTime = std::chrono::system_clock::time_point;

class Certificate {
 public:
  /// Takes ownership of a certificate.
  explicit Certificate(X509Ptr cert);
  /// Shares (up-refs) a certificate owned by OpenSSL, e.g. SSL_get0_peer_certificate.
  static Certificate share(X509* cert);
  /// Parses one PEM certificate. Throws sempi::Error(config) naming what was wrong.
  static Certificate from_pem(std::string_view pem);
  /// Parses every certificate in a PEM bundle (at least one). Throws sempi::Error(config).
  static std::vector<Certificate> bundle_from_pem(std::string_view pem);

  Certificate(const Certificate& other);
  Certificate& operator=(const Certificate& other);
  Certificate(Certificate&&) noexcept = default;
  Certificate& operator=(Certificate&&) noexcept = default;
  ~Certificate() = default;

  [[nodiscard]] std::string to_pem() const;
  [[nodiscard]] std::vector<std::uint8_t> to_der() const;
  /// SHA-256 over the DER encoding.
  [[nodiscard]] std::array<std::uint8_t, 32> fingerprint_sha256() const;
  [[nodiscard]] SystemTime not_before() const;
  [[nodiscard]] SystemTime not_after() const;
  /// Subject as a one-line string (RFC 2253).
  [[nodiscard]] std::string subject() const;
  [[nodiscard]] X509* get() const noexcept { return cert_.get(); }

 private:
  X509Ptr cert_;
};

/// Formats a time as ISO 8601 UTC ("2026-12-02T15:21:14Z").
std::string format_utc(SystemTime t);

}  // namespace sempi::pki
