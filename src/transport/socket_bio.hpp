#pragma once
// An OpenSSL BIO over a non-blocking TCP socket, used for the TLS handshake. It reads and writes
// through SocketBuffers (socket_buffers.hpp): records are gathered into few send() calls, one
// recv() serves several records, and send() never raises SIGPIPE. OpenSSL's own read-ahead would
// save the same system calls, but OpenSSL 3.0 moves the unread rest of its buffer to the front
// before every record. BIO_flush() drains the send buffer (OpenSSL flushes after each handshake
// flight). After the handshake the channel's record layer uses the same buffers directly.

#include <openssl/bio.h>

#include <cstddef>

#include "transport/socket_buffers.hpp"

namespace sempi::transport {

/// A new BIO on `fd` (not owned: the caller closes the socket). nullptr on allocation failure.
BIO* new_socket_bio(int fd);

/// The buffers of a BIO made by new_socket_bio(); they live as long as the BIO.
SocketBuffers& socket_bio_buffers(BIO* bio);

}  // namespace sempi::transport
