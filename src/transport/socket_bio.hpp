#pragma once
// An OpenSSL BIO over a non-blocking TCP socket that never raises SIGPIPE.
//
// OpenSSL's socket BIO writes with write(2): a peer that vanished would kill the whole rank with
// SIGPIPE. A library must not change the process's signal disposition, so this BIO uses
// send(MSG_NOSIGNAL) instead; a dead peer becomes an EPIPE error on that one channel.
//
// Writes are buffered: OpenSSL hands over one TLS record (at most ~16 KiB) per write, and a
// send() per record costs a system call and a trip through the TCP stack each. This BIO gathers
// records and sends them together once 64 KiB are buffered and at every BIO_flush(), which
// OpenSSL issues after each handshake flight and alert, and Channel::flush() after each batch
// of application data. A full buffer (256 KiB) makes writes retry, like a full socket.
// BIO_wpending() reports the bytes not yet handed to the kernel.
//
// Reads are buffered too: one recv() takes up to 128 KiB (several records), and OpenSSL's
// record layer, which asks for a 5-byte header and then the record body, is served from that
// buffer. OpenSSL's own read-ahead would save the same system calls, but OpenSSL 3.0 moves the
// unread rest of its buffer to the front before every record, which costs several copies of
// every byte once the buffer is larger than a record. BIO_pending() reports the received bytes
// OpenSSL has not taken yet; a poll() on the socket cannot see them.

#include <openssl/bio.h>

#include <cstddef>

namespace sempi::transport {

/// A new BIO on `fd` (not owned: the caller closes the socket). nullptr on allocation failure.
BIO* new_socket_bio(int fd);

// BIO_wpending() and BIO_pending() without the generic BIO_ctrl() dispatch: the progress engine
// asks both of every channel on every poll. Only for BIOs made by new_socket_bio().
/// Bytes OpenSSL wrote that are not yet handed to the kernel.
std::size_t socket_bio_unsent(BIO* bio);
/// Received bytes OpenSSL has not read yet.
std::size_t socket_bio_unread(BIO* bio);

}  // namespace sempi::transport
