#pragma once
// Runs a real job (sempirun and its ranks) as a child process, capturing its standard output and
// standard error apart, bounded by a timeout after which the whole process group is killed. For
// integration tests.
//
// The job runs in a private scratch directory removed afterwards, so what it leaves in its
// working directory (the default ./sempi-audit, a core file) neither piles up in the build tree
// nor depends on that tree's permissions (sempirun refuses a group-writable one for its audit
// log). Paths in argv must therefore be absolute.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.hpp"

namespace sempi::test {

struct JobResult {
  int exit_code = -1;  // as a shell reports it: 128+N for signal N
  int signal = 0;      // the signal that killed it, 0 if it exited
  std::string output;  // standard output, then standard error
  std::string standard_output;
  std::string standard_error;
  double seconds = 0;
};

namespace detail {

inline int anonymous_file() {
  char path[] = "/tmp/sempi-job-XXXXXX";
  const int fd = ::mkstemp(path);
  ::unlink(path);
  return fd;
}

inline std::string read_from_start(int fd) {
  std::string text;
  ::lseek(fd, 0, SEEK_SET);
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

}  // namespace detail

/// Starts argv[0] with argv; `during` (if set) runs with the child's pid once it started.
inline JobResult run_job(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                         const std::function<void(pid_t)>& during = nullptr) {
  const int out = detail::anonymous_file();
  const int err = detail::anonymous_file();
  const TempDir scratch;
  std::vector<char*> args;  // built before fork: the child only calls async-signal-safe functions
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::chdir(scratch.path().c_str()) != 0) {
      std::perror("chdir to the job's scratch directory");
      ::_exit(127);
    }
    ::execv(args[0], args.data());
    std::perror("execv");
    ::_exit(127);
  }
  if (during) during(pid);
  JobResult result;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() - start > timeout) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      result.standard_error = "[test harness: job killed after timeout]\n";
      break;
    }
    // Polling the child's exit: the harness has nothing to synchronise with but the clock.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result.standard_output = detail::read_from_start(out);
  result.standard_error += detail::read_from_start(err);
  result.output = result.standard_output + result.standard_error;
  return result;
}

}  // namespace sempi::test
