#include "transport/traffic_secrets.hpp"

#include <openssl/crypto.h>

#include <string_view>

namespace sempi::transport {
namespace {

int secrets_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes `hex` into `out`; returns the byte count, or 0 if it does not fit or is not hex.
std::size_t decode_secret(std::string_view hex, std::array<std::uint8_t, 64>& out) {
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() / 2 > out.size()) return 0;
  for (std::size_t i = 0; i < hex.size() / 2; ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return 0;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return hex.size() / 2;
}

// Key-log lines read "<label> <client random, hex> <secret, hex>" (NSS key log format).
void on_key_log_line(const SSL* ssl, const char* line) {
  auto* secrets = static_cast<TrafficSecrets*>(SSL_get_ex_data(ssl, secrets_index()));
  if (secrets == nullptr || line == nullptr) return;
  const std::string_view text(line);
  const auto first_space = text.find(' ');
  const auto second_space = text.find(' ', first_space + 1);
  if (first_space == std::string_view::npos || second_space == std::string_view::npos) return;
  const std::string_view label = text.substr(0, first_space);
  const std::string_view secret = text.substr(second_space + 1);
  if (label == "CLIENT_TRAFFIC_SECRET_0") {
    secrets->client_size = decode_secret(secret, secrets->client);
  } else if (label == "SERVER_TRAFFIC_SECRET_0") {
    secrets->server_size = decode_secret(secret, secrets->server);
  }
}

}  // namespace

TrafficSecrets::~TrafficSecrets() {
  OPENSSL_cleanse(client.data(), client.size());
  OPENSSL_cleanse(server.data(), server.size());
}

std::span<const std::uint8_t> TrafficSecrets::writing(bool is_client) const noexcept {
  return is_client ? std::span(client.data(), client_size) : std::span(server.data(), server_size);
}

std::span<const std::uint8_t> TrafficSecrets::reading(bool is_client) const noexcept {
  return writing(!is_client);
}

void enable_secret_capture(SSL_CTX* ctx) { SSL_CTX_set_keylog_callback(ctx, on_key_log_line); }

bool capture_secrets_into(SSL* ssl, TrafficSecrets* secrets) {
  return secrets_index() >= 0 && SSL_set_ex_data(ssl, secrets_index(), secrets) == 1;
}

}  // namespace sempi::transport
