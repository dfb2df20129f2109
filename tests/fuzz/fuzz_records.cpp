// Fuzz input for sempi's TLS record layer (selector 3 of fuzz_wire.cpp): a stream of records
// as an authenticated peer could send them, sealed with the real keys, with any inner content
// type, any content (KeyUpdates, alerts, padding, oversize content), interleaved with raw
// bytes. The reader must never crash, and the application data it delivers must be a prefix of
// what the application-data records carried.
//
// Input: the suite (byte % 3: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
// TLS_CHACHA20_POLY1305_SHA256), then repeated { op, length (2 bytes, little endian),
// bytes[length] }.
//   op % 3 == 0: an application-data record with these bytes as content
//   op % 3 == 1: a record whose inner content type is bytes[0] and content the rest
//   op % 3 == 2: the bytes as they are, unencrypted

#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/record_layer.hpp"
#include "transport/record_protection.hpp"
#include "transport/socket_buffers.hpp"

namespace {

using sempi::transport::ContentType;
using sempi::transport::RecordLayer;
using sempi::transport::RecordProtection;
using sempi::transport::SocketBuffers;

// The TLS 1.3 suite with code 0x13, 0x01 + `index` (0 to 2).
const SSL_CIPHER* suite(unsigned index) {
  static SSL_CTX* const ctx = SSL_CTX_new(TLS_method());
  static SSL* const ssl = SSL_new(ctx);
  const std::array<unsigned char, 2> code{0x13, static_cast<unsigned char>(0x01 + index)};
  return SSL_CIPHER_find(ssl, code.data());
}

std::unique_ptr<RecordProtection> keys(unsigned index, RecordProtection::Direction direction) {
  // As long as the suite's hash: TLS_AES_256_GCM_SHA384's secrets are 48 bytes.
  const std::uint8_t secret[48] = {7, 1, 2, 3};
  std::string error;
  auto p = RecordProtection::create(suite(index), std::span(secret, index == 1 ? 48 : 32),
                                    direction, error);
  if (!p) __builtin_trap();
  return p;
}

}  // namespace

void fuzz_record_layer(std::span<const std::uint8_t> input) {
  if (input.empty()) return;
  const unsigned index = input[0] % 3;
  input = input.subspan(1);
  auto sealer = keys(index, RecordProtection::Direction::seal);
  std::vector<std::uint8_t> wire;
  std::vector<std::uint8_t> application;  // what the application-data records carried
  while (input.size() >= 3) {
    const std::uint8_t op = input[0] % 3;
    // At most what a record header can describe; over 2^14 the reader must refuse it.
    const std::size_t length = std::min<std::size_t>(
        {static_cast<std::size_t>(input[1] | input[2] << 8), input.size() - 3, 65000});
    auto bytes = input.subspan(3, length);
    input = input.subspan(3 + length);
    if (op == 2) {
      wire.insert(wire.end(), bytes.begin(), bytes.end());
      continue;
    }
    auto type = ContentType::application_data;
    if (op == 1) {
      if (bytes.empty()) continue;
      type = static_cast<ContentType>(bytes[0]);
      bytes = bytes.subspan(1);
    }
    const std::size_t at = wire.size();
    wire.resize(at + bytes.size() + sempi::transport::kRecordOverhead);
    if (!sealer->seal(type, bytes, {}, wire.data() + at)) __builtin_trap();
    // What the reader sees: the content type is the last non-zero byte of content || type.
    std::vector<std::uint8_t> inner(bytes.begin(), bytes.end());
    inner.push_back(static_cast<std::uint8_t>(type));
    while (!inner.empty() && inner.back() == 0) inner.pop_back();
    if (!inner.empty() &&
        inner.back() == static_cast<std::uint8_t>(ContentType::application_data)) {
      application.insert(application.end(), inner.begin(), inner.end() - 1);
    }
    // A well-formed KeyUpdate moves the sender on, as a real peer would.
    if (inner.size() == 6 && inner[0] == 24 && inner[1] == 0 && inner[2] == 0 && inner[3] == 1 &&
        inner[4] <= 1 && inner[5] == static_cast<std::uint8_t>(ContentType::handshake)) {
      std::string error;
      if (!sealer->update(error)) __builtin_trap();
    }
  }

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return;
  const std::size_t n = std::min<std::size_t>(wire.size(), 100000);
  if (n > 0) (void)::send(fds[1], wire.data(), n, MSG_NOSIGNAL);
  ::shutdown(fds[1], SHUT_WR);
  {
    SocketBuffers io(fds[0]);
    RecordLayer reader(io, keys(index, RecordProtection::Direction::seal),
                       keys(index, RecordProtection::Direction::open));
    std::vector<std::uint8_t> delivered;
    std::uint8_t buffer[700];  // smaller than a record: exercises the spill path too
    for (;;) {
      const long got = reader.read(buffer, sizeof buffer);
      if (got < 0) break;
      if (got == 0 && !reader.has_buffered_input()) break;  // cannot happen: EOF is an error
      delivered.insert(delivered.end(), buffer, buffer + got);
    }
    if (!reader.failed()) __builtin_trap();
    if (delivered.size() > application.size() ||
        !std::equal(delivered.begin(), delivered.end(), application.begin())) {
      __builtin_trap();
    }
    (void)reader.flush();  // a requested KeyUpdate or an alert goes out without a crash
  }
  ::close(fds[0]);
  ::close(fds[1]);
}
