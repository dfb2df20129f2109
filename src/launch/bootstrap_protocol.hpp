#pragma once
// The private bootstrap channel between the launcher and one rank.
//
// Locally it is an AF_UNIX socketpair inherited by the rank (fd number in SEMPI_BOOTSTRAP_FD;
// nothing secret travels in argv or the environment). Messages are a 4-byte little-endian length
// followed by a UTF-8 JSON object with a "type" field; at most kMaxBootstrapMessage bytes.
//
// rank -> launcher
//   {"type":"enroll", "csr":PEM, "endpoint":"HOST:PORT", "pid":N[,
//    "local":{"host":ID, "path":PATH}]}     a Unix socket for ranks whose host identity is ID
//                                            (transport/listener.hpp); optional
//   {"type":"finalize"[, "audit_head":{"seq":N, "hash":HEX64}]}
//                                            reached finalize; wait for finalize_ok. audit_head
//                                            is the head of the rank's closed audit chain (last
//                                            sequence number, SHA-256 of its last line; seq -1
//                                            for an empty log); the launcher signs it into the
//                                            job's seal (src/audit/seal.hpp). Without it (a rank
//                                            that is not audited) the launcher reads the head
//                                            from the rank's file. A malformed one is refused.
//   {"type":"audit_head", "audit_head":{...}} after finalize_ok, once every peer said goodbye:
//                                            the head, as above, of the chain closed only now,
//                                            so that refusals decided while the rank waited in
//                                            finalize are sealed too (the runtime reports its
//                                            head this way, not in finalize). Once, after
//                                            finalize; otherwise refused.
//   {"type":"abort", "code":N, "reason":S}   the application called abort
//   {"type":"peer_lost", "peer":R, "reason":S}  the channel to rank R broke without a goodbye;
//                                            if this rank fails next, R is the likely cause
// launcher -> rank
//   {"type":"welcome", "rank":R, "size":N, "job":HEX, "certificate":PEM, "ca":PEM,
//    "policy":JSON-TEXT, "policy_digest":HEX, "endpoints":["HOST:PORT", ...] (index = rank),
//    "local_endpoints":[{"host":ID, "path":PATH} or null, ...] (index = rank),
//    "audit_dir":PATH,                       absolute; the rank writes PATH/rank-<R>.jsonl
//    "oversubscribed":BOOL}                  the job's ranks on a host outnumber the CPUs they
//                                            may use there: the same on every rank, so that
//                                            collectives that choose by it choose alike
//   {"type":"finalize_ok"}                   every rank reached finalize
//   {"type":"abort", "reason":S}             the job is being torn down
//   {"type":"error", "reason":S}             enrollment refused (bad CSR, ...)
//
// The welcome is sent only when every rank has enrolled, so it doubles as the start-up fence.

#include <chrono>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

namespace sempi::launch {

inline constexpr std::size_t kMaxBootstrapMessage = 1u << 20;
inline constexpr const char* kBootstrapFdVariable = "SEMPI_BOOTSTRAP_FD";
/// The job's private directory for the ranks' Unix sockets (job_socket_dir.hpp); ranks enroll
/// theirs as "local" only when this is set.
inline constexpr const char* kLocalDirVariable = "SEMPI_LOCAL_DIR";
/// The index of the rank's program among those sempirun runs, separated by ':' on its command
/// line (MPI_APPNUM); 0 with one program.
inline constexpr const char* kAppnumVariable = "SEMPI_APPNUM";

/// SEMPI_START_TIMEOUT (seconds, default 300): how long sempirun waits, from the first rank's
/// enrollment, for every rank to enroll (it then ends the job, naming the ranks that did not),
/// and how long each rank then has to connect to its peers.
inline constexpr const char* kStartTimeoutVariable = "SEMPI_START_TIMEOUT";
inline constexpr std::chrono::seconds kDefaultStartTimeout{300};
inline constexpr std::chrono::seconds kWelcomeGrace{15};

/// The start-up timeout for a setting of SEMPI_START_TIMEOUT (null or empty: the default).
/// Throws sempi::Error(config) naming the variable for anything but a number of seconds >= 1.
std::chrono::seconds start_timeout(const char* value);

/// How long a rank waits for its welcome: twice the start-up timeout plus kWelcomeGrace. The
/// launcher, which knows which ranks are missing, is the one to end a start-up that stalls; its
/// clock starts when it reads the first enrollment, which on a busy host starting many ranks
/// can be well after that rank sent it.
std::chrono::seconds welcome_timeout(std::chrono::seconds start_timeout);

/// The body of `message` as written (compact JSON; bytes that are not UTF-8 replaced): what
/// kMaxBootstrapMessage bounds.
std::string bootstrap_message_text(const nlohmann::json& message);

/// One message as it goes on the wire (length prefix and body), appended to `wire`;
/// errc::frame_too_large (and nothing appended) if its body exceeds kMaxBootstrapMessage.
std::error_code append_bootstrap_message(const nlohmann::json& message, std::string& wire);

/// Writes one message (blocking, bounded by `deadline`). The fd may be blocking or not.
std::error_code write_bootstrap_message(int fd, const nlohmann::json& message,
                                        std::chrono::steady_clock::time_point deadline);

/// Incremental reader for a non-blocking fd: feed() appends what is readable; next() pops one
/// complete message. A message over the size limit, invalid JSON or a non-object is an error.
class BootstrapReader {
 public:
  /// Reads what is available. Returns errc::connection_closed at EOF, other codes on error,
  /// {} when it would block.
  std::error_code feed(int fd);
  /// True and fills `out` if a complete message is buffered; sets `error` if it is malformed.
  bool next(nlohmann::json& out, std::error_code& error);

 private:
  std::string buffer_;
  std::size_t start_ = 0;  // where the next message begins: consumed bytes go at the next feed
};

/// The rank side's reading of a welcome's "local_endpoints": for each rank (index = rank), the
/// path of its Unix socket if that rank enrolled one with host identity `host`, else empty.
/// A job without a socket directory has only nulls; no table (an older launcher) or an empty
/// `host` gives all empty too.
/// Throws sempi::Error(io) unless `size` >= 0 and the table is an array of `size` entries,
/// each null or {"host":string, "path":absolute path}.
std::vector<std::string> welcome_local_paths(const nlohmann::json& welcome, int size,
                                             const std::string& host);

/// Blocking read of one message with a deadline (for the rank side during start-up).
std::error_code read_bootstrap_message(int fd, BootstrapReader& reader, nlohmann::json& out,
                                       std::chrono::steady_clock::time_point deadline);

}  // namespace sempi::launch
