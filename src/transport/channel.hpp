#pragma once
// A channel: one mutually authenticated TLS 1.3 connection between two ranks of one job,
// carrying sempi frames. The channel knows frames, not MPI.
//
// OpenSSL runs the handshake directly on the non-blocking socket (socket BIO) rather than
// through Asio's ssl::stream: the stream's memory-BIO pair adds a copy of every byte in each
// direction and a second buffer per connection, and the progress engine drives readiness itself
// anyway. Once the handshake is done, sempi's record layer (record_layer.hpp) protects the
// records with the negotiated traffic keys.
//
// Life cycle: connect() or accept() perform TCP + TLS handshake + identity pinning + HELLO under
// one deadline and return a ready channel or a specific error. Between ranks on one host the
// dialer can also hand over shared rings (ring_stream.hpp) before TLS starts; the records move
// to them once HELLO is exchanged, and the Unix socket then only carries wake-ups. Afterwards
// frames are exchanged with the non-blocking enqueue()/flush()/read_available() trio (used by
// the progress engine) or the blocking send_frame()/receive_frame() helpers, which take
// deadlines.
//
// Errors: any violation by the peer (malformed, unknown, oversize or out-of-sequence frame, TLS
// error, EOF) fails the channel permanently; every later call returns the same error and every
// queued send completes with it. A partially received frame is never delivered.
//
// Thread safety: a Channel is not thread-safe; one thread (the rank's progress thread) owns it.

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "pki/identity.hpp"
#include "pki/ossl.hpp"
#include "transport/accept_progress.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/peer_verifier.hpp"
#include "transport/record_layer.hpp"
#include "transport/ring_stream.hpp"
#include "transport/socket.hpp"
#include "transport/tls_context.hpp"
#include "transport/traffic_secrets.hpp"

namespace sempi::transport {

/// This rank's side of every channel it opens.
struct LocalEndpoint {
  std::shared_ptr<const TlsContext> tls;
  Hello hello;  // our job, rank, world size, policy digest and limits
  /// Records sealed under one key before a TLS key update (lowered only by tests).
  std::uint64_t rekey_after_records = kRekeyAfterRecords;
  /// connect_local() offers the peer shared rings for the records (see above).
  bool shared_memory = false;

  [[nodiscard]] PeerRequirements requirements() const {
    return {hello.job, hello.world_size, hello.policy_digest, std::nullopt};
  }
};

/// Why a channel could not be established or failed: a code to branch on, a detail for people.
struct ChannelError {
  std::error_code code;
  std::string detail;

  [[nodiscard]] std::string message() const {
    return detail.empty() ? code.message() : code.message() + " (" + detail + ")";
  }
};

/// Receives decoded frames from read_available().
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  /// Where to put the payload of `header` (exactly header.length bytes); called only for
  /// length > 0, after the header passed validation. The span must stay valid until on_frame.
  virtual std::span<std::uint8_t> payload_buffer(const FrameHeader& header) = 0;
  /// A complete frame. Returning an error fails the channel (e.g. errc::frame_unexpected).
  virtual std::error_code on_frame(const FrameHeader& header,
                                   std::span<std::uint8_t> payload) = 0;
  /// Checked after each frame: false ends the read round there (backpressure), even with
  /// more frames already decrypted.
  [[nodiscard]] virtual bool wants_more() const { return true; }
};

/// Called once per queued frame: with {} when fully handed to TLS, or with the channel's error.
using SendCompletion = std::function<void(std::error_code)>;

class Channel {
 public:
  /// Dials `to`, expecting the peer to be `expected_rank` of our job.
  static std::unique_ptr<Channel> connect(const LocalEndpoint& local, const Endpoint& to,
                                          std::uint32_t expected_rank, Deadline deadline,
                                          ChannelError& error);
  /// Dials the Unix socket at `path` (a peer on this host, see listener.hpp), as connect().
  /// A socket that cannot be reached fails with errc::connection_failed before any TLS.
  static std::unique_ptr<Channel> connect_local(const LocalEndpoint& local,
                                                const std::string& path,
                                                std::uint32_t expected_rank, Deadline deadline,
                                                ChannelError& error);

  /// Dials a peer over its Unix socket at `local_path` if that is set and reachable, else (or
  /// if that socket cannot be reached, e.g. from another mount namespace) over TCP at `to`.
  /// Only an unreachable socket falls back: a failed handshake fails the dial. A connection
  /// the peer closes before the channel is established (a listener under a flood of
  /// unauthenticated connections drops some, see higher_rank_acceptor.hpp) is dialed again,
  /// up to 10 attempts, after pauses that grow from 1 to 100 ms (~0.3 s in all).
  static std::unique_ptr<Channel> dial(const LocalEndpoint& local, const Endpoint& to,
                                       const std::string& local_path,
                                       std::uint32_t expected_rank, Deadline deadline,
                                       ChannelError& error);

  /// Runs the server side on an accepted socket. `claim_rank` is called with the verified peer
  /// rank and returns false if that rank is already connected (the channel is then refused with
  /// errc::peer_duplicate_rank). `progress`, if set, hears each AcceptProgress reached, on the
  /// calling thread.
  static std::unique_ptr<Channel> accept(const LocalEndpoint& local, UniqueFd socket,
                                         const std::function<bool(std::uint32_t)>& claim_rank,
                                         Deadline deadline, ChannelError& error,
                                         const AcceptProgressHandler& progress = {});

  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel();

  [[nodiscard]] const pki::Identity& peer() const noexcept { return peer_; }
  [[nodiscard]] const ChannelLimits& peer_limits() const noexcept { return peer_limits_; }
  [[nodiscard]] const ChannelLimits& local_limits() const noexcept { return local_limits_; }
  [[nodiscard]] int native_handle() const noexcept { return fd_.get(); }
  [[nodiscard]] const ChannelError& failure() const noexcept { return failure_; }
  [[nodiscard]] bool failed() const noexcept { return static_cast<bool>(failure_.code); }
  /// The negotiated TLS suite, e.g. "TLS_AES_128_GCM_SHA256".
  [[nodiscard]] std::string cipher() const;
  /// True if a Unix socket carries the records (a peer on this host), false for TCP.
  [[nodiscard]] bool over_unix_socket() const noexcept { return local_socket_; }
  /// The same as a name for logs: "shm", "unix" or "tcp".
  [[nodiscard]] const char* transport() const noexcept {
    return ring_ ? "shm" : local_socket_ ? "unix" : "tcp";
  }

  /// Queues a frame; the channel assigns the sequence number. A frame counts as written once TLS
  /// has encrypted it; the records may still sit in the socket BIO's buffer (several records go
  /// out in one send(), see socket_bio.hpp) until flush() drains it. The payload is copied if
  /// small, otherwise referenced: it must stay valid until `done` runs. A payload larger than the
  /// peer's max_frame_payload is refused immediately (errc::frame_too_large via `done`). Returns
  /// the sequence number the frame carries (the peer sees the same number). `owner` tags the frame
  /// for move_payloads() (the engine's request; null: none).
  std::uint64_t enqueue(FrameHeader header, std::span<const std::uint8_t> payload,
                        SendCompletion done, const void* owner = nullptr);
  /// The small-message fast path: when nothing is queued and the payload is small enough to be
  /// copied, the frame is handed to TLS at once (or, if TLS cannot take it now, copied into the
  /// queue), so the caller's buffer is free on return and nothing is allocated. Returns the
  /// frame's sequence number, or nullopt if the frame was not taken (the channel is busy or
  /// failed, or the payload is large): the caller then uses enqueue(). As with enqueue(), the
  /// records may wait in the socket BIO until flush().
  std::optional<std::uint64_t> send_now(FrameHeader header, std::span<const std::uint8_t> payload);
  /// The queued frames of `owner` whose payload lies in `from` read it from the same place in
  /// `to` (a copy of `from`) from now on: the owner is about to give `from` up. Only its own:
  /// another send of the same buffer keeps reading it (and must not outlive the copy).
  void move_payloads(const void* owner, std::span<const std::uint8_t> from,
                     const std::uint8_t* to) noexcept;
  /// Writes queued frames without blocking. Returns the channel failure, if any.
  std::error_code flush();
  /// True while queued bytes remain; the caller waits for writability.
  [[nodiscard]] bool has_pending_writes() const noexcept;
  /// Bytes of frames written to TLS or read from it so far: a waiter sees from it that data
  /// is still moving.
  [[nodiscard]] std::uint64_t bytes_moved() const noexcept { return bytes_moved_; }

  /// Reads and delivers up to `max_frames` complete frames without blocking. Stops early when
  /// TLS has nothing buffered after a frame (the next read would most likely find nothing).
  std::error_code read_available(FrameSink& sink, std::size_t max_frames = SIZE_MAX);
  /// True if decrypted bytes or a whole record are buffered, or bytes wait in the shared
  /// ring: poll() would not report them.
  [[nodiscard]] bool has_buffered_input() const;

  // Shared rings only (the socket then says nothing about the records): what to poll for,
  // and what to do around a blocking poll().
  /// The poll() events to wait for on native_handle().
  [[nodiscard]] short poll_events(bool reading) const noexcept;
  /// Before blocking in poll(): asks the peer to wake us when there is input (if `reading`)
  /// or room for our queued writes (if `writing`). true if there is already, or the peer is
  /// gone (then do not block).
  bool prepare_to_block(bool reading, bool writing) noexcept {
    return ring_ && ring_->prepare_to_block(reading, writing);
  }
  /// After poll(), with its revents for native_handle(): takes the wake-ups off the socket.
  void done_blocking(short revents) noexcept;

  /// Blocking send of one frame, bounded by the deadline.
  std::error_code send_frame(const FrameHeader& header, std::span<const std::uint8_t> payload,
                             Deadline deadline);
  /// Blocking receive of one frame, bounded by the deadline. Payload is resized to fit.
  std::error_code receive_frame(FrameHeader& header, std::vector<std::uint8_t>& payload,
                                Deadline deadline);

  /// Best-effort orderly TLS close (close_notify); a TCP socket's unread input is discarded,
  /// so that closing it sends a FIN, not a reset. The socket closes on destruction.
  void shutdown() noexcept;

 private:
  struct Outbound {
    EncodedHeader header;
    std::vector<std::uint8_t> small;  // header + payload copied together, for small frames
    std::span<const std::uint8_t> large;
    std::size_t written = 0;  // bytes of (small or header+large) handed to TLS
    SendCompletion done;
    const void* owner = nullptr;  // see enqueue()
    [[nodiscard]] std::size_t total() const {
      return small.empty() ? kFrameHeaderSize + large.size() : small.size();
    }
  };

  Channel(UniqueFd fd, pki::SslPtr ssl, const LocalEndpoint& local);
  // The client side on a connected socket (TCP or Unix); `to` names the peer in errors.
  // `region`: shared rings already handed to the peer, used once HELLO is exchanged.
  static std::unique_ptr<Channel> connect_over(const LocalEndpoint& local, UniqueFd fd,
                                               std::error_code ec, const std::string& to,
                                               std::uint32_t expected_rank, Deadline deadline,
                                               ChannelError& error,
                                               std::unique_ptr<SharedRegion> region = nullptr);
  // One attempt of dial().
  static std::unique_ptr<Channel> dial_once(const LocalEndpoint& local, const Endpoint& to,
                                            const std::string& local_path,
                                            std::uint32_t expected_rank, Deadline deadline,
                                            ChannelError& error);
  // `claim_rank` and `progress`: the acceptor's (null for the dialer).
  static std::unique_ptr<Channel> establish(std::unique_ptr<Channel> channel, bool is_client,
                                            PeerRequirements requirements,
                                            const std::function<bool(std::uint32_t)>* claim_rank,
                                            const AcceptProgressHandler* progress,
                                            std::uint64_t rekey_after, Deadline deadline,
                                            ChannelError& error);
  ChannelError handshake(bool is_client, Deadline deadline);
  // Hands the connection from OpenSSL's record layer to ours, with the captured secrets.
  ChannelError start_record_layer(bool is_client, std::uint64_t rekey_after);
  ChannelError exchange_hello(Deadline deadline);
  // Maps the rings the dialer handed over (the acceptor, once the peer proved who it is).
  ChannelError adopt_rings();
  // Moves the records to the shared rings, if there are any (after HELLO).
  ChannelError start_rings(bool is_client);
  std::error_code fail(std::error_code code, std::string detail);
  // Hands buffered records to the kernel, as far as it takes them.
  std::error_code flush_socket_buffer();
  // One record-layer write; returns bytes taken, 0 when the socket is full, -1 after failing
  // the channel.
  long write_some(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second = {});
  // One record-layer read into dst; returns bytes, 0 when it would block, -1 after failing
  // the channel.
  long read_some(std::uint8_t* dst, std::size_t size);
  // Like read_some, but small reads go through stage_ (see below).
  long take_input(std::uint8_t* dst, std::size_t size);
  [[nodiscard]] std::size_t staged() const noexcept { return stage_end_ - stage_begin_; }
  void complete_written();

  UniqueFd fd_;
  bool local_socket_ = false;  // a Unix socket (set once, at construction)
  // The handshake's, freed once the record layer takes over: it holds the generation-0 traffic
  // secrets, OpenSSL's keys for them and the rest of the key schedule, which must not outlive
  // their use (key updates are meant to make earlier keys unrecoverable, RFC 8446, 7.2).
  pki::SslPtr ssl_;
  std::string cipher_;                       // the suite's name, kept from ssl_
  pki::BioPtr bio_;                          // the socket BIO, which owns the socket buffers
  std::unique_ptr<TrafficSecrets> secrets_;  // filled by the handshake, wiped once used
  std::unique_ptr<RecordLayer> records_;     // from the end of the handshake on
  // Shared rings: the dialer's region, or the memfd the dialer handed over (the acceptor maps
  // it only once the peer has proven who it is); the stream over them after HELLO.
  std::unique_ptr<SharedRegion> region_;
  UniqueFd peer_region_fd_;
  std::unique_ptr<RingStream> ring_;
  ChannelLimits local_limits_;
  // The largest payload accepted from the peer: HELLO's size until the HELLO exchange is done,
  // so that a peer cannot make us allocate the full frame limit before it has said hello.
  std::uint64_t accept_payload_ = kHelloSize;
  Hello local_hello_;
  pki::Identity peer_;
  ChannelLimits peer_limits_;
  ChannelError failure_;

  // Outbound state.
  std::deque<Outbound> outbound_;
  std::vector<std::uint8_t> coalesced_;  // small frames gathered into one TLS write
  std::size_t coalesced_frames_ = 0;
  std::size_t coalesced_written_ = 0;
  std::uint64_t next_out_sequence_ = 0;

  std::uint64_t bytes_moved_ = 0;  // see bytes_moved()

  // Inbound state.
  // Decrypted bytes taken from TLS but not yet parsed. A frame header is read together with
  // what follows it in the record (a small payload, further coalesced frames), so a small
  // message costs one record-layer read instead of two; a large payload is read straight into
  // place.
  std::array<std::uint8_t, 512> stage_;
  std::size_t stage_begin_ = 0;
  std::size_t stage_end_ = 0;
  EncodedHeader in_header_{};
  std::size_t in_header_got_ = 0;
  FrameHeader in_frame_;
  std::span<std::uint8_t> in_payload_;
  std::size_t in_payload_got_ = 0;
  bool in_payload_phase_ = false;
  std::uint64_t next_in_sequence_ = 0;
};

}  // namespace sempi::transport
