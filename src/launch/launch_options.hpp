#pragma once
// sempirun's command line: mpirun-style flags, then the program and its arguments, which pass
// through untouched up to a ':' that starts the next program's part (MPMD). Parsing is pure (no
// filesystem access) so tests can cover every error; load_policy(), prepare_audit_dir() and
// resolve_working_dir() do the checks that touch the filesystem.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "launch/bootstrap_protocol.hpp"
#include "policy/policy_document.hpp"
#include "transport/socket.hpp"

namespace sempi::launch {

inline constexpr std::uint32_t kMaxRanks = 4096;
/// Upper bound for --timeout (one year): keeps the CA validity arithmetic far from overflow.
inline constexpr std::int64_t kMaxTimeoutSeconds = 365LL * 24 * 3600;

/// Exit statuses of sempirun that are not a rank's own status.
inline constexpr int kExitUsage = 2;      ///< bad command line or policy
inline constexpr int kExitTimeout = 124;  ///< --timeout expired (as timeout(1))
/// Interrupted by signal N (one of kJobEndingSignals): 128 + N, as a shell reports it.
inline constexpr int kExitSignalBase = 128;

/// One -x argument: forward NAME from sempirun's environment, or set NAME=VALUE.
struct EnvSetting {
  std::string name;
  std::optional<std::string> value;  ///< nullopt: forward the launcher's value

  bool operator==(const EnvSetting&) const = default;
};

/// One program of the job and the ranks that run it: mpirun's "application context". The
/// contexts of a command line are separated by ':' and take consecutive ranks (MPMD); each
/// rank learns its context's index as MPI_APPNUM.
struct AppContext {
  std::uint32_t size = 1;       ///< -n / -np; when not given, the slots (parse_launch_options)
  std::vector<EnvSetting> env;  ///< -x, for this context's ranks (as mpirun's)
  /// --wdir: the directory the ranks run in (and a relative program is found in); once
  /// resolve_working_dir has run, the absolute name of what it opened. nullopt: sempirun's own.
  std::optional<std::filesystem::path> working_dir;
  /// That directory, opened (O_PATH) by resolve_working_dir: the program is looked up and the
  /// ranks run in it, whatever is renamed after. Null without --wdir.
  std::shared_ptr<const transport::UniqueFd> working_dir_fd;
  std::vector<std::string> program;  ///< program, then its arguments, verbatim
};

struct LaunchOptions {
  std::uint32_t size = 1;        ///< ranks in all: the sum of the contexts' sizes
  std::vector<AppContext> apps;  ///< one or more, in rank order
  std::optional<std::filesystem::path> policy_file;
  std::optional<std::filesystem::path> audit_dir;
  std::optional<std::filesystem::path> audit_key_out;  // where to write the seal's public key
  std::optional<std::chrono::seconds> timeout;
  bool tag_output = false;
  /// --stdin: the rank that reads sempirun's standard input (nullopt: none); every other rank
  /// reads /dev/null. As in Open MPI, rank 0 unless told otherwise.
  std::optional<std::uint32_t> stdin_rank = 0;
  bool stdin_given = false;  ///< --stdin was on the command line
  /// How long to wait, from the first enrollment, for every rank to enroll: the ranks'
  /// SEMPI_START_TIMEOUT (set by resolve_start_timeout).
  std::chrono::seconds start_timeout = kDefaultStartTimeout;

  /// The index in `apps` of the context `rank` (below `size`) belongs to.
  [[nodiscard]] std::size_t app_of(std::uint32_t rank) const;
};

enum class LaunchAction { run, help, version };

struct ParsedCommandLine {
  LaunchAction action = LaunchAction::run;
  LaunchOptions options;
};

/// Parses the arguments after argv[0]: options, a program and its arguments, then, after a
/// ':' argument, another context's options and program (mpirun's MPMD form; as there, ':'
/// separates even after '--'). A context without -n gets the slots -H gives this host (the last
/// context that has -H decides, for all of them), else `slots` ranks (clamped to 1..kMaxRanks):
/// mpirun starts one per processor core (sempirun passes usable_cores()). Throws
/// sempi::Error(config) with a one-line message for an unknown flag, a missing or malformed value,
/// a missing program, or a reserved -x name.
ParsedCommandLine parse_launch_options(std::span<const std::string> args, std::uint32_t slots);

/// The job's policy: --policy FILE, or the built-in default. Throws sempi::Error(config).
policy::PolicyDocument load_policy(const LaunchOptions& options);

/// Creates --audit-dir with mode 0700 if missing (no-op without it). Throws sempi::Error(config).
void prepare_audit_dir(const LaunchOptions& options);
/// Throws sempi::Error(config) unless `dir` is UTF-8: the audit directory goes to the ranks in
/// their welcome and into the log's records, both JSON, which holds UTF-8 text only.
void require_utf8_audit_dir(const std::filesystem::path& dir);

/// Opens each --wdir (relative to this process's working directory, as mpirun does; links and
/// ".." as the kernel resolves them), checks that the ranks can change to it, and names it by
/// its absolute path. Throws sempi::Error(config) naming what is wrong.
void resolve_working_dir(LaunchOptions& options);

/// Sets options.start_timeout to the SEMPI_START_TIMEOUT the ranks will see: the last -x for
/// it, else this process's (the longest of the contexts'). Throws sempi::Error(config) for a
/// value that is not a number of seconds, as the ranks would.
void resolve_start_timeout(LaunchOptions& options);

/// True for a variable sempirun sets in each rank's environment (SEMPI_RANK, ...; and Open
/// MPI's OMPI_COMM_WORLD_RANK, ...): -x may not set it, and an inherited value is not passed on.
bool is_set_by_sempirun(std::string_view name);

/// Usage text for --help.
const char* launch_usage() noexcept;

}  // namespace sempi::launch
