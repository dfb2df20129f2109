#pragma once
// An attacker's TLS client built on raw OpenSSL, unconstrained by sempi's own safety checks:
// it can present any certificate (or none), cap the protocol version, and write
// arbitrary bytes after the handshake. Blocking I/O with socket timeouts bounds every call.

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pki/certificate.hpp"
#include "pki/key.hpp"
#include "pki/ossl.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/socket.hpp"

namespace sempi::test {

struct RawClientOptions {
  explicit RawClientOptions(pki::Certificate trust_anchor) : trust(std::move(trust_anchor)) {}
  pki::Certificate trust;  // anchor for the server's chain (the job CA certificate is public)
  std::optional<pki::Certificate> cert;
  const pki::PrivateKey* key = nullptr;
  int max_version = TLS1_3_VERSION;
  int min_version = TLS1_2_VERSION;
  std::string ciphersuites;  // TLS 1.3 suites to offer; empty: OpenSSL's default
};

class RawTlsClient {
 public:
  RawTlsClient(const transport::Endpoint& to, const RawClientOptions& options) {
    // OpenSSL writes with write(): a write after the server closed must fail, not kill the test.
    ::signal(SIGPIPE, SIG_IGN);
    std::error_code ec;
    fd_ = transport::tcp_connect(to, transport::Clock::now() + std::chrono::seconds(30), ec);
    if (!fd_.valid()) return;
    // Back to blocking with a receive/send timeout, so that every call is bounded.
    const int flags = ::fcntl(fd_.get(), F_GETFL);
    ::fcntl(fd_.get(), F_SETFL, flags & ~O_NONBLOCK);
    timeval tv{30, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

    ctx_.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_min_proto_version(ctx_.get(), options.min_version);
    SSL_CTX_set_max_proto_version(ctx_.get(), options.max_version);
    if (!options.ciphersuites.empty()) {
      SSL_CTX_set_ciphersuites(ctx_.get(), options.ciphersuites.c_str());
    }
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx_.get()), options.trust.get());
    SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    if (options.cert && options.key) {
      SSL_CTX_use_certificate(ctx_.get(), options.cert->get());
      SSL_CTX_use_PrivateKey(ctx_.get(), options.key->get());
    }
    ssl_.reset(SSL_new(ctx_.get()));
    SSL_set_fd(ssl_.get(), fd_.get());
  }

  [[nodiscard]] bool tcp_connected() const { return fd_.valid(); }

  /// Runs the client handshake; true if OpenSSL reports success on the client side (in TLS 1.3
  /// the server may still reject our certificate afterwards).
  bool handshake() { return ssl_ && SSL_connect(ssl_.get()) == 1; }

  bool write(std::span<const std::uint8_t> bytes) {
    return SSL_write(ssl_.get(), bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }

  bool write_frame(transport::FrameHeader header, std::span<const std::uint8_t> payload) {
    header.length = payload.size();
    const auto encoded = transport::encode_frame_header(header);
    std::vector<std::uint8_t> bytes(encoded.begin(), encoded.end());
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    return write(bytes);
  }

  bool send_hello(const transport::Hello& hello) {
    transport::FrameHeader header;
    header.type = transport::FrameType::hello;
    const auto payload = transport::encode_hello(hello);
    return write_frame(header, payload);
  }

  /// Reads application data until EOF/error; returns the number of bytes received.
  std::size_t drain() {
    std::size_t total = 0;
    std::uint8_t buf[4096];
    for (;;) {
      const int n = SSL_read(ssl_.get(), buf, sizeof buf);
      if (n <= 0) return total;
      total += static_cast<std::size_t>(n);
    }
  }

  /// Reads exactly one frame header+payload (e.g. the server's HELLO, sequence 0); false on
  /// failure. The header goes to `header_out` if given.
  bool read_frame(std::vector<std::uint8_t>& out, std::uint64_t expected_sequence = 0,
                  transport::FrameHeader* header_out = nullptr) {
    std::uint8_t header[transport::kFrameHeaderSize];
    if (!read_exact(header, sizeof header)) return false;
    transport::FrameHeader h;
    if (transport::decode_frame_header(std::span<const std::uint8_t, transport::kFrameHeaderSize>(
                                           header, transport::kFrameHeaderSize),
                                       1ull << 30, expected_sequence, h)) {
      return false;
    }
    if (header_out != nullptr) *header_out = h;
    out.resize(h.length);
    return read_exact(out.data(), out.size());
  }

  void close_notify() { SSL_shutdown(ssl_.get()); }
  [[nodiscard]] SSL* ssl() const { return ssl_.get(); }
  [[nodiscard]] int fd() const { return fd_.get(); }

 private:
  bool read_exact(std::uint8_t* dst, std::size_t size) {
    while (size > 0) {
      const int n = SSL_read(ssl_.get(), dst, static_cast<int>(size));
      if (n <= 0) return false;
      dst += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }

  transport::UniqueFd fd_;
  pki::SslCtxPtr ctx_;
  pki::SslPtr ssl_;
};

}  // namespace sempi::test
