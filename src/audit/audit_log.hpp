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
// Durability trade-off: records are appended to an in-memory buffer, written when it holds
// flush_bytes, when the oldest buffered record is older than max_age (checked on every record
// and by flush_if_due(), which the engine's background thread calls every few milliseconds),
// and at close(). A crash loses at most what is buffered: bounded by max_age and hard_limit.
// The launcher uses flush_each (a write per record: its records are rare and matter most).
//
// Thread safety: every member function may be called from any thread; one internal mutex.
// Records are formatted into reused buffers: no allocation per record once warmed up.

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

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
  bool operator==(const ChainHead&) const = default;
};

/// One message record, formatted without allocation on the hot path.
struct MessageRecord {
  const char* action = "message.send";  // message.send | message.receive | policy.deny
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
  struct Options {
    std::string job;          // job id (hex)
    std::optional<int> rank;  // nullopt: the launcher
    bool flush_each = false;
    std::size_t flush_bytes = 64 * 1024;
    std::chrono::milliseconds max_age{200};
    std::size_t hard_limit = 1024 * 1024;
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
  void message(const MessageRecord& record);

  void flush();
  /// Writes the buffer if it is older than max_age or larger than flush_bytes.
  void flush_if_due();
  /// Flushes, fsyncs, closes; later records are dropped. Returns the final head.
  ChainHead close();
  [[nodiscard]] ChainHead head() const;
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  AuditLog(std::filesystem::path path, int fd, Options options);
  // Under mu_: begins line_ with timestamp and event fields.
  void begin(std::string_view action, bool success, std::string_view reason);
  // Under mu_: appends sempi.prev, closes the line, chains and buffers it.
  void finish();
  void write_buffer();  // under mu_

  mutable std::mutex mu_;
  std::filesystem::path path_;
  int fd_ = -1;
  Options options_;
  std::string line_;    // the record being formatted (reused)
  std::string buffer_;  // formatted records not yet written
  std::chrono::steady_clock::time_point oldest_{};
  std::int64_t seq_ = -1;
  std::string prev_ = kZeroHash;
  bool closed_ = false;
  bool write_failed_ = false;
  std::uint64_t dropped_ = 0;
  std::int64_t ts_second_ = -1;  // the second ts_prefix_ was formatted for
  std::string ts_prefix_;        // "YYYY-MM-DDTHH:MM:SS"
};

/// Appends `text` JSON-escaped (without quotes); bytes >= 0x80 become \u00XX so every line is
/// valid JSON whatever a peer or application put into a name.
void append_json_escaped(std::string& out, std::string_view text);

}  // namespace sempi::audit
