#include "transport/tls_context.hpp"

#include <set>
#include <sstream>

#include "transport/accept_progress.hpp"
#include "transport/traffic_secrets.hpp"

namespace sempi::transport {
namespace {

std::set<std::string> split(const std::string& list) {
  std::set<std::string> items;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ':')) items.insert(item);
  return items;
}

void require_subset(const std::string& requested, const std::string& permitted,
                    const char* what) {
  const auto allowed = split(permitted);
  if (requested.empty()) throw Error(ErrorClass::config, std::string("empty TLS ") + what + " list");
  for (const auto& item : split(requested)) {
    if (allowed.count(item) == 0) {
      throw Error(ErrorClass::config, std::string("TLS ") + what + " '" + item +
                                          "' is not permitted; choose from " + permitted);
    }
  }
}

// The trust store's flags: the job CA is the one anchor even when a site CA signed it
// (PARTIAL_CHAIN), and certificates must be strictly well-formed.
constexpr unsigned long kTrustFlags = X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_X509_STRICT;

// Refuse a certificate that would be rejected by every peer: better a clear error at start-up.
// Checked as the peers check it (the same anchor, the same flags).
void check_certificate_chains_to_ca(const TlsConfig& config) {
  pki::OsslErrorScope scope;
  pki::X509StorePtr store{X509_STORE_new()};
  pki::X509StoreCtxPtr ctx{X509_STORE_CTX_new()};
  if (store) X509_STORE_set_flags(store.get(), kTrustFlags);
  if (!store || !ctx || X509_STORE_add_cert(store.get(), config.job_ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), config.certificate.get(), nullptr) != 1) {
    pki::throw_openssl_error("cannot set up certificate verification", ErrorClass::config);
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    throw Error(ErrorClass::config, std::string("own certificate does not verify against the job "
                                                "CA: ") + X509_verify_cert_error_string(err));
  }
}

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::create(const TlsConfig& config) {
  if (!config.key) throw Error(ErrorClass::config, "TLS configuration has no private key");
  require_subset(config.ciphersuites, kDefaultCiphersuites, "ciphersuite");
  require_subset(config.groups, kDefaultGroups, "group");
  check_certificate_chains_to_ca(config);

  pki::OsslErrorScope scope;
  pki::SslCtxPtr ctx{SSL_CTX_new(TLS_method())};
  if (!ctx) pki::throw_openssl_error("SSL_CTX_new failed", ErrorClass::config);
  SSL_CTX* c = ctx.get();

  // TLS 1.3 only: no downgrade is possible because nothing older is enabled.
  if (SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION) != 1) {
    pki::throw_openssl_error("cannot restrict protocol to TLS 1.3", ErrorClass::config);
  }
  if (SSL_CTX_set_ciphersuites(c, config.ciphersuites.c_str()) != 1) {
    pki::throw_openssl_error("invalid ciphersuites", ErrorClass::config);
  }
  if (SSL_CTX_set1_groups_list(c, config.groups.c_str()) != 1) {
    pki::throw_openssl_error("invalid groups", ErrorClass::config);
  }
  // No compression (CRIME-style attacks); no session tickets or cache: every connection is a
  // full mutually authenticated handshake, so a revoked/expired identity cannot resume.
  SSL_CTX_set_options(c, SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
                             SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(c, 0);
  SSL_CTX_set_max_early_data(c, 0);
  // Partial writes let the progress engine interleave large messages without blocking.
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

  if (SSL_CTX_use_certificate(c, config.certificate.get()) != 1 ||
      SSL_CTX_use_PrivateKey(c, config.key->get()) != 1 || SSL_CTX_check_private_key(c) != 1) {
    pki::throw_openssl_error("certificate and private key do not match", ErrorClass::config);
  }

  // Trust exactly one anchor: this job's CA. The system store is never loaded. PARTIAL_CHAIN
  // makes the job CA a trust anchor even when a site CA signed it.
  X509_STORE* store = SSL_CTX_get_cert_store(c);
  if (X509_STORE_add_cert(store, config.job_ca.get()) != 1) {
    pki::throw_openssl_error("cannot install the job CA as trust anchor", ErrorClass::config);
  }
  X509_STORE_set_flags(store, kTrustFlags);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // A rank certificate is issued directly by the job CA: no intermediates.
  SSL_CTX_set_verify_depth(c, 1);
  // The channel's record layer takes over with the traffic secrets (record_layer.hpp).
  enable_secret_capture(c);
  // An acceptor under a flood hears which connections got as far as a ClientHello.
  enable_accept_progress(c);

  return std::shared_ptr<const TlsContext>(new TlsContext(std::move(ctx)));
}

}  // namespace sempi::transport
