// `sempirun`: starts an MPI-style job of N ranks with a job CA that lives only in this process.
// All the logic is in src/launch; this file maps it onto argv, stdout/stderr and exit codes.

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/cpus.hpp"
#include "common/printable.hpp"
#include "launch/launch_options.hpp"
#include "launch/launcher.hpp"
#include "sempi/version.hpp"

namespace {

bool dumps_core(int signo) { return signo == SIGQUIT || signo == SIGXCPU || signo == SIGXFSZ; }

// The message quotes the command line: escaped, so that an argument cannot send the terminal
// control sequences.
int usage_error(const std::string& message) {
  std::fprintf(stderr, "sempirun: error: %s\n(run 'sempirun --help' for usage)\n",
               sempi::printable_lines(message).c_str());
  return sempi::launch::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sempi::launch;
  const std::vector<std::string> args(argv + 1, argv + argc);

  ParsedCommandLine parsed;
  try {
    parsed = parse_launch_options(args, static_cast<std::uint32_t>(sempi::usable_cores()));
  } catch (const std::exception& e) {
    return usage_error(e.what());
  }
  if (parsed.action == LaunchAction::help) {
    std::fputs(launch_usage(), stdout);
    return 0;
  }
  if (parsed.action == LaunchAction::version) {
    std::printf("sempirun (sempi) %s\n", sempi::kVersionString);
    return 0;
  }

  // Configuration errors are found before any rank starts.
  sempi::policy::PolicyDocument policy;
  try {
    policy = load_policy(parsed.options);
    resolve_start_timeout(parsed.options);
    resolve_working_dir(parsed.options);
    prepare_audit_dir(parsed.options);
  } catch (const std::exception& e) {
    // A policy error quotes the file's names and bytes: escaped for the terminal.
    std::fprintf(stderr, "sempirun: error: %s\n", sempi::printable_lines(e.what()).c_str());
    return kExitUsage;
  }

  int status = kExitUsage;
  int interrupted_by = 0;
  try {
    Launcher launcher(std::move(parsed.options), std::move(policy));
    status = launcher.run();
    interrupted_by = launcher.interrupted_by();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sempirun: error: %s\n", sempi::printable_lines(e.what()).c_str());
    return kExitUsage;
  }
  // Ended by a signal, with the job torn down and its log sealed: die of that signal, so that
  // a shell running sempirun in a loop stops on Ctrl-C too (it goes on when its child merely
  // exited with 130). Not for signals that would dump core: 128 + N says as much.
  if (interrupted_by != 0 && !dumps_core(interrupted_by)) {
    std::fflush(nullptr);
    std::signal(interrupted_by, SIG_DFL);
    sigset_t just_this;
    sigemptyset(&just_this);
    sigaddset(&just_this, interrupted_by);
    ::pthread_sigmask(SIG_UNBLOCK, &just_this, nullptr);
    std::raise(interrupted_by);
  }
  return status;
}
