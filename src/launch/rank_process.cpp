#include "launch/rank_process.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include "launch/blocked_signals.hpp"
#include "launch/program_path.hpp"
#include "sempi/error.hpp"

namespace sempi::launch {
namespace {

using transport::UniqueFd;

[[noreturn]] void throw_errno(const std::string& what) {
  throw Error(ErrorClass::io, what + ": " + std::strerror(errno));
}

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("cannot create a pipe");
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw_errno("cannot make a descriptor non-blocking");
  }
}

// What the child reports through the close-on-exec pipe when it cannot exec.
struct ChildFailure {
  int stage;  // kStageSetup, kStageWorkingDir or kStageExec
  int error;  // errno
};
constexpr int kStageSetup = 1;
constexpr int kStageExec = 2;
constexpr int kStageWorkingDir = 3;

// Child side of a failure: report it to the launcher and exit as a shell would.
[[noreturn]] void child_fail(int report, int stage) {
  const ChildFailure failure{stage, errno};
  ssize_t ignored = ::write(report, &failure, sizeof failure);
  (void)ignored;
  ::_exit(127);
}

// Runs in the child between fork and exec: system calls only (no allocation, no locks).
[[noreturn]] void exec_child(pid_t launcher, int in, int out, int err, int bootstrap, int report,
                             int working_dir, const char* program, char* const* argv,
                             char* const* envp, const rlimit* nofile,
                             std::uint64_t ignored_signals) {
  ::setpgid(0, 0);
  // The launcher controls teardown; if it dies (even by SIGKILL), so does the rank.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(report, kStageSetup);
  if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl took effect
  // First: the descriptor may be one of 0-3, which the moves below replace. A directory removed
  // since it was opened can still be entered, but nothing is found or made in it: gone.
  if (working_dir >= 0) {
    if (::fchdir(working_dir) != 0) child_fail(report, kStageWorkingDir);
    struct stat here {};
    if (::stat(".", &here) != 0) child_fail(report, kStageWorkingDir);
    if (here.st_nlink == 0) {
      errno = ENOENT;
      child_fail(report, kStageWorkingDir);
    }
  }

  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    const bool ignored = sig < 64 && ((ignored_signals >> sig) & 1u) != 0;
    ::sigaction(sig, ignored ? &ign : &dfl, nullptr);  // SIGPIPE was ignored by sempirun itself
  }

  // Move the four descriptors above 0-3 first, so the dup2 calls cannot clobber each other.
  const int src[4] = {in, out, err, bootstrap};
  int high[4];
  for (int i = 0; i < 4; ++i) {
    high[i] = ::fcntl(src[i], F_DUPFD_CLOEXEC, 10);
    if (high[i] < 0) child_fail(report, kStageSetup);
  }
  const int high_report = ::fcntl(report, F_DUPFD_CLOEXEC, 10);
  if (high_report < 0) child_fail(report, kStageSetup);
  report = high_report;
  // dup2 clears close-on-exec on the target: exactly fds 0-3 survive exec.
  for (int i = 0; i < 4; ++i) {
    if (::dup2(high[i], i) < 0) child_fail(report, kStageSetup);
  }
  // Everything above fd 3 closes at exec, whatever the launcher inherited from its own parent.
  if (::close_range(4, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    rlimit limit{};
    const rlim_t top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                           ? limit.rlim_cur
                           : 65536;
    for (rlim_t fd = 4; fd < top; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  }
  // The program's own descriptor limit, restored last: the launcher raised its limit for the
  // three descriptors it holds per rank, and the moves above need numbers beyond them. A limit
  // below a descriptor still open is allowed; those above 3 close at exec anyway.
  if (nofile != nullptr) ::setrlimit(RLIMIT_NOFILE, nofile);
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);

  // `program` has a slash: no search. execvpe still runs a script without #! with /bin/sh.
  ::execvpe(program, argv, envp);
  child_fail(report, kStageExec);
}

}  // namespace

ExitStatus ExitStatus::from_wait_status(int status) {
  if (WIFSIGNALED(status)) return {Kind::signaled, WTERMSIG(status)};
  return {Kind::exited, WIFEXITED(status) ? WEXITSTATUS(status) : 1};
}

std::string ExitStatus::describe() const {
  if (kind == Kind::exited) return "exited with status " + std::to_string(value);
  const char* name = ::strsignal(value);
  return "was killed by signal " + std::to_string(value) + " (" +
         (name != nullptr ? name : "unknown") + ")";
}

RankProcess RankProcess::spawn(const SpawnRequest& request) {
  if (request.argv.empty()) throw Error(ErrorClass::arg, "spawn: empty argv");
  if (request.program.empty()) throw Error(ErrorClass::arg, "spawn: no program to exec");

  // Everything the child needs is prepared before fork: the child must not allocate.
  const std::string& program = request.program;
  std::vector<char*> argv;
  for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    throw_errno("cannot create the bootstrap socket");
  }
  UniqueFd launcher_end(pair[0]);
  UniqueFd rank_end(pair[1]);
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  Pipe report = make_pipe();  // close-on-exec: EOF means exec succeeded, 4 bytes mean errno
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) throw_errno("cannot open /dev/null");

  const pid_t launcher = ::getpid();
  pid_t pid = -1;
  {
    // Every signal blocked for the duration of fork(), so no launcher handler runs in the
    // child before it has reset its dispositions.
    const BlockedSignals blocked(all_signals());
    pid = ::fork();
    if (pid == 0) {
      exec_child(launcher, request.stdin_fd >= 0 ? request.stdin_fd : dev_null.get(),
                 out.write.get(), err.write.get(), rank_end.get(), report.write.get(),
                 request.working_dir_fd, program.c_str(), argv.data(), envp.data(),
                 request.nofile_limit ? &*request.nofile_limit : nullptr, request.ignored_signals);
    }
  }
  if (pid < 0) throw_errno("cannot fork");
  // Both sides call setpgid so the group exists before either relies on it.
  ::setpgid(pid, pid);

  rank_end.reset();
  out.write.reset();
  err.write.reset();
  report.write.reset();
  dev_null.reset();

  // Wait (bounded) for the exec report. The child does a few system calls before exec, so the
  // bound is only ever reached if it was stopped; it is then treated as started.
  ChildFailure failure{};
  std::size_t got = 0;
  const auto deadline = transport::Clock::now() + std::chrono::seconds(30);
  while (got < sizeof failure) {
    if (transport::wait_fd(report.read.get(), transport::WaitFor::read, deadline)) break;
    const ssize_t n =
        ::read(report.read.get(), reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    break;  // EOF: exec succeeded (the pipe closed on exec)
  }
  if (got == sizeof failure) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (failure.stage == kStageExec) {
      // The file was there a moment ago: ENOENT now is most likely its interpreter.
      throw CannotExecute(
          request.argv[0], failure.error, kExitNotExecutable,
          failure.error == ENOENT ? " (or the interpreter its #! line names)" : std::string());
    }
    if (failure.stage == kStageWorkingDir) {  // not one to enter, or removed since it was opened
      throw Error(ErrorClass::config, "cannot run " + request.argv[0] + " in " +
                                          request.working_dir.string() + ": " +
                                          std::strerror(failure.error));
    }
    throw Error(ErrorClass::io, "cannot set up the process for " + request.argv[0] + ": " +
                                    std::strerror(failure.error));
  }

  set_nonblocking(launcher_end.get());
  set_nonblocking(out.read.get());
  set_nonblocking(err.read.get());
  RankProcess rank;
  rank.pid_ = pid;
  rank.bootstrap_ = std::move(launcher_end);
  rank.out_ = std::move(out.read);
  rank.err_ = std::move(err.read);
  return rank;
}

void RankProcess::signal(int signo) const noexcept {
  if (pid_ <= 0) return;
  ::kill(-pid_, signo);
  ::kill(pid_, signo);
}

void RankProcess::forward(int signo) const noexcept {
  if (pid_ <= 0) return;
  ::kill(::getpgid(pid_) == pid_ ? -pid_ : pid_, signo);
}

}  // namespace sempi::launch
