// The raw baselines sempi is measured against: a plain OpenSSL TLS 1.3 stream (mutual
// authentication, TLS_AES_128_GCM_SHA256, the same suite sempi negotiates by default) and a
// plain TCP stream, between two processes on loopback. No MPI, no framing, no matching: the cost
// of the transport alone.
//
// usage: tls_baseline [--tcp] [--busy] latency|bw [-m MAX_BYTES] [-i ITERATIONS]
//   --tcp   plain TCP instead of TLS      --busy  poll without sleeping (non-blocking spin)
// Output matches the OSU-style programs: "# name" then "size value" lines.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "pki/csr.hpp"
#include "pki/job_ca.hpp"

namespace {

struct Options {
  bool tcp = false;
  bool busy = false;
  std::string mode = "latency";
  long max = 4L << 20;
  int iterations = 10000;
};

constexpr int kWindow = 64;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tls_baseline: %s: %s\n", what, std::strerror(errno));
  ERR_print_errors_fp(stderr);
  std::exit(1);
}

// One end of the stream: TLS or plain TCP, blocking or spinning.
class Stream {
 public:
  Stream(int fd, SSL* ssl, bool busy) : fd_(fd), ssl_(ssl), busy_(busy) {
    if (busy_) ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  void write_all(const char* p, long n) {
    while (n > 0) {
      const long k = ssl_ ? SSL_write(ssl_, p, static_cast<int>(std::min(n, 1L << 30)))
                          : ::send(fd_, p, static_cast<size_t>(n), MSG_NOSIGNAL);
      if (k > 0) {
        p += k;
        n -= k;
      } else if (!retryable(k)) {
        die("write");
      }
    }
  }
  void read_all(char* p, long n) {
    while (n > 0) {
      const long k = ssl_ ? SSL_read(ssl_, p, static_cast<int>(std::min(n, 1L << 30)))
                          : ::recv(fd_, p, static_cast<size_t>(n), 0);
      if (k > 0) {
        p += k;
        n -= k;
      } else if (!retryable(k)) {
        die("read");
      }
    }
  }

 private:
  bool retryable(long k) const {
    if (ssl_) {
      const int e = SSL_get_error(ssl_, static_cast<int>(k));
      return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
    }
    return k < 0 && (errno == EAGAIN || errno == EINTR);
  }
  int fd_;
  SSL* ssl_;
  bool busy_;
};

SSL_CTX* make_context(const sempi::pki::JobCa& ca, std::uint32_t rank, bool server) {
  auto key = sempi::pki::PrivateKey::generate();
  sempi::pki::IssueOptions options;
  options.rank = rank;
  auto cert = ca.issue(sempi::pki::Csr::create(key), options);
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
  SSL_CTX_use_certificate(ctx, cert.get());
  SSL_CTX_use_PrivateKey(ctx, key.get());
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca.certificate().get());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_read_ahead(ctx, 1);
  return ctx;
}

void run(Stream& s, bool leader, const Options& o) {
  std::vector<char> buf(static_cast<size_t>(o.max) * (o.mode == "bw" ? kWindow : 1) + 1, 'a');
  if (leader) {
    std::printf("# %s %s%s\n# size_bytes %s\n", o.tcp ? "tcp" : "tls", o.mode.c_str(),
                o.busy ? " (busy-poll)" : "", o.mode == "bw" ? "bandwidth_MBps" : "latency_us");
  }
  for (long size = 1; size <= o.max; size *= 2) {
    int iters = size > (1L << 20) ? std::max(10, o.iterations / 100)
                : size > 8192      ? std::max(20, o.iterations / 10)
                                   : o.iterations;
    if (o.mode == "bw") iters = std::max(5, iters / 10);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      if (o.mode == "latency") {
        if (leader) {
          s.write_all(buf.data(), size);
          s.read_all(buf.data(), size);
        } else {
          s.read_all(buf.data(), size);
          s.write_all(buf.data(), size);
        }
      } else if (leader) {
        for (int w = 0; w < kWindow; ++w) s.write_all(buf.data() + w * size, size);
        s.read_all(buf.data(), 1);
      } else {
        s.read_all(buf.data(), size * kWindow);
        s.write_all(buf.data(), 1);
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (leader) {
      if (o.mode == "latency") {
        std::printf("%ld %.2f\n", size, secs * 1e6 / (2.0 * iters));
      } else {
        std::printf("%ld %.2f\n", size, static_cast<double>(size) * kWindow * iters / secs / 1e6);
      }
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tcp") o.tcp = true;
    else if (a == "--busy") o.busy = true;
    else if (a == "-m" && i + 1 < argc) o.max = std::atol(argv[++i]);
    else if (a == "-i" && i + 1 < argc) o.iterations = std::atoi(argv[++i]);
    else if (a == "latency" || a == "bw") o.mode = a;
    else {
      std::fprintf(stderr, "usage: tls_baseline [--tcp] [--busy] latency|bw [-m MAX] [-i N]\n");
      return 2;
    }
  }
  const auto ca = sempi::pki::JobCa::create(sempi::pki::JobId::random(), std::chrono::hours(1));
  SSL_CTX* server_ctx = o.tcp ? nullptr : make_context(ca, 0, true);
  SSL_CTX* client_ctx = o.tcp ? nullptr : make_context(ca, 1, false);

  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    die("listen");
  }
  const pid_t child = ::fork();
  const bool leader = child != 0;
  int fd = -1;
  if (leader) {
    fd = ::accept(listener, nullptr, nullptr);
  } else {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("connect");
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  SSL* ssl = nullptr;
  if (!o.tcp) {
    ssl = SSL_new(leader ? server_ctx : client_ctx);
    SSL_set_fd(ssl, fd);
    if ((leader ? SSL_accept(ssl) : SSL_connect(ssl)) != 1) die("handshake");
  }
  Stream stream(fd, ssl, o.busy);
  run(stream, leader, o);
  if (leader) ::waitpid(child, nullptr, 0);
  return 0;
}
