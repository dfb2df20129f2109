#pragma once
// The tamper-evident audit log of one process (a rank or the launcher): JSON Lines, one record
// per line, field names after the Elastic Common Schema where one fits.
//
//   {"@timestamp":"2025-01-31T12:00:00.123456Z",
//    "event":{"sequence":N,"action":"message.send","outcome":"success"[,"reason":"..."]},
//    "sempi":{"job":HEX,"source":"rank"|"launcher"[,"rank":R],...,"prev":HEX64}}
//
// Chain: event.sequence counts from 0 in each file; sempi.prev is the SHA-256 (hex) of the
// previous line's bytes (without its newline), 64 zeros for the first record. The chain head
// (last sequence number, SHA-256 of the last line) is sent to the launcher at finalize and
// signed into the job's seal (audit/seal.hpp), so editing, deleting, reordering or truncating
// records is detectable (audit/audit_reader.hpp).
//
// Never logged: payloads, keys, tokens. Message records carry metadata (peer, communicator,
// operation, tag, bytes, message id) and, at level "digest", the payload's SHA-256.
//
// Message records are captured, then rendered: message() only copies the record's fields and a
// timestamp into a lock-free ring (audit/capture_ring.hpp; no JSON, no hashing, no lock: it
// runs on the message path, about 35 ns, most of it reading the clock). render_pending()
// formats queued records, chains them and buffers them (about 0.4 us a record, two thirds of
// it SHA-256: bench/audit_render); the engine calls
// try_render_pending() while a rank waits with nothing else to do (skipping a round when the
// background thread holds the log), and flush_if_due() renders whatever is left. Other
// records (event()) are rare and rendered at once, after everything queued, so the file keeps
// the order of the calls. Timestamps are taken at capture.
//
// Durability trade-off: rendered records are appended to an in-memory buffer, written when it
// holds flush_bytes, when the oldest buffered record is older than max_age (checked on every
// rendered record and by flush_if_due(), which the engine's background thread calls every few
// milliseconds, rendering the queue first), and at close(). A crash loses at most what is
// queued or buffered: bounded by max_age plus that period, kMaxQueued records and flush_bytes.
// flush_bytes is a compromise: a write costs more per byte the smaller it is (measured in a
// rank sending 8-byte messages, 64 KiB writes cost 0.30-0.43 ns a byte, ~5 % of its time, and
// 1 MiB writes 0.18-0.24 ns), but a buffer as large as the L2 cache (1 MiB here) pushes the
// message path's own lines out of it as records fill it. 256 KiB gave the lowest 8-byte
// latency under metadata audit, 4-5 % below 1 MiB (bench/RESULTS.md, nineteenth session).
// With flush_each (the launcher, and ranks under "flush": "record") every record is rendered
// and written at once.
//
// Thread safety: every member function may be called from any thread. One mutex serialises
// rendering and the file; a capture takes no lock, unless it finds kMaxQueued records waiting
// and renders them itself (under that mutex, possibly writing the buffer). One
// thread's records are written in the order it made them; records captured at the same moment
// by two threads may come out in either order, each with the time it was captured. Records are
// formatted into reused buffers: no allocation per record once warmed up (a ring slot keeps the
// capacity of the longest communicator name it held).

#include <time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "audit/capture_ring.hpp"
#include "pki/ossl.hpp"

namespace sempi::audit {

using Sha256 = std::array<std::uint8_t, 32>;

/// File names inside an audit directory.
inline constexpr const char* kLauncherFile = "launcher.jsonl";
std::string rank_file_name(int rank);  // "rank-<R>.jsonl"

/// 64 zeros: the "prev" of the first record.
inline const std::string kZeroHash(64, '0');

/// SHA-256 of bytes (a reused per-thread context; no allocation after the first call).
Sha256 sha256(std::span<const std::uint8_t> data);
Sha256 sha256(std::string_view text);

/// The end of a chain: the last record's sequence number (-1: empty) and its line's SHA-256.
struct ChainHead {
  std::int64_t seq = -1;
  std::string hash = kZeroHash;
  /// Empty, or why records of this chain may be missing from the file: writing it failed
  /// (no space, an I/O error), so the chain reached records the file never got.
  std::string write_error{};
  bool operator==(const ChainHead&) const = default;
};

/// {"seq":N,"hash":HEX[,"write_error":TEXT]}: a head as a rank reports it at finalize and as the
/// launcher's records name it.
nlohmann::ordered_json chain_head_json(const ChainHead& head);

/// One message record, formatted without allocation on the hot path.
struct MessageRecord {
  const char* action = "message.send";  // message.send|receive|drop, policy.deny
  bool success = true;                  // event.outcome
  const char* reason = nullptr;         // event.reason (static text), or null
  int peer = 0;                         // world rank of the other side
  std::string_view comm;                // communicator name as this rank knows it
  std::uint32_t context = 0;
  const char* op = "p2p";
  int tag = 0;
  std::uint64_t bytes = 0;
  std::uint64_t msg = 0;                // message id: channel sequence of the EAGER/RTS frame
  const char* direction = nullptr;      // for policy.deny: "send" or "receive"
  bool dry_run = false;                 // policy.deny in audit mode: not enforced
  const Sha256* digest = nullptr;       // level "digest" only
};

class AuditLog {
 public:
  /// A capture that finds this many records waiting renders them itself first.
  static constexpr std::size_t kMaxQueued = 1024;

  struct Options {
    std::string job;          // job id (hex)
    std::optional<int> rank;  // nullopt: the launcher
    bool flush_each = false;
    std::size_t flush_bytes = 256 * 1024;
    std::chrono::milliseconds max_age{200};
  };

  /// Creates `file` (which must not exist: O_EXCL, mode 0600, no symlink following).
  /// Throws sempi::Error(io) with the path and errno text.
  static std::unique_ptr<AuditLog> create(const std::filesystem::path& file, Options options);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  /// A general record; `fields` (an object) is merged into "sempi" after job/source/rank.
  void event(std::string_view action, bool success, std::string_view reason = {},
             const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());
  /// Signs a record's whole line: given the line as it will be written (without its newline)
  /// but with the signature's digits all '0', returns the signature in hex.
  using LineSigner = std::function<std::string(std::string_view line)>;
  /// Hex digits of a signed record's signature (an Ed25519 signature).
  static constexpr std::size_t kSignatureHexDigits = 128;
  /// A record (outcome success) whose last field before "prev" is sempi.signature, made by
  /// `signer` over every byte of the line: timestamp, sequence number, fields and chain link.
  /// The signer may throw; nothing is written then.
  void signed_event(std::string_view action, const nlohmann::ordered_json& fields,
                    const LineSigner& signer);
  /// Captures a message record (rendered later, see above).
  void message(const MessageRecord& record);
  /// True if captured records wait to be rendered (a hint: no lock taken).
  [[nodiscard]] bool has_pending() const noexcept { return captured_.maybe_nonempty(); }
  /// Renders up to `max` captured records, oldest first.
  void render_pending(std::size_t max = SIZE_MAX);
  /// As render_pending(), but returns at once if another thread is rendering or writing: an
  /// idle rank must not sit behind the background thread's write when its message arrives.
  void try_render_pending(std::size_t max);

  /// Renders everything captured and writes the buffer.
  void flush();
  /// Renders everything captured; writes the buffer if it is older than max_age or larger than
  /// flush_bytes.
  void flush_if_due();
  /// Flushes, fsyncs, closes; later records are dropped. Returns the final head.
  ChainHead close();
  /// The head after rendering everything captured so far.
  [[nodiscard]] ChainHead head();
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// Records offered after close(), not written (the first one is warned about).
  [[nodiscard]] std::uint64_t dropped() const {
    std::lock_guard lock(mu_);
    return dropped_;
  }

 private:
  // A message record as captured: MessageRecord with owned copies of what it points to.
  struct Captured {
    timespec time{};
    MessageRecord record;  // comm and digest point into this entry when rendered
    std::string comm;
    Sha256 digest{};
    bool has_digest = false;
  };

  AuditLog(std::filesystem::path path, int fd, Options options);
  // All below under mu_ (the render lock). A record is formatted straight into buffer_, in room
  // reserved for its longest possible form: no bounds checks or growth per field.
  // Reserves room for the record (its variable-length parts are `variable_bytes` long) and
  // writes the timestamp, event fields and the source fields; returns where to continue.
  char* begin(const timespec& time, std::string_view action, bool success,
              std::string_view reason, std::size_t variable_bytes);
  // Appends sempi.prev, closes the line, chains it and counts it as buffered. With a signer,
  // first overwrites the kSignatureHexDigits zeros at `signature` with its signature.
  void finish(char* end, std::chrono::steady_clock::time_point now,
              const LineSigner* signer = nullptr, char* signature = nullptr);
  void render(const MessageRecord& record, const timespec& time,
              std::chrono::steady_clock::time_point now);
  void render_queued(std::size_t max);  // up to max captured records, oldest first
  // The buffer holds flush_bytes, or its oldest record is older than max_age.
  [[nodiscard]] bool write_due(std::chrono::steady_clock::time_point now) const;
  void write_buffer();
  // event() and signed_event(): a record with `fields`, signed if `signer` is given.
  void write_event(std::string_view action, bool success, std::string_view reason,
                   const nlohmann::ordered_json& fields, const LineSigner* signer);
  // A record offered after close(): counted, and the first one warned about.
  void count_dropped();

  mutable std::mutex mu_;  // rendering (the ring's consumer), chain, buffer and file
  CaptureRing<Captured> captured_{kMaxQueued};

  std::filesystem::path path_;
  int fd_ = -1;
  Options options_;
  std::string source_fields_;  // closes "event", opens "sempi" with job, source and rank
  // Formatted records not yet written: the first buffered_ bytes of buffer_, whose size is
  // only the room to format in (grown, and so zero-filled, rarely).
  std::string buffer_;
  std::size_t buffered_ = 0;
  std::size_t line_start_ = 0;  // in buffer_: where the record being formatted begins
  std::chrono::steady_clock::time_point oldest_{};  // of the oldest buffered record
  std::int64_t seq_ = -1;
  std::string prev_ = kZeroHash;  // always 64 hex digits, overwritten in place
  bool closed_ = false;
  std::string write_error_;  // why writing the file failed; nothing is written after that
  std::uint64_t dropped_ = 0;
  std::int64_t ts_second_ = -1;      // the second ts_prefix_ was formatted for
  std::array<char, 19> ts_prefix_{};  // "YYYY-MM-DDTHH:MM:SS"
};

/// Appends `text` JSON-escaped (without quotes); bytes >= 0x80 become \u00XX so every line is
/// valid JSON whatever a peer or application put into a name.
void append_json_escaped(std::string& out, std::string_view text);

}  // namespace sempi::audit
