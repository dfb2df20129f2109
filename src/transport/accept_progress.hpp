#pragma once
// How far the establishment of an accepted connection has come, reported as it happens, so that
// a listener flooded with connections that prove nothing can tell them from genuine peers
// (core/higher_rank_acceptor.hpp).
//
// The ClientHello is reported from OpenSSL's ClientHello callback, which runs before the server
// writes its first flight: once a client has read that flight, its progress has been heard.

#include <openssl/ssl.h>

#include <cstdint>
#include <functional>

namespace sempi::transport {

enum class AcceptProgress {
  client_hello,   ///< a whole ClientHello arrived: the peer speaks TLS to us
  peer_verified,  ///< the peer proved a certificate of this job and the identity in it
};

/// Hears a stage reached; `rank` is the rank the peer's certificate names (peer_verified only,
/// 0 otherwise). Runs on the accepting thread, inside OpenSSL for client_hello: it must not
/// throw (an exception there is caught and ignored).
using AcceptProgressHandler = std::function<void(AcceptProgress, std::uint32_t rank)>;

/// Installs the ClientHello callback on a context (once, at context creation).
void enable_accept_progress(SSL_CTX* ctx);
/// Makes `ssl`'s ClientHello call `handler`, which must outlive the handshake (or be null: no
/// reports). false on failure.
bool report_accept_progress(SSL* ssl, const AcceptProgressHandler* handler);

}  // namespace sempi::transport
