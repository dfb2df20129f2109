#pragma once
// An OpenSSL BIO over a non-blocking TCP socket that never raises SIGPIPE.
//
// OpenSSL's socket BIO writes with write(2): a peer that vanished would kill the whole rank with
// SIGPIPE. A library must not change the process's signal disposition, so this BIO uses
// send(MSG_NOSIGNAL) instead; a dead peer becomes an EPIPE error on that one channel.

#include <openssl/bio.h>

namespace sempi::transport {

/// A new BIO on `fd` (not owned: the caller closes the socket). nullptr on allocation failure.
BIO* new_socket_bio(int fd);

}  // namespace sempi::transport
