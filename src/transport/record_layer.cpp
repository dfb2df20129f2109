#include "transport/record_layer.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sempi/error.hpp"

namespace sempi::transport {
namespace {

// Alert descriptions (RFC 8446, 6).
constexpr std::uint8_t kCloseNotify = 0;
constexpr std::uint8_t kUnexpectedMessage = 10;
constexpr std::uint8_t kBadRecordMac = 20;
constexpr std::uint8_t kRecordOverflow = 22;
constexpr std::uint8_t kIllegalParameter = 47;
constexpr std::uint8_t kDecodeError = 50;
constexpr std::uint8_t kWarning = 1;
constexpr std::uint8_t kFatal = 2;

constexpr std::uint8_t kKeyUpdate = 24;  // handshake message type
constexpr std::uint8_t kUpdateNotRequested = 0;
constexpr std::uint8_t kUpdateRequested = 1;

std::size_t body_length(const std::uint8_t* header) {
  return static_cast<std::size_t>(header[3]) << 8 | header[4];
}

}  // namespace

RecordLayer::RecordLayer(SocketBuffers& io, std::unique_ptr<RecordProtection> sealer,
                         std::unique_ptr<RecordProtection> opener, std::uint64_t rekey_after)
    : io_(&io),
      sealer_(std::move(sealer)),
      opener_(std::move(opener)),
      rekey_after_(std::max<std::uint64_t>(rekey_after, 1)) {}

long RecordLayer::fail(std::error_code code, std::string detail) {
  if (!failed()) {
    code_ = code;
    detail_ = std::move(detail);
  }
  return -1;
}

long RecordLayer::fail_with_alert(std::uint8_t alert, std::error_code code, std::string detail) {
  if (!failed()) {
    const std::uint8_t content[2] = {kFatal, alert};
    if (seal_control(ContentType::alert, content)) io_->drain();
  }
  return fail(code, std::move(detail));
}

long RecordLayer::lost(const char* during) {
  const int saved = errno;
  // A stream that can say more (a shared ring the peer broke) failed by the peer's doing.
  if (std::string why = io_->failure_detail(); !why.empty()) {
    return fail(errc::tls_io_error, std::string("during ") + during + ": " + why);
  }
  return fail(errc::connection_closed, std::string("connection lost during ") + during +
                                           (saved != 0 ? ": " + std::system_category().message(saved) : ""));
}

bool RecordLayer::switch_stream(SocketBuffers& next) {
  if (io_->unread() > 0 || io_->unsent() > 0) return false;
  io_ = &next;
  return true;
}

bool RecordLayer::seal_control(ContentType type, std::span<const std::uint8_t> content) {
  std::uint8_t* out = io_->reserve(content.size() + kRecordOverhead);
  if (out == nullptr) return false;
  if (!sealer_->seal(type, content, {}, out)) {
    fail(errc::tls_io_error, "cannot encrypt a TLS record");
    return false;
  }
  io_->commit(content.size() + kRecordOverhead);
  return true;
}

bool RecordLayer::send_key_update() {
  const std::uint8_t message[5] = {kKeyUpdate, 0, 0, 1, kUpdateNotRequested};
  if (!seal_control(ContentType::handshake, message)) return false;
  std::string error;
  if (!sealer_->update(error)) {
    fail(errc::tls_io_error, std::move(error));
    return false;
  }
  update_owed_ = false;
  return true;
}

long RecordLayer::write(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second) {
  if (failed()) return -1;
  const std::size_t total = first.size() + second.size();
  std::size_t taken = 0;
  while (taken < total) {
    // A key update owed to the peer, or due by our own count, goes before further data.
    if (update_owed_ || sealer_->records() >= rekey_after_) {
      update_owed_ = true;
      if (!send_key_update()) {
        if (failed()) return -1;
        if (!io_->drain()) return lost("send");
        if (!send_key_update()) return failed() ? -1 : static_cast<long>(taken);
      }
    }
    const std::size_t chunk = std::min(total - taken, kMaxRecordPlaintext);
    bool socket_lost = false;
    std::uint8_t* out = io_->reserve_draining(chunk + kRecordOverhead, socket_lost);
    if (socket_lost) return lost("send");
    if (out == nullptr) break;  // the socket is full: the caller waits for writability
    // This record's content: the part of [first, second] from `taken` on.
    std::span<const std::uint8_t> a;
    std::span<const std::uint8_t> b;
    if (taken < first.size()) {
      a = first.subspan(taken, std::min(chunk, first.size() - taken));
      b = second.first(chunk - a.size());
    } else {
      b = second.subspan(taken - first.size(), chunk);
    }
    if (!sealer_->seal(ContentType::application_data, a, b, out)) {
      return fail(errc::tls_io_error, "cannot encrypt a TLS record");
    }
    io_->commit(chunk + kRecordOverhead);
    taken += chunk;
    if (!io_->send_if_full()) return lost("send");
  }
  return static_cast<long>(taken);
}

bool RecordLayer::flush() {
  if (failed()) return false;
  if (update_owed_ && !send_key_update() && failed()) return false;
  if (!io_->drain()) {
    lost("send");
    return false;
  }
  if (update_owed_ && send_key_update() && !io_->drain()) {
    lost("send");
    return false;
  }
  return !failed();
}

bool RecordLayer::has_buffered_input() const noexcept {
  if (spill_size_ > 0) return true;
  if (io_->unread() < kRecordHeaderSize) return false;
  const std::size_t length = body_length(io_->unread_data());
  // An oversized header counts: the next read reports it instead of waiting for more bytes.
  return length > kMaxRecordBody || io_->unread() >= kRecordHeaderSize + length;
}

long RecordLayer::read(std::uint8_t* dst, std::size_t size) {
  if (failed()) return -1;
  if (spill_size_ > 0) {
    const std::size_t count = std::min(size, spill_size_);
    std::memcpy(dst, spill_->data() + spill_begin_, count);
    spill_begin_ += count;
    spill_size_ -= count;
    return static_cast<long>(count);
  }
  for (;;) {
    if (io_->unread() >= kRecordHeaderSize) {
      const std::uint8_t* header = io_->unread_data();
      const std::size_t length = body_length(header);
      if (header[0] != static_cast<std::uint8_t>(ContentType::application_data)) {
        return fail_with_alert(kUnexpectedMessage, errc::tls_io_error,
                               "unexpected TLS record type " + std::to_string(header[0]) +
                                   " after the handshake");
      }
      if (length > kMaxRecordBody) {
        return fail_with_alert(kRecordOverflow, errc::tls_io_error,
                               "TLS record of " + std::to_string(length) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(kMaxRecordBody) + " (record_overflow)");
      }
      if (io_->unread() >= kRecordHeaderSize + length) {
        if (length < kAeadTagSize + 1) {
          return fail_with_alert(kDecodeError, errc::tls_io_error,
                                 "TLS record of " + std::to_string(length) +
                                     " bytes is too short to be encrypted");
        }
        if (!spill_) spill_ = std::make_unique<std::array<std::uint8_t, kMaxRecordBody>>();
        const std::size_t inner = length - kAeadTagSize;
        // RFC 8446, 5.4: padding does not lift the limit on the whole inner plaintext.
        if (inner > kMaxRecordPlaintext + 1) {
          return fail_with_alert(kRecordOverflow, errc::tls_io_error,
                                 "TLS inner plaintext of " + std::to_string(inner) +
                                     " bytes exceeds 2^14 + 1 (record_overflow)");
        }
        const std::size_t in_dst = std::min(inner, size);
        const std::span<const std::uint8_t> body(header + kRecordHeaderSize, length);
        if (!opener_->open(header, body, std::span(dst, in_dst), spill_->data())) {
          return fail_with_alert(kBadRecordMac, errc::tls_io_error,
                                 "TLS record failed authentication (bad_record_mac)");
        }
        io_->consume(kRecordHeaderSize + length);
        // The content type is the last non-zero byte of the inner plaintext (zeros pad).
        std::size_t end = inner;
        while (end > 0 && inner_byte(dst, in_dst, end - 1) == 0) --end;
        if (end == 0) {
          return fail_with_alert(kUnexpectedMessage, errc::tls_io_error,
                                 "TLS record without a content type");
        }
        const auto type = static_cast<ContentType>(inner_byte(dst, in_dst, end - 1));
        if (type == ContentType::application_data && end > 1) {
          records_without_data_ = 0;
        } else if (type != ContentType::alert && ++records_without_data_ > kMaxRecordsWithoutData) {
          return fail_with_alert(kUnexpectedMessage, errc::tls_io_error,
                                 "more than " + std::to_string(kMaxRecordsWithoutData) +
                                     " TLS records in a row without application data");
        }
        const long delivered = deliver(type, dst, in_dst, end - 1);
        // Data spilled past an empty dst must not be overwritten by the next record.
        if (delivered != 0 || spill_size_ > 0) return delivered;
        continue;
      }
    }
    const long n = io_->receive(kRecordHeaderSize + kMaxRecordBody);
    if (n > 0) continue;
    if (n == 0) {
      errno = 0;
      return lost("receive (the peer closed the socket without close_notify)");
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return lost("receive");
  }
}

long RecordLayer::deliver(ContentType type, std::uint8_t* dst, std::size_t in_dst,
                          std::size_t length) {
  if (type == ContentType::application_data) {
    if (length > in_dst) {  // the rest waits in spill_ for the next read
      spill_begin_ = 0;
      spill_size_ = length - in_dst;
      return static_cast<long>(in_dst);
    }
    return static_cast<long>(length);  // 0 for an empty record: read on
  }
  // Control records are tiny; gather the content in one place.
  std::array<std::uint8_t, 64> content{};
  if (length > content.size()) {
    return fail_with_alert(kUnexpectedMessage, errc::tls_io_error,
                           "unexpected post-handshake record of " + std::to_string(length) +
                               " bytes");
  }
  for (std::size_t i = 0; i < length; ++i) content[i] = inner_byte(dst, in_dst, i);
  // Empty alert or handshake content is an unexpected message (RFC 8446, 5.4).
  if ((type == ContentType::alert || type == ContentType::handshake) && length == 0) {
    return fail_with_alert(kUnexpectedMessage, errc::tls_io_error,
                           "empty TLS " + std::string(type == ContentType::alert ? "alert" : "handshake") +
                               " record");
  }
  if (type == ContentType::alert) {
    if (length != 2) {
      return fail_with_alert(kDecodeError, errc::tls_io_error, "malformed TLS alert");
    }
    if (content[1] == kCloseNotify) return fail(errc::connection_closed, "peer closed the channel");
    return fail(errc::tls_io_error, std::string("peer sent TLS alert: ") +
                                        SSL_alert_desc_string_long(content[1]));
  }
  if (type == ContentType::handshake) {
    return handle_handshake(std::span(content.data(), length)) ? 0 : -1;
  }
  return fail_with_alert(kUnexpectedMessage, errc::tls_io_error,
                         "unexpected TLS content type " +
                             std::to_string(static_cast<unsigned>(type)) + " after the handshake");
}

bool RecordLayer::handle_handshake(std::span<const std::uint8_t> message) {
  if (message[0] != kKeyUpdate) {
    fail_with_alert(kUnexpectedMessage, errc::tls_io_error,
                    "unexpected post-handshake message of type " + std::to_string(message[0]));
    return false;
  }
  // Exactly one KeyUpdate per record: the key changes at the record boundary (RFC 8446, 5.1),
  // so nothing may follow it under the old key.
  if (message.size() != 5 || message[1] != 0 || message[2] != 0 || message[3] != 1) {
    fail_with_alert(kDecodeError, errc::tls_io_error, "malformed KeyUpdate record");
    return false;
  }
  if (message[4] != kUpdateNotRequested && message[4] != kUpdateRequested) {  // RFC 8446, 4.6.3
    fail_with_alert(kIllegalParameter, errc::tls_io_error,
                    "KeyUpdate with request_update " + std::to_string(message[4]));
    return false;
  }
  std::string error;
  if (!opener_->update(error)) {
    fail(errc::tls_io_error, std::move(error));
    return false;
  }
  if (message[4] == kUpdateRequested) update_owed_ = true;
  return true;
}

void RecordLayer::close_notify() noexcept {
  if (failed()) return;
  const std::uint8_t content[2] = {kWarning, kCloseNotify};
  if (seal_control(ContentType::alert, content)) io_->drain();
}

}  // namespace sempi::transport
