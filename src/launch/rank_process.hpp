#pragma once
// Starting one rank: fork + exec with a private bootstrap channel, stdout/stderr pipes back to
// the launcher, stdin from /dev/null or the launcher's own, its own process group, and
// PR_SET_PDEATHSIG so a rank never outlives a killed launcher. Also decodes how a rank ended.
//
// Descriptor hygiene: the child keeps exactly fds 0-3; everything else it inherited (in
// particular the other ranks' bootstrap sockets, which would let a rank impersonate another
// during enrollment) is closed by exec.

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "transport/socket.hpp"

namespace sempi::launch {

/// The descriptor number of the bootstrap socket inside every rank (SEMPI_BOOTSTRAP_FD).
inline constexpr int kRankBootstrapFd = 3;

/// How a process ended, from a waitpid() status.
struct ExitStatus {
  enum class Kind { exited, signaled };
  Kind kind = Kind::exited;
  int value = 0;  ///< exit code, or signal number

  static ExitStatus from_wait_status(int status);

  [[nodiscard]] bool success() const noexcept { return kind == Kind::exited && value == 0; }
  /// The shell convention: the exit code, or 128 + signal number.
  [[nodiscard]] int shell_status() const noexcept {
    return kind == Kind::exited ? value : 128 + value;
  }
  /// "exited with status 3" / "was killed by signal 9 (Killed)".
  [[nodiscard]] std::string describe() const;
};

struct SpawnRequest {
  std::vector<std::string> argv;
  /// The file to exec: find_program's answer for argv[0], in env's PATH and working_dir.
  std::string program;
  std::vector<std::string> env;   ///< complete environment, "NAME=VALUE"
  /// RLIMIT_NOFILE to restore in the child (the launcher raises its own soft limit).
  std::optional<rlimit> nofile_limit;
  /// Bit N set: signal N stays ignored in the child (as sempirun inherited it); every other
  /// signal gets its default action.
  std::uint64_t ignored_signals = 0;
  /// A descriptor of the launcher's to be the rank's stdin; -1: /dev/null.
  int stdin_fd = -1;
  /// A descriptor (O_PATH will do) of the directory the rank runs in, where a relative argv[0]
  /// is found; -1: the launcher's. The child changes to it by descriptor, so a rename of the
  /// directory or of a parent after it was opened cannot move the rank elsewhere.
  int working_dir_fd = -1;
  /// That directory's name, for messages.
  std::filesystem::path working_dir;
};

class RankProcess {
 public:
  /// Starts the process and waits until it has exec'd. Throws CannotExecute ("cannot execute
  /// PROGRAM: reason") if the program is not found or exec fails (the failed child is
  /// reaped), or sempi::Error(io) if a pipe, socket or fork fails.
  static RankProcess spawn(const SpawnRequest& request);

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// Launcher ends, all non-blocking and close-on-exec.
  transport::UniqueFd& bootstrap() noexcept { return bootstrap_; }
  transport::UniqueFd& out() noexcept { return out_; }
  transport::UniqueFd& err() noexcept { return err_; }

  /// Sends `signo` to the rank's process group (its children too) and to the rank itself, in
  /// case it left the group. Safe to call after the rank exited but before it was reaped.
  void signal(int signo) const noexcept;
  /// Passes `signo` on once: to the rank's process group while the rank leads it, else to the
  /// rank alone (a handler must not run twice for one signal sent to the job).
  void forward(int signo) const noexcept;

 private:
  RankProcess() = default;
  pid_t pid_ = -1;
  transport::UniqueFd bootstrap_;
  transport::UniqueFd out_;
  transport::UniqueFd err_;
};

}  // namespace sempi::launch
