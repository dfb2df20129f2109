#pragma once
// The sempi frame: a fixed 48-byte little-endian header followed by `length` payload bytes,
// carried inside a TLS 1.3 channel. Network input is hostile: decode_frame_header() checks every
// field before anything is allocated, and any violation is a typed error that closes the channel.
//
//  offset size field
//       0    2 magic        0x5053 ("SP")
//       2    1 version      kProtocolVersion
//       3    1 type         FrameType
//       4    2 flags        FrameFlags; unknown bits are an error
//       6    2 op           collective operation kind (0 = point-to-point)
//       8    4 context      communicator context id
//      12    4 source       sender's rank in the communicator
//      16    4 tag          message tag (signed)
//      20    4 reserved     must be zero
//      24    8 sequence     per channel and direction, starts at 0 (HELLO), +1 per frame
//      32    8 length       payload bytes in this frame
//      40    8 aux          type-specific (RTS: total message bytes; CTS/DATA/DENY: rendezvous id;
//                           CREDIT: bytes of eager credit returned; WITHDRAWN: error class,
//                           and the collective's sequence number in the high 32 bits)

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <system_error>

namespace sempi::transport {

inline constexpr std::size_t kFrameHeaderSize = 48;
inline constexpr std::uint16_t kFrameMagic = 0x5053;

enum class FrameType : std::uint8_t {
  hello = 1,     // identity and limits, first frame in each direction
  eager = 2,     // a whole small message
  rts = 3,       // rendezvous: request to send `aux` bytes
  cts = 4,       // rendezvous: clear to send for rendezvous id `aux`
  data = 5,      // rendezvous payload chunk for id `aux`
  sync_ack = 6,  // synchronous-send acknowledgement for the message with sequence `aux`
  control = 7,   // runtime control (communicator agreement, barrier of the launcher, ...)
  goodbye = 8,   // orderly close: the sender will send nothing more
  abort = 9,     // the job is aborting; payload is a UTF-8 reason
  deny = 10,     // the receiver's policy refused a message: `aux` is the RTS's rendezvous id, or
                 // with flag kSynchronous the synchronous EAGER's sync id; payload: a short
                 // UTF-8 reason. The sender fails that request with ErrorClass::policy.
  credit = 11,   // the receiver freed `aux` bytes of eager credit (see core/engine.hpp)
  // The sender takes no further part in a collective on collective context `context` (its
  // part failed, or never began): nothing more of it will come, and it receives nothing more.
  // `aux`: the failure's ErrorClass (low 32 bits) and the collective's sequence number (high
  // 32 bits); tag 0; payload: a short UTF-8 reason. The receiver fails its transfers with the
  // sender in that collective that wait for the sender (receives, and rendezvous sends before
  // its CTS), and those it posts later. The sender cancels its own rendezvous sends there that
  // had no CTS yet, so no DATA follows the frame: the receiver drops their RTS, and fails a
  // receive that matched one (its CTS crossed the frame).
  withdrawn = 12,
  // The sender has begun to finalize: it starts no new message (no EAGER, no RTS) on this
  // channel from now on. It still answers and finishes what is under way (CTS, DATA,
  // SYNC_ACK, DENY, CREDIT) until its GOODBYE. Its messages sent before precede the frame, so
  // the receiver knows that a receive from it that nothing matched never will be. After it,
  // each message of the receiver's that it holds or gets and will never receive, and whose
  // sender waits (an RTS, a synchronous EAGER), is answered with a DENY flagged UNRECEIVED.
  // No flags, no tag, no aux, no payload.
  finalizing = 13,
};
inline constexpr std::uint8_t kMaxFrameType = 13;

namespace frame_flags {
inline constexpr std::uint16_t kSynchronous = 1u << 0;  // sender wants a sync_ack (ssend)
inline constexpr std::uint16_t kLast = 1u << 1;         // last DATA chunk of a rendezvous
// DENY only, after FINALIZING: no policy refusal; the finalizing receiver will not receive
// the message (see FrameType::finalizing).
inline constexpr std::uint16_t kUnreceived = 1u << 2;
inline constexpr std::uint16_t kKnownMask = kSynchronous | kLast | kUnreceived;
}  // namespace frame_flags

struct FrameHeader {
  FrameType type = FrameType::eager;
  std::uint16_t flags = 0;
  std::uint16_t op = 0;
  std::uint32_t context = 0;
  std::uint32_t source = 0;
  std::int32_t tag = 0;
  std::uint64_t sequence = 0;
  std::uint64_t length = 0;
  std::uint64_t aux = 0;

  bool operator==(const FrameHeader&) const = default;
};

using EncodedHeader = std::array<std::uint8_t, kFrameHeaderSize>;

/// Serializes a header (little endian, version kProtocolVersion, reserved zero).
EncodedHeader encode_frame_header(const FrameHeader& header) noexcept;

/// Parses and validates a header: magic, version, type, flags, reserved bits, length against
/// `max_payload`, and sequence against `expected_sequence`. Never throws, never allocates.
std::error_code decode_frame_header(std::span<const std::uint8_t, kFrameHeaderSize> bytes,
                                    std::uint64_t max_payload, std::uint64_t expected_sequence,
                                    FrameHeader& out) noexcept;

const char* frame_type_name(FrameType type) noexcept;

/// Eager credit: what an EAGER message of `bytes` counts against its sender's credit, at the
/// sender and in CREDIT frames (core/engine.hpp). Part of the protocol, so that both ends agree
/// whatever their buffers; it covers what a receiver holds for the message (a buffer of the
/// next power of two from 4 KiB to 1 MiB, else of its size, and a 256-byte entry).
constexpr std::uint64_t eager_credit_cost(std::uint64_t bytes) noexcept {
  constexpr std::uint64_t kRoundedFrom = 4096, kRoundedTo = 1u << 20, kEntry = 256;
  return (bytes >= kRoundedFrom && bytes <= kRoundedTo ? std::bit_ceil(bytes) : bytes) + kEntry;
}

}  // namespace sempi::transport
