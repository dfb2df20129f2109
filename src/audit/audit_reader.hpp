#pragma once
// Reading a job's audit directory back: verification of the hash chains and the seal, the
// traffic report, and send/receive reconciliation (the logic behind `sempi audit`).
//
// Input is untrusted (that is the point of verifying it): every line is parsed defensively and
// a malformed one is a finding, never a crash.
//
// Files are read as streams, a record at a time: a job's logs can be far larger than memory
// (a rank auditing every message writes ~100 MB/s while it exchanges small messages). What
// verify keeps is the sequence number of each record that has one (8 bytes, for a record of at
// least 25), at most kMaxFindingsPerFile findings a file, and two records at a time (what one
// costs is bounded: see for_each_record); reconcile keeps 64 bytes per send or receive record.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_log.hpp"

namespace sempi::audit {

struct Record {
  std::size_t line = 0;  // 1-based
  std::string text;      // the line without its newline
  nlohmann::json json;   // discarded if the line is not a JSON object
  bool cut_off = false;  // the file's last line, with no newline after it
  bool oversized = false;  // longer than the reader's limit: text holds its start, and the
                           // reader stops after it (nothing after it can be linked anyway)
  [[nodiscard]] bool parsed() const { return json.is_object(); }
  /// event.sequence, or -1 unless it is a JSON integer from 0 to INT64_MAX.
  [[nodiscard]] std::int64_t seq() const;
  [[nodiscard]] std::string action() const;
  [[nodiscard]] const nlohmann::json* sempi(const char* key) const;
};

struct LogFile {
  std::string name;  // file name inside the directory
  std::filesystem::path path;
  bool exists = false;
};

/// The longest line read whole. sempi's longest record is the seal, ~100 bytes a rank: 0.4 MB
/// for sempirun's 4096 ranks.
inline constexpr std::size_t kMaxRecordBytes = 8u << 20;
/// The deepest nesting of a line parsed as JSON: sempi's deepest record, the seal, nests 5.
inline constexpr std::size_t kMaxRecordDepth = 16;

/// Reads the file's records in order, one at a time, and passes each to `visit`, which returns
/// false to stop early. The record is the reader's own buffer, refilled for the next line: a
/// visitor may move or swap its contents away (to keep the last record without copying it).
/// Nothing is read if the file does not exist. A line longer than max_line_bytes is passed as
/// its first max_line_bytes, unparsed and `oversized`, and is the last one read (a sparse file
/// of terabytes costs nothing); one nested deeper than kMaxRecordDepth is passed unparsed. So
/// hostile input costs the reader at most about 20 times max_line_bytes (a parsed array of small
/// numbers; 160 MB at the default), whatever the file holds. Throws sempi::Error(io) if the file
/// cannot be read.
void for_each_record(const LogFile& file, const std::function<bool(Record&)>& visit,
                     std::size_t max_line_bytes = kMaxRecordBytes);

/// A line parsed as a record: null unless it is a JSON object nested at most kMaxRecordDepth
/// deep (checked before parsing, so a hostile line costs no more than a few times its size).
nlohmann::json parse_record(std::string_view line);

/// How a log ends, read from the end: what the launcher seals for a rank whose writer died.
struct LogEnd {
  std::string last_line;  // the last complete line (without its newline), "" if none
  std::string cut_off;    // the bytes after the last newline: a record cut off as it was written
};
/// Reads the end of `file` without reading all of it. nullopt if it cannot be read, or if its
/// last complete line or what follows it is longer than max_line_bytes.
std::optional<LogEnd> read_log_end(const std::filesystem::path& file,
                                   std::size_t max_line_bytes = kMaxRecordBytes);

struct AuditDir {
  std::filesystem::path dir;
  LogFile launcher;
  std::map<int, LogFile> ranks;  // by rank, from the file names and the launcher's job.start
  std::vector<std::string> strays;  // rank-*.jsonl files whose name no rank writes
  // Why the directory could not be listed (empty if it was): then only the logs the launcher
  // log names were found, and verify, report and reconcile say so.
  std::string unlisted;
};

/// The name findings and unread entries give the directory itself.
inline constexpr const char* kDirectoryName = ".";

/// Reads every log file of the directory. Throws sempi::Error(config) if it is not a directory.
AuditDir load_audit_dir(const std::filesystem::path& dir);

/// The most findings listed for one file's chain: a hostile file can break every one of its
/// lines, and a finding costs far more memory than an empty line. Past it, the findings are
/// counted, and one "omitted" finding says how many were not listed.
inline constexpr std::size_t kMaxFindingsPerFile = 100;
/// The most ranks a job's logs are looked for (sempirun's -n limit): a forged job.start or
/// seal cannot make the verifier look for a million files.
inline constexpr int kMaxJobRanks = 4096;

/// One broken place. kind: edited, deleted, reordered, truncated, corrupt, missing, appended,
/// bad_seal, unsealed, foreign (a record of another job or rank), unreadable (the file cannot
/// be read), unwritten (records the rank chained but reported it could not write: no space, an
/// I/O error), omitted (the problems of a file past kMaxFindingsPerFile, counted, not listed).
struct Finding {
  std::string file;
  std::size_t line = 0;  // 0: the file as a whole
  std::string kind;
  std::string message;
};

struct VerifyResult {
  std::vector<Finding> findings;
  /// What an intact result does not prove, or what it cannot cover (a rank that died).
  std::vector<std::string> notes;
  bool sealed = false;
  std::size_t files = 0;
  std::size_t records = 0;
  /// Every problem found, listed or not: an "omitted" finding stands for those it counts.
  std::size_t problems = 0;
  [[nodiscard]] bool ok() const { return findings.empty(); }
};

/// Verifies every chain against the seal. With `public_key` (hex), the seal must be signed by it.
VerifyResult verify(const AuditDir& dir, const std::optional<std::string>& public_key);

/// Traffic matrix (messages and bytes per rank pair and communicator, from message.send
/// records), receives, and every denial and failure. A communicator is told by its context,
/// which both ends agree on; the names it had ("comm", then "also_named") are local.
nlohmann::ordered_json report_json(const AuditDir& dir);
std::string report_text(const nlohmann::ordered_json& report);

struct ReconcileResult {
  std::size_t sends = 0;
  std::size_t matched = 0;
  std::size_t denied = 0;  // sends the receiver refused (policy.deny, direction receive)
  std::size_t dropped = 0;             // sends the receiver dropped unreceived (message.drop)
  // Sends without a receive, to a receiver that stopped writing drop records for that sender
  // (audit.limit): perhaps dropped, not recorded.
  std::size_t past_audit_limit = 0;
  // unmatched and mismatched: one line each, ready to print (names quoted, what the log says
  // escaped: see in_quotes()).
  std::vector<std::string> unmatched;
  // Matched by id, but bytes, tag, op or communicator (context) disagree; or a message
  // recorded twice on one side.
  std::vector<std::string> mismatched;
  // The same as unmatched and mismatched, as JSON objects with the records' fields as they are
  // (for tools: the lines above quote and escape names for people).
  std::vector<nlohmann::ordered_json> unmatched_records;
  std::vector<nlohmann::ordered_json> mismatched_records;
  // What could not be counted: files that cannot be read, lines over the limit, cut-off lines.
  std::vector<std::string> unread;
  bool message_records = false;  // false: message audit was off, nothing to reconcile
};
/// Matches every message.send with the message.receive (or receive-side denial, or drop) of
/// the same (sender, receiver, message id). A message received and then dropped counts as
/// matched: it did arrive.
/// `with_records`: also fill unmatched_records and mismatched_records (for --json; they cost
/// memory in proportion to what is unmatched).
ReconcileResult reconcile(const AuditDir& dir, bool with_records = true);

}  // namespace sempi::audit
