#pragma once
// The launcher's event loop: starts the ranks, serves enrollment and finalize over their
// bootstrap channels, forwards their output, and tears the job down on the first failure, a
// timeout or an interrupt.
//
// One event-loop thread; poll() over the bootstrap sockets, the output pipes and a self-pipe fed
// by the signal handlers (SIGCHLD, the job-ending signals, and SIGUSR1/2 passed on to the ranks). Every wait has a deadline (teardown: abort
// message, SIGTERM after 2 s, SIGKILL after 2 more). Our own stdout and stderr are written by
// one OutputWriter thread each, so a reader that stops reading holds up none of that.
//
// Thread safety: run() installs process-wide signal handlers and forks; one Launcher per process,
// run() called once, from a process with no other threads.

#include <chrono>

#include "launch/launch_options.hpp"
#include "policy/policy_document.hpp"

namespace sempi::launch {

/// Grace periods of the teardown (abort message -> SIGTERM -> SIGKILL) and of the final drain
/// of output pipes still held open by a rank's leftover children.
inline constexpr std::chrono::seconds kTermGrace{2};
inline constexpr std::chrono::seconds kKillGrace{2};
inline constexpr std::chrono::seconds kDrainGrace{2};

class Launcher {
 public:
  Launcher(LaunchOptions options, policy::PolicyDocument policy);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  /// Runs the job to completion and returns sempirun's exit status (see launch_usage()).
  /// Diagnostics go to stderr as "sempirun: ...". Throws only if the job cannot be set up
  /// (e.g. the job CA cannot be created), before any rank started.
  int run();
  /// After run(): the signal to sempirun that ended the job, 0 if none did. Its exit status is
  /// then 128 + the signal; main re-raises it once the launcher is gone, as a shell expects.
  [[nodiscard]] int interrupted_by() const noexcept { return interrupted_by_; }

 private:
  class Job;
  LaunchOptions options_;
  policy::PolicyDocument policy_;
  int interrupted_by_ = 0;
};

}  // namespace sempi::launch
