#pragma once
// HELLO: the first frame each side sends after the TLS handshake. It restates the identity the
// certificate already proves (so a mismatch between the two is caught) and announces the
// sender's limits, which the other side must respect when sending.
//
//  offset size field
//       0    4 magic          "SMPI"
//       4    2 version        kProtocolVersion
//       6    2 reserved       zero
//       8   16 job id
//      24    4 rank           world rank
//      28    4 world size
//      32   32 policy digest  SHA-256
//      64    8 max frame payload the sender accepts
//      72    8 max unexpected bytes the sender buffers per peer

#include <array>
#include <cstdint>
#include <span>
#include <system_error>

#include "pki/identity.hpp"

namespace sempi::transport {

inline constexpr std::size_t kHelloSize = 80;
inline constexpr std::uint64_t kMinFramePayload = 64 * 1024;

struct ChannelLimits {
  /// Largest frame payload this side accepts; larger frames close the channel.
  std::uint64_t max_frame_payload = 64ull << 20;
  /// Unexpected (unmatched) bytes this side buffers per peer before applying backpressure.
  std::uint64_t max_unexpected_bytes = 64ull << 20;

  bool operator==(const ChannelLimits&) const = default;
};

struct Hello {
  pki::JobId job;
  std::uint32_t rank = 0;
  std::uint32_t world_size = 0;
  pki::PolicyDigest policy_digest{};
  ChannelLimits limits;

  bool operator==(const Hello&) const = default;
};

std::array<std::uint8_t, kHelloSize> encode_hello(const Hello& hello) noexcept;

/// Parses a HELLO payload; checks size, magic, version, reserved bits and limit sanity.
std::error_code decode_hello(std::span<const std::uint8_t> payload, Hello& out) noexcept;

}  // namespace sempi::transport
