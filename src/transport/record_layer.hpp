#pragma once
// sempi's TLS 1.3 record layer (RFC 8446, section 5), which takes over from OpenSSL once
// OpenSSL has completed the handshake. The bytes on the wire are ordinary TLS 1.3 records,
// exactly as OpenSSL would write them; OpenSSL's own SSL_read/SSL_write accept them (and the
// tests check both directions against OpenSSL's record layer).
//
// Why not OpenSSL's record layer: on OpenSSL 3.0, SSL_write and SSL_read cost ~7,100 and
// ~5,800 instructions for one small record, about three quarters of sempi's whole small-message
// round trip (bench/RESULTS.md). Sealing and opening a record with the same AEAD through EVP
// costs about 2,900, and the bytes take fewer copies: records are encrypted straight into the
// socket's send buffer, and decrypted straight from the receive buffer into the receiver's
// memory. This is the same division of labour as kernel TLS: OpenSSL does the handshake, the
// certificate checks and the key schedule; another component protects records with the traffic
// keys. The AEAD itself is OpenSSL's.
//
// What this layer implements after the handshake: application data, KeyUpdate in both
// directions (answered when the peer asks; sent on its own after kRekeyAfterRecords records,
// well inside the AES-GCM limits of RFC 8446, 5.5), close_notify and fatal alerts. Anything
// else a peer sends after the handshake (another handshake message, a record over 2^14 bytes of
// content, an unauthentic record, an unknown content type) fails the connection with a precise
// error and a fatal alert, as OpenSSL would. Session tickets and post-handshake authentication
// are switched off in the TLS context, so a conforming peer never sends them.
//
// Not thread-safe: one thread (the channel's owner) uses a RecordLayer.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include "transport/record_protection.hpp"
#include "transport/socket_buffers.hpp"

namespace sempi::transport {

/// Records sealed under one key before sempi updates it.
inline constexpr std::uint64_t kRekeyAfterRecords = std::uint64_t{1} << 20;
/// Records in a row that carry no application data (empty records, KeyUpdates) before the peer
/// is refused: without a limit a peer keeps read() busy for as long as it keeps sending. OpenSSL
/// has the same limit of 32 for each kind.
inline constexpr std::size_t kMaxRecordsWithoutData = 32;

class RecordLayer {
 public:
  RecordLayer(SocketBuffers& io, std::unique_ptr<RecordProtection> sealer,
              std::unique_ptr<RecordProtection> opener,
              std::uint64_t rekey_after = kRekeyAfterRecords);

  /// Protects up to first.size() + second.size() bytes (the two pieces in order) as
  /// application data. Returns the bytes taken: fewer (or 0) when the send buffer is full, so
  /// the caller waits for writability; -1 after a failure (see code() and detail()).
  long write(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second = {});
  /// Reads up to `size` bytes of application data into `dst`: > 0 bytes, 0 if nothing more
  /// has arrived, -1 after a failure. Records are decrypted straight into `dst` where they fit.
  long read(std::uint8_t* dst, std::size_t size);

  /// Application data or a whole record waiting: a read would not block (poll() cannot see it).
  [[nodiscard]] bool has_buffered_input() const noexcept;
  /// Records not yet handed to the kernel, or a key update we owe the peer.
  [[nodiscard]] bool has_unsent() const noexcept { return io_->unsent() > 0 || update_owed_; }
  /// Hands buffered records to the kernel as far as it takes them. false after a failure.
  bool flush();
  /// Moves the records to another stream (a channel's shared rings, after its HELLO). Only at
  /// a record boundary with nothing left in the current stream: false otherwise.
  bool switch_stream(SocketBuffers& next);

  /// Best-effort close_notify alert.
  void close_notify() noexcept;

  [[nodiscard]] bool failed() const noexcept { return static_cast<bool>(code_); }
  [[nodiscard]] std::error_code code() const noexcept { return code_; }
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }

 private:
  long fail(std::error_code code, std::string detail);
  // A fatal alert to the peer, then fail().
  long fail_with_alert(std::uint8_t alert, std::error_code code, std::string detail);
  // Byte i of an opened record's inner plaintext, whose first in_dst bytes went to dst and
  // the rest to spill_.
  [[nodiscard]] std::uint8_t inner_byte(const std::uint8_t* dst, std::size_t in_dst,
                                        std::size_t i) const noexcept {
    return i < in_dst ? dst[i] : (*spill_)[i - in_dst];
  }
  // Handles one opened record whose content (`length` bytes) starts in dst and continues in
  // spill_. Returns the application bytes now in dst (>= 0), or -1 after a failure.
  long deliver(ContentType type, std::uint8_t* dst, std::size_t in_dst, std::size_t length);
  bool handle_handshake(std::span<const std::uint8_t> messages);
  // Seals a KeyUpdate and moves our sending key on. false if the send buffer has no room
  // (the update stays owed) or after a failure.
  bool send_key_update();
  bool seal_control(ContentType type, std::span<const std::uint8_t> content);
  long lost(const char* during);

  SocketBuffers* io_;
  std::unique_ptr<RecordProtection> sealer_;
  std::unique_ptr<RecordProtection> opener_;
  std::uint64_t rekey_after_;
  bool update_owed_ = false;  // the peer asked for a KeyUpdate we have not sent yet
  // Decrypted application data that did not fit the reader's buffer.
  std::unique_ptr<std::array<std::uint8_t, kMaxRecordBody>> spill_;
  std::size_t spill_begin_ = 0;
  std::size_t spill_size_ = 0;
  std::size_t records_without_data_ = 0;  // in a row, see kMaxRecordsWithoutData
  std::error_code code_;
  std::string detail_;
};

}  // namespace sempi::transport
