#include "transport/frame.hpp"

#include "sempi/error.hpp"
#include "sempi/version.hpp"
#include "transport/little_endian.hpp"

namespace sempi::transport {

EncodedHeader encode_frame_header(const FrameHeader& h) noexcept {
  EncodedHeader out{};
  std::uint8_t* p = out.data();
  store_le<std::uint16_t>(p + 0, kFrameMagic);
  p[2] = static_cast<std::uint8_t>(kProtocolVersion);
  p[3] = static_cast<std::uint8_t>(h.type);
  store_le<std::uint16_t>(p + 4, h.flags);
  store_le<std::uint16_t>(p + 6, h.op);
  store_le<std::uint32_t>(p + 8, h.context);
  store_le<std::uint32_t>(p + 12, h.source);
  store_le<std::uint32_t>(p + 16, static_cast<std::uint32_t>(h.tag));
  store_le<std::uint32_t>(p + 20, 0);
  store_le<std::uint64_t>(p + 24, h.sequence);
  store_le<std::uint64_t>(p + 32, h.length);
  store_le<std::uint64_t>(p + 40, h.aux);
  return out;
}

std::error_code decode_frame_header(std::span<const std::uint8_t, kFrameHeaderSize> bytes,
                                    std::uint64_t max_payload, std::uint64_t expected_sequence,
                                    FrameHeader& out) noexcept {
  const std::uint8_t* p = bytes.data();
  if (load_le<std::uint16_t>(p) != kFrameMagic) return errc::frame_bad_magic;
  if (p[2] != kProtocolVersion) return errc::frame_bad_version;
  if (p[3] == 0 || p[3] > kMaxFrameType) return errc::frame_unknown_type;
  const auto flags = load_le<std::uint16_t>(p + 4);
  if ((flags & ~frame_flags::kKnownMask) != 0) return errc::frame_bad_reserved;
  if (load_le<std::uint32_t>(p + 20) != 0) return errc::frame_bad_reserved;
  const auto length = load_le<std::uint64_t>(p + 32);
  if (length > max_payload) return errc::frame_too_large;
  const auto sequence = load_le<std::uint64_t>(p + 24);
  if (sequence != expected_sequence) return errc::frame_bad_sequence;

  out.type = static_cast<FrameType>(p[3]);
  out.flags = flags;
  out.op = load_le<std::uint16_t>(p + 6);
  out.context = load_le<std::uint32_t>(p + 8);
  out.source = load_le<std::uint32_t>(p + 12);
  out.tag = static_cast<std::int32_t>(load_le<std::uint32_t>(p + 16));
  out.sequence = sequence;
  out.length = length;
  out.aux = load_le<std::uint64_t>(p + 40);
  return {};
}

const char* frame_type_name(FrameType type) noexcept {
  switch (type) {
    case FrameType::hello: return "HELLO";
    case FrameType::eager: return "EAGER";
    case FrameType::rts: return "RTS";
    case FrameType::cts: return "CTS";
    case FrameType::data: return "DATA";
    case FrameType::sync_ack: return "SYNC_ACK";
    case FrameType::control: return "CONTROL";
    case FrameType::goodbye: return "GOODBYE";
    case FrameType::abort: return "ABORT";
    case FrameType::deny: return "DENY";
    case FrameType::credit: return "CREDIT";
    case FrameType::withdrawn: return "WITHDRAWN";
    case FrameType::finalizing:
      return "FINALIZING";
  }
  return "UNKNOWN";
}

}  // namespace sempi::transport
