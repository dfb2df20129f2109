#include "transport/channel.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include <openssl/err.h>

#include "common/hex.hpp"
#include "sempi/error.hpp"
#include "transport/socket_bio.hpp"

namespace sempi::transport {
namespace {

// Frames up to this size are copied next to their header so that many small frames go out in
// one TLS record; larger payloads are written straight from the caller's buffer.
constexpr std::size_t kCopyThreshold = 8 * 1024;
// How much to gather before handing coalesced frames to TLS (a few maximum-size records).
constexpr std::size_t kCoalesceTarget = 64 * 1024;
// Upper bound for one write of a large payload; keeps each call's latency bounded.
constexpr std::size_t kMaxWriteChunk = 1 << 20;
constexpr std::uint8_t kTlsHandshakeRecord = 0x16;
// The byte a dialer sends before TLS on a Unix socket, with the memfd of its shared rings
// attached (SCM_RIGHTS). It is not a TLS record type, so it cannot be mistaken for one.
constexpr std::uint8_t kSharedRingsPreface = 'M';

// Takes the preface byte and the one descriptor that must come with it.
UniqueFd receive_rings_preface(int socket, std::string& error) {
  std::uint8_t byte = 0;
  std::vector<UniqueFd> received;
  bool truncated = false;
  if (!receive_byte_with_descriptors(socket, byte, received, truncated)) {
    error = std::string("cannot read the shared rings' preface: ") +
            (errno != 0 ? std::strerror(errno) : "connection closed");
    return {};
  }
  if (received.size() != 1 || truncated) {
    error = "the shared rings' preface carried " + std::to_string(received.size()) +
            (truncated ? " or more" : "") + " descriptors instead of one";
    return {};
  }
  return std::move(received.front());
}

// Waits for the first byte of the connection (not consuming it).
bool peek_first_byte(int socket, Deadline deadline, std::uint8_t& first, ChannelError& error) {
  if (auto ec = wait_fd(socket, WaitFor::read, deadline); ec) {
    error = {errc::timeout, "peer sent nothing before the handshake deadline"};
    return false;
  }
  const auto peeked = ::recv(socket, &first, 1, MSG_PEEK);
  if (peeked == 0) {
    error = {errc::connection_closed, "peer closed before the TLS handshake"};
    return false;
  }
  if (peeked < 0) {
    error = {errc::connection_failed, std::system_category().message(errno)};
    return false;
  }
  return true;
}

// Classifies the OpenSSL error queue of a failed handshake; returns a code and drains the queue
// into `detail`.
std::error_code classify_handshake_failure(SSL* ssl, std::string& detail) {
  std::error_code code = errc::tls_handshake_failed;
  unsigned long e = 0;
  while ((e = ERR_get_error()) != 0) {
    const int reason = ERR_GET_REASON(e);
    if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) code = errc::peer_no_certificate;
    if (reason == SSL_R_UNSUPPORTED_PROTOCOL || reason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION) {
      code = errc::tls_version_refused;
    }
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST ||
        reason == SSL_R_PACKET_LENGTH_TOO_LONG) {
      if (code == errc::tls_handshake_failed) code = errc::not_tls;
    }
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!detail.empty()) detail += "; ";
    detail += buf;
  }
  if (const long verify = SSL_get_verify_result(ssl); verify != X509_V_OK) {
    code = map_verify_result(verify);
    detail = std::string(X509_verify_cert_error_string(verify)) +
             (detail.empty() ? "" : " [" + detail + "]");
  }
  return code;
}

bool attach_socket(SSL* ssl, int fd) {
  BIO* bio = new_socket_bio(fd);
  if (bio == nullptr) return false;
  SSL_set_bio(ssl, bio, bio);  // the SSL owns the BIO from here on
  return true;
}

// A sink that keeps exactly one frame, for the blocking receive helper.
class SingleFrameSink final : public FrameSink {
 public:
  explicit SingleFrameSink(std::vector<std::uint8_t>& payload) : payload_(payload) {}
  std::span<std::uint8_t> payload_buffer(const FrameHeader& header) override {
    payload_.resize(header.length);
    return payload_;
  }
  std::error_code on_frame(const FrameHeader& header, std::span<std::uint8_t>) override {
    header_ = header;
    done_ = true;
    if (header.length == 0) payload_.clear();
    return {};
  }
  [[nodiscard]] bool done() const { return done_; }
  [[nodiscard]] const FrameHeader& header() const { return header_; }

 private:
  std::vector<std::uint8_t>& payload_;
  FrameHeader header_;
  bool done_ = false;
};

}  // namespace

Channel::Channel(UniqueFd fd, pki::SslPtr ssl, const LocalEndpoint& local)
    : fd_(std::move(fd)),
      local_socket_(is_unix_socket(fd_.get())),
      ssl_(std::move(ssl)),
      secrets_(std::make_unique<TrafficSecrets>()),
      local_limits_(local.hello.limits),
      local_hello_(local.hello) {
  // Without the secrets the record layer cannot start; start_record_layer() reports that.
  capture_secrets_into(ssl_.get(), secrets_.get());
}

Channel::~Channel() {
  // Queued sends must learn that they will never complete.
  if (!outbound_.empty()) {
    if (!failed()) failure_ = {errc::connection_closed, "channel destroyed"};
    for (auto& item : outbound_) {
      if (item.done) item.done(failure_.code);
    }
  }
}

std::unique_ptr<Channel> Channel::connect(const LocalEndpoint& local, const Endpoint& to,
                                          std::uint32_t expected_rank, Deadline deadline,
                                          ChannelError& error) {
  std::error_code ec;
  UniqueFd fd = tcp_connect(to, deadline, ec);
  return connect_over(local, std::move(fd), ec, format_endpoint(to), expected_rank, deadline,
                      error);
}

std::unique_ptr<Channel> Channel::connect_local(const LocalEndpoint& local,
                                                const std::string& path,
                                                std::uint32_t expected_rank, Deadline deadline,
                                                ChannelError& error) {
  std::error_code ec;
  UniqueFd fd = unix_connect(path, deadline, ec);
  std::unique_ptr<SharedRegion> region;
  if (fd.valid() && local.shared_memory) {
    // Without a region (memfd refused, say) the records simply stay on the socket.
    std::string why;
    region = SharedRegion::create(SharedRegion::ring_bytes_for(local.hello.world_size), why);
    if (region && !send_byte_with_descriptor(fd.get(), kSharedRingsPreface, region->fd())) {
      error = {errc::connection_failed, "connect to " + path +
                                            ": cannot hand over the shared rings: " +
                                            std::strerror(errno)};
      return nullptr;
    }
    if (region) region->close_fd();  // the peer has its own descriptor now
  }
  return connect_over(local, std::move(fd), ec, path, expected_rank, deadline, error,
                      std::move(region));
}

std::unique_ptr<Channel> Channel::dial(const LocalEndpoint& local, const Endpoint& to,
                                       const std::string& local_path,
                                       std::uint32_t expected_rank, Deadline deadline,
                                       ChannelError& error) {
  constexpr int kMaxAttempts = 10;  // pauses add up to ~0.3 s
  constexpr auto kLongestPause = std::chrono::milliseconds(100);
  auto pause = std::chrono::milliseconds(1);
  for (int attempt = 1;; ++attempt) {
    auto channel = dial_once(local, to, local_path, expected_rank, deadline, error);
    // Only a close: anything the peer said (an alert, a HELLO we refused) is its answer. A
    // peer that closes on us for another reason gets a few attempts, not the whole deadline.
    if (channel || error.code != errc::connection_closed) return channel;
    if (attempt == kMaxAttempts || Clock::now() + pause >= deadline) {
      error.detail += " (" + std::to_string(attempt) + " attempts)";
      return nullptr;
    }
    std::this_thread::sleep_for(pause);  // not synchronisation: a listener under a flood
    pause = std::min(pause * 2, kLongestPause);
  }
}

std::unique_ptr<Channel> Channel::dial_once(const LocalEndpoint& local, const Endpoint& to,
                                            const std::string& local_path,
                                            std::uint32_t expected_rank, Deadline deadline,
                                            ChannelError& error) {
  if (!local_path.empty()) {
    auto channel = connect_local(local, local_path, expected_rank, deadline, error);
    if (channel || error.code != errc::connection_failed) return channel;
    error = {};
  }
  return connect(local, to, expected_rank, deadline, error);
}

std::unique_ptr<Channel> Channel::connect_over(const LocalEndpoint& local, UniqueFd fd,
                                               std::error_code ec, const std::string& to,
                                               std::uint32_t expected_rank, Deadline deadline,
                                               ChannelError& error,
                                               std::unique_ptr<SharedRegion> region) {
  if (!fd.valid()) {
    error = {ec == errc::timeout ? make_error_code(errc::timeout)
                                 : make_error_code(errc::connection_failed),
             "connect to " + to + ": " + ec.message()};
    return nullptr;
  }
  pki::OsslErrorScope scope;
  pki::SslPtr ssl{SSL_new(local.tls->get())};
  if (!ssl || !attach_socket(ssl.get(), fd.get())) {
    error = {errc::tls_handshake_failed, pki::drain_openssl_errors()};
    return nullptr;
  }
  SSL_set_connect_state(ssl.get());
  auto requirements = local.requirements();
  requirements.expected_rank = expected_rank;
  std::unique_ptr<Channel> channel(new Channel(std::move(fd), std::move(ssl), local));
  channel->region_ = std::move(region);
  return establish(std::move(channel), true, requirements, nullptr, nullptr,
                   local.rekey_after_records, deadline, error);
}

std::unique_ptr<Channel> Channel::accept(const LocalEndpoint& local, UniqueFd socket,
                                         const std::function<bool(std::uint32_t)>& claim_rank,
                                         Deadline deadline, ChannelError& error,
                                         const AcceptProgressHandler& progress) {
  // Refuse plaintext before TLS sees it: a TLS connection must open with a handshake record,
  // or, on a Unix socket, with the shared rings' preface and then a handshake record.
  std::uint8_t first = 0;
  if (!peek_first_byte(socket.get(), deadline, first, error)) return nullptr;
  UniqueFd peer_region;
  if (first == kSharedRingsPreface && is_unix_socket(socket.get())) {
    std::string why;
    peer_region = receive_rings_preface(socket.get(), why);
    if (!peer_region.valid()) {
      error = {errc::connection_failed, why};
      return nullptr;
    }
    if (!peek_first_byte(socket.get(), deadline, first, error)) return nullptr;
  }
  if (first != kTlsHandshakeRecord) {
    error = {errc::not_tls, "first byte 0x" + to_hex({&first, 1}) + " is not a TLS handshake"};
    return nullptr;
  }
  pki::OsslErrorScope scope;
  pki::SslPtr ssl{SSL_new(local.tls->get())};
  if (!ssl || !attach_socket(ssl.get(), socket.get())) {
    error = {errc::tls_handshake_failed, pki::drain_openssl_errors()};
    return nullptr;
  }
  SSL_set_accept_state(ssl.get());
  std::unique_ptr<Channel> channel(new Channel(std::move(socket), std::move(ssl), local));
  channel->peer_region_fd_ = std::move(peer_region);
  return establish(std::move(channel), false, local.requirements(), &claim_rank,
                   progress ? &progress : nullptr, local.rekey_after_records, deadline, error);
}

std::unique_ptr<Channel> Channel::establish(std::unique_ptr<Channel> channel, bool is_client,
                                            PeerRequirements requirements,
                                            const std::function<bool(std::uint32_t)>* claim_rank,
                                            const AcceptProgressHandler* progress,
                                            std::uint64_t rekey_after, Deadline deadline,
                                            ChannelError& error) {
  if (progress != nullptr && !report_accept_progress(channel->ssl_.get(), progress)) {
    error = {errc::tls_handshake_failed, "cannot follow the handshake's progress"};
    return nullptr;
  }
  error = channel->handshake(is_client, deadline);
  if (progress != nullptr) report_accept_progress(channel->ssl_.get(), nullptr);
  if (error.code) return nullptr;
  if (auto ec = verify_peer(channel->ssl_.get(), requirements, channel->peer_, error.detail); ec) {
    error.code = ec;
    return nullptr;
  }
  if (progress != nullptr) (*progress)(AcceptProgress::peer_verified, channel->peer_.rank);
  error = channel->start_record_layer(is_client, rekey_after);
  if (error.code) return nullptr;
  error = channel->exchange_hello(deadline);
  if (error.code) return nullptr;
  // The peer's memory is looked at only once its certificate and HELLO have been checked.
  error = channel->adopt_rings();
  if (error.code) return nullptr;
  error = channel->start_rings(is_client);
  if (error.code) return nullptr;
  // Claim the rank only once the peer has fully proven it, so a failed attempt cannot block
  // the genuine rank.
  if (claim_rank != nullptr && *claim_rank && !(*claim_rank)(channel->peer_.rank)) {
    error = {errc::peer_duplicate_rank,
             "rank " + std::to_string(channel->peer_.rank) + " is already connected"};
    return nullptr;
  }
  return channel;
}

ChannelError Channel::handshake(bool is_client, Deadline deadline) {
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_do_handshake(ssl_.get());
    if (rc == 1) return {};
    const int err = SSL_get_error(ssl_.get(), rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      const auto what = err == SSL_ERROR_WANT_READ ? WaitFor::read : WaitFor::write;
      if (auto ec = wait_fd(fd_.get(), what, deadline); ec) {
        return {errc::timeout, std::string("TLS handshake did not complete before the deadline (") +
                                   (is_client ? "client" : "server") + ")"};
      }
      continue;
    }
    ChannelError error;
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      error = {errc::connection_closed, "peer closed the connection during the TLS handshake"};
      if (SSL_get_verify_result(ssl_.get()) != X509_V_OK) {
        error.code = classify_handshake_failure(ssl_.get(), error.detail);
      }
      return error;
    }
    error.code = classify_handshake_failure(ssl_.get(), error.detail);
    return error;
  }
}

ChannelError Channel::start_record_layer(bool is_client, std::uint64_t rekey_after) {
  capture_secrets_into(ssl_.get(), nullptr);
  const auto secrets = std::move(secrets_);  // wiped when this returns
  // OpenSSL reads handshake records exactly (no read-ahead), so it holds nothing of the
  // application stream; whatever followed the handshake is still in the socket buffers.
  if (SSL_has_pending(ssl_.get()) != 0) {
    return {errc::tls_handshake_failed, "TLS data buffered inside OpenSSL after the handshake"};
  }
  if (!secrets->complete()) {
    return {errc::tls_handshake_failed, "the handshake did not yield the traffic secrets"};
  }
  const SSL_CIPHER* suite = SSL_get_current_cipher(ssl_.get());
  std::string detail;
  auto sealer = RecordProtection::create(suite, secrets->writing(is_client),
                                         RecordProtection::Direction::seal, detail);
  auto opener = sealer ? RecordProtection::create(suite, secrets->reading(is_client),
                                                  RecordProtection::Direction::open, detail)
                       : nullptr;
  if (!sealer || !opener) return {errc::tls_handshake_failed, detail};
  // The socket buffers live in the BIO: keep it, and let the SSL and its secrets go.
  BIO* bio = SSL_get_rbio(ssl_.get());
  if (bio == nullptr || BIO_up_ref(bio) != 1) {
    return {errc::tls_handshake_failed, "cannot keep the socket BIO after the handshake"};
  }
  bio_.reset(bio);
  cipher_ = SSL_get_cipher_name(ssl_.get());
  records_ = std::make_unique<RecordLayer>(socket_bio_buffers(bio), std::move(sealer),
                                           std::move(opener), rekey_after);
  ssl_.reset();
  return {};
}

ChannelError Channel::exchange_hello(Deadline deadline) {
  // Both sides send first, then read: one round trip, and HELLO is small enough never to block.
  const auto hello = encode_hello(local_hello_);
  FrameHeader header;
  header.type = FrameType::hello;
  header.length = hello.size();
  if (auto ec = send_frame(header, hello, deadline); ec) return failure_.code ? failure_ : ChannelError{ec, ""};

  std::vector<std::uint8_t> payload;
  FrameHeader received;
  if (auto ec = receive_frame(received, payload, deadline); ec) {
    return failure_.code ? failure_ : ChannelError{ec, "waiting for HELLO"};
  }
  if (received.type != FrameType::hello) {
    return {errc::frame_unexpected,
            std::string("expected HELLO, got ") + frame_type_name(received.type)};
  }
  Hello theirs;
  if (auto ec = decode_hello(payload, theirs); ec) return {ec, "malformed HELLO"};
  if (theirs.job != peer_.job || theirs.rank != peer_.rank ||
      theirs.policy_digest != peer_.policy_digest) {
    return {errc::hello_invalid, "HELLO identity differs from the peer's certificate"};
  }
  if (theirs.world_size != local_hello_.world_size) {
    return {errc::hello_invalid, "peer believes the job has " + std::to_string(theirs.world_size) +
                                     " ranks, we have " + std::to_string(local_hello_.world_size)};
  }
  peer_limits_ = theirs.limits;
  accept_payload_ = local_limits_.max_frame_payload;
  return {};
}

ChannelError Channel::adopt_rings() {
  if (!peer_region_fd_.valid()) return {};
  std::string why;
  region_ = SharedRegion::adopt(std::move(peer_region_fd_), why);
  if (!region_) return {errc::connection_failed, why};
  return {};
}

ChannelError Channel::start_rings(bool is_client) {
  if (!region_) return {};
  ring_ = std::make_unique<RingStream>(std::move(region_), is_client, fd_.get());
  // The peer sends nothing after its HELLO on the socket but wake-ups, and none before we
  // first sleep: anything else there would be lost in the switch.
  if (!records_->switch_stream(*ring_)) {
    return {errc::frame_unexpected, "TLS records on the Unix socket after HELLO"};
  }
  return {};
}

std::string Channel::cipher() const { return ssl_ ? SSL_get_cipher_name(ssl_.get()) : cipher_; }

std::error_code Channel::fail(std::error_code code, std::string detail) {
  if (!failed()) failure_ = {code, std::move(detail)};
  // Every queued send learns the outcome exactly once.
  auto pending = std::move(outbound_);
  outbound_.clear();
  coalesced_.clear();
  coalesced_frames_ = 0;
  for (auto& item : pending) {
    if (item.done) item.done(failure_.code);
  }
  return failure_.code;
}

std::uint64_t Channel::enqueue(FrameHeader header, std::span<const std::uint8_t> payload,
                               SendCompletion done, const void* owner) {
  if (failed()) {
    if (done) done(failure_.code);
    return next_out_sequence_;
  }
  if (payload.size() > peer_limits_.max_frame_payload && header.type != FrameType::hello) {
    if (done) done(errc::frame_too_large);
    return next_out_sequence_;
  }
  header.sequence = next_out_sequence_++;
  header.length = payload.size();
  Outbound item;
  item.header = encode_frame_header(header);
  if (payload.size() <= kCopyThreshold) {
    item.small.reserve(kFrameHeaderSize + payload.size());
    item.small.insert(item.small.end(), item.header.begin(), item.header.end());
    item.small.insert(item.small.end(), payload.begin(), payload.end());
  } else {
    item.large = payload;
  }
  item.done = std::move(done);
  item.owner = owner;
  outbound_.push_back(std::move(item));
  return header.sequence;
}

void Channel::move_payloads(const void* owner, std::span<const std::uint8_t> from,
                            const std::uint8_t* to) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(from.data());
  for (Outbound& item : outbound_) {
    const auto at = reinterpret_cast<std::uintptr_t>(item.large.data());
    if (item.owner != owner || item.large.empty() || at < begin ||
        at - begin + item.large.size() > from.size()) {
      continue;
    }
    item.large = {to + (at - begin), item.large.size()};
  }
}

std::optional<std::uint64_t> Channel::send_now(FrameHeader header,
                                               std::span<const std::uint8_t> payload) {
  if (failed() || !outbound_.empty() || payload.size() > kCopyThreshold) return std::nullopt;
  header.sequence = next_out_sequence_;
  header.length = payload.size();
  const EncodedHeader encoded = encode_frame_header(header);

  const long n = write_some(encoded, payload);
  if (n < 0) return std::nullopt;  // enqueue() reports the failure to the caller's completion
  ++next_out_sequence_;
  const auto written = static_cast<std::size_t>(n);
  if (written < kFrameHeaderSize + payload.size()) {  // the rest goes out with flush(), copied
    Outbound item;
    item.header = encoded;
    item.small.reserve(kFrameHeaderSize + payload.size());
    item.small.insert(item.small.end(), encoded.begin(), encoded.end());
    item.small.insert(item.small.end(), payload.begin(), payload.end());
    item.written = written;
    outbound_.push_back(std::move(item));
  }
  return header.sequence;
}

void Channel::complete_written() {
  while (!outbound_.empty() && outbound_.front().written == outbound_.front().total()) {
    auto done = std::move(outbound_.front().done);
    outbound_.pop_front();
    if (done) done({});
  }
}

std::error_code Channel::flush() {
  if (failed()) return failure_.code;
  while (!outbound_.empty()) {
    // Choose what to hand to TLS: a batch of small frames, or a slice of the front frame.
    const std::uint8_t* data = nullptr;
    std::size_t size = 0;
    Outbound& front = outbound_.front();
    if (coalesced_frames_ == 0 && !front.small.empty() && front.written == 0 &&
        outbound_.size() > 1 && !outbound_[1].small.empty()) {
      coalesced_.clear();
      for (auto& item : outbound_) {
        if (item.small.empty() || coalesced_.size() + item.small.size() > kCoalesceTarget) break;
        coalesced_.insert(coalesced_.end(), item.small.begin(), item.small.end());
        ++coalesced_frames_;
      }
      coalesced_written_ = 0;
    }
    if (coalesced_frames_ > 0) {
      data = coalesced_.data() + coalesced_written_;
      size = coalesced_.size() - coalesced_written_;
    } else if (!front.small.empty()) {
      data = front.small.data() + front.written;
      size = front.small.size() - front.written;
    } else if (front.written < kFrameHeaderSize) {
      // A large frame's header goes in a record of its own: the receiver then opens the
      // payload's records straight into the posted buffer. Sharing the first record with the
      // payload cost the receiver a copy of it (~850 more instructions a 16 KiB message).
      data = front.header.data() + front.written;
      size = kFrameHeaderSize - front.written;
    } else {
      const std::size_t offset = front.written - kFrameHeaderSize;
      data = front.large.data() + offset;
      size = std::min(front.large.size() - offset, kMaxWriteChunk);
    }
    const long n = write_some({data, size});
    if (n < 0) return failure_.code;
    if (n == 0) return {};
    auto written = static_cast<std::size_t>(n);
    if (coalesced_frames_ > 0) {
      coalesced_written_ += written;
      // Credit the bytes to the frames they belong to, in order.
      for (std::size_t i = 0; i < coalesced_frames_ && written > 0; ++i) {
        auto& item = outbound_[i];
        const std::size_t take = std::min(written, item.small.size() - item.written);
        item.written += take;
        written -= take;
      }
      if (coalesced_written_ == coalesced_.size()) coalesced_frames_ = 0;
      const std::size_t before = outbound_.size();
      complete_written();
      if (coalesced_frames_ > 0) {
        // Frames fully written leave the queue; keep the batch count in step.
        coalesced_frames_ -= before - outbound_.size();
      }
    } else {
      front.written += written;
      complete_written();
    }
  }
  return flush_socket_buffer();
}

bool Channel::has_pending_writes() const noexcept {
  return !outbound_.empty() || (records_ && records_->has_unsent());
}

std::error_code Channel::flush_socket_buffer() {
  if (records_->flush()) return {};
  return fail(records_->code(), records_->detail());
}

long Channel::write_some(std::span<const std::uint8_t> first,
                         std::span<const std::uint8_t> second) {
  const long n = records_->write(first, second);
  if (n < 0) fail(records_->code(), records_->detail());
  if (n > 0) bytes_moved_ += static_cast<std::uint64_t>(n);
  return n;
}

long Channel::read_some(std::uint8_t* dst, std::size_t size) {
  const long n = records_->read(dst, size);
  if (n < 0) fail(records_->code(), records_->detail());
  if (n > 0) bytes_moved_ += static_cast<std::uint64_t>(n);
  return n;
}

bool Channel::has_buffered_input() const {
  // Not a partial record: a reader relying on that would spin instead of waiting when a peer
  // stalls mid-record. (A ring's new bytes count until read once; a peer cannot publish more
  // than a ring's worth of a record, so that cannot make anyone spin either.)
  return staged() > 0 || records_->has_buffered_input() || (ring_ && ring_->has_unseen_input());
}

short Channel::poll_events(bool reading) const noexcept {
  // A ring's writer that waits for room is woken by a byte on the socket, not by writability.
  if (ring_) return POLLIN;
  return static_cast<short>((reading ? POLLIN : 0) | (has_pending_writes() ? POLLOUT : 0));
}

void Channel::done_blocking(short revents) noexcept {
  if (!ring_) return;
  ring_->done_blocking();
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) ring_->service_socket();
}

long Channel::take_input(std::uint8_t* dst, std::size_t size) {
  if (staged() == 0) {
    if (size >= stage_.size()) return read_some(dst, size);  // large: straight to its place
    const long n = read_some(stage_.data(), stage_.size());
    if (n <= 0) return n;
    stage_begin_ = 0;
    stage_end_ = static_cast<std::size_t>(n);
  }
  const std::size_t count = std::min(size, staged());
  std::memcpy(dst, stage_.data() + stage_begin_, count);
  stage_begin_ += count;
  return static_cast<long>(count);
}

std::error_code Channel::read_available(FrameSink& sink, std::size_t max_frames) {
  if (failed()) return failure_.code;
  std::size_t delivered = 0;
  // A frame handler may fail the channel (e.g. a reply could not be sent): stop reading then.
  while (delivered < max_frames && !failed()) {
    if (!in_payload_phase_) {
      const long n = take_input(in_header_.data() + in_header_got_,
                                kFrameHeaderSize - in_header_got_);
      if (n < 0) return failure_.code;
      if (n == 0) return {};
      in_header_got_ += static_cast<std::size_t>(n);
      if (in_header_got_ < kFrameHeaderSize) continue;
      in_header_got_ = 0;
      if (auto ec = decode_frame_header(in_header_, accept_payload_,
                                        next_in_sequence_, in_frame_);
          ec) {
        return fail(ec, "frame header from rank " + std::to_string(peer_.rank));
      }
      ++next_in_sequence_;
      if (in_frame_.length > 0) {
        in_payload_ = sink.payload_buffer(in_frame_);
        if (in_payload_.size() != in_frame_.length) {
          return fail(errc::frame_unexpected, "no buffer for the frame payload");
        }
        in_payload_got_ = 0;
        in_payload_phase_ = true;
        continue;
      }
    } else {
      const long n = take_input(in_payload_.data() + in_payload_got_,
                                in_payload_.size() - in_payload_got_);
      if (n < 0) return failure_.code;
      if (n == 0) return {};
      in_payload_got_ += static_cast<std::size_t>(n);
      if (in_payload_got_ < in_payload_.size()) continue;
      in_payload_phase_ = false;
    }
    // A complete frame: header (and payload, if any) fully received.
    ++delivered;
    if (auto ec = sink.on_frame(in_frame_, in_frame_.length > 0 ? in_payload_
                                                                 : std::span<std::uint8_t>{});
        ec) {
      return fail(ec, std::string("frame ") + frame_type_name(in_frame_.type) + " rejected");
    }
    if (!sink.wants_more()) break;
    // Nothing buffered in TLS: another read would most likely only return EAGAIN, a system
    // call on the latency path. The caller's next poll (or direct read) picks up what follows.
    if (!has_buffered_input()) break;
  }
  return failure_.code;
}

std::error_code Channel::send_frame(const FrameHeader& header,
                                    std::span<const std::uint8_t> payload, Deadline deadline) {
  bool finished = false;
  std::error_code result;
  enqueue(header, payload, [&](std::error_code ec) {
    finished = true;
    result = ec;
  });
  while (!finished || has_pending_writes()) {
    if (auto ec = flush(); ec) return ec;
    if (finished && !has_pending_writes()) break;
    // A ring's reader rings when it frees room.
    if (prepare_to_block(false, true)) {
      done_blocking(0);
      if (Clock::now() >= deadline) {
        return fail(errc::timeout, "send did not complete before the deadline");
      }
      continue;
    }
    const auto ec = wait_fd(fd_.get(), ring_ ? WaitFor::read : WaitFor::write, deadline);
    done_blocking(POLLIN);
    if (ec) return fail(ec, "send did not complete before the deadline");
  }
  return result;
}

std::error_code Channel::receive_frame(FrameHeader& header, std::vector<std::uint8_t>& payload,
                                       Deadline deadline) {
  SingleFrameSink sink(payload);
  for (;;) {
    if (auto ec = read_available(sink, 1); ec) return ec;
    if (sink.done()) {
      header = sink.header();
      return {};
    }
    if (has_buffered_input()) continue;
    if (prepare_to_block(true, false)) {
      done_blocking(0);
      if (Clock::now() >= deadline) return errc::timeout;
      continue;
    }
    const auto ec = wait_fd(fd_.get(), WaitFor::read, deadline);
    done_blocking(POLLIN);
    if (ec) return ec;
  }
}

void Channel::shutdown() noexcept {
  if (!failed()) records_->close_notify();
  if (local_socket_ || !fd_.valid()) return;
  // Closing a TCP socket with unread input sends a reset instead of a FIN, and the peer's
  // kernel may then drop what it has not acknowledged yet: our GOODBYE, our last frames.
  // Input can be waiting here (a peer paused by backpressure, a DENY after its GOODBYE): it is
  // discarded first, bounded (the peer may keep sending).
  for (int round = 0; round < 1024; ++round) {
    std::uint8_t discard[16384];
    const ssize_t n = ::recv(fd_.get(), discard, sizeof discard, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    break;
  }
}

}  // namespace sempi::transport
