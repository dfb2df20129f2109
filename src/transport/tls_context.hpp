#pragma once
// The TLS configuration of one rank: TLS 1.3 only, mutual authentication, trust anchored in the
// job CA alone. Insecure or inconsistent configuration is refused here, at load time.
//
// Thread safety: a TlsContext is immutable after create() and may be shared by all channels.

#include <memory>
#include <string>

#include "pki/certificate.hpp"
#include "pki/key.hpp"
#include "pki/ossl.hpp"

namespace sempi::transport {

/// The TLS 1.3 suites sempi permits, in default preference order.
inline constexpr const char* kDefaultCiphersuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
inline constexpr const char* kDefaultGroups = "X25519:P-256";

struct TlsConfig {
  pki::Certificate job_ca;
  pki::Certificate certificate;
  std::shared_ptr<const pki::PrivateKey> key;
  /// A ':'-separated order of suites drawn from kDefaultCiphersuites.
  std::string ciphersuites = kDefaultCiphersuites;
  /// A ':'-separated order of groups drawn from {X25519, P-256}.
  std::string groups = kDefaultGroups;
};

class TlsContext {
 public:
  /// Builds the SSL_CTX. Throws sempi::Error(config) if the certificate does not chain to the job
  /// CA, the key does not match, or a suite/group outside the permitted set is requested.
  static std::shared_ptr<const TlsContext> create(const TlsConfig& config);

  [[nodiscard]] SSL_CTX* get() const noexcept { return ctx_.get(); }

 private:
  explicit TlsContext(pki::SslCtxPtr ctx) : ctx_(std::move(ctx)) {}
  pki::SslCtxPtr ctx_;
};

}  // namespace sempi::transport
