#include "transport/hello.hpp"

#include <algorithm>

#include "sempi/error.hpp"
#include "sempi/version.hpp"
#include "transport/little_endian.hpp"

namespace sempi::transport {
namespace {
constexpr std::uint32_t kHelloMagic = 0x49504d53;  // "SMPI" in little endian
}

std::array<std::uint8_t, kHelloSize> encode_hello(const Hello& h) noexcept {
  std::array<std::uint8_t, kHelloSize> out{};
  std::uint8_t* p = out.data();
  store_le<std::uint32_t>(p, kHelloMagic);
  store_le<std::uint16_t>(p + 4, static_cast<std::uint16_t>(kProtocolVersion));
  std::copy(h.job.bytes().begin(), h.job.bytes().end(), p + 8);
  store_le<std::uint32_t>(p + 24, h.rank);
  store_le<std::uint32_t>(p + 28, h.world_size);
  std::copy(h.policy_digest.begin(), h.policy_digest.end(), p + 32);
  store_le<std::uint64_t>(p + 64, h.limits.max_frame_payload);
  store_le<std::uint64_t>(p + 72, h.limits.max_unexpected_bytes);
  return out;
}

std::error_code decode_hello(std::span<const std::uint8_t> payload, Hello& out) noexcept {
  if (payload.size() != kHelloSize) return errc::hello_invalid;
  const std::uint8_t* p = payload.data();
  if (load_le<std::uint32_t>(p) != kHelloMagic) return errc::hello_invalid;
  if (load_le<std::uint16_t>(p + 4) != kProtocolVersion) return errc::protocol_version_mismatch;
  if (load_le<std::uint16_t>(p + 6) != 0) return errc::hello_invalid;
  std::array<std::uint8_t, pki::JobId::kBytes> job{};
  std::copy(p + 8, p + 24, job.begin());
  out.job = pki::JobId(job);
  out.rank = load_le<std::uint32_t>(p + 24);
  out.world_size = load_le<std::uint32_t>(p + 28);
  std::copy(p + 32, p + 64, out.policy_digest.begin());
  out.limits.max_frame_payload = load_le<std::uint64_t>(p + 64);
  out.limits.max_unexpected_bytes = load_le<std::uint64_t>(p + 72);
  if (out.world_size == 0 || out.rank >= out.world_size) return errc::hello_invalid;
  if (out.limits.max_frame_payload < kMinFramePayload) return errc::hello_invalid;
  return {};
}

}  // namespace sempi::transport
