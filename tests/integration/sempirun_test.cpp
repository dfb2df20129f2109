// End-to-end tests of the real `sempirun` binary: real processes, real exit statuses, real
// signals. Ranks are `sh -c` scripts or the enroll_probe program (bootstrap protocol by hand).
//
// Synchronisation is by output, never by sleeping: a test that must act while ranks run waits
// for the ranks' "ready" lines. Every run has a hard deadline after which the test fails.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cpus.hpp"
#include "common/hex.hpp"
#include "policy/policy_document.hpp"
#include "transport/socket.hpp"

#include "support/affinity.hpp"
#include "support/temp_dir.hpp"

#ifndef SEMPIRUN_PATH
#error "SEMPIRUN_PATH must be defined by the build"
#endif
#ifndef ENROLL_PROBE_PATH
#error "ENROLL_PROBE_PATH must be defined by the build"
#endif
#ifndef P2P_CHECK_PATH
#error "P2P_CHECK_PATH must be defined by the build"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Bound on any single sempirun run; far above what any test needs, even on a loaded machine.
constexpr auto kRunDeadline = 60s;
// A job torn down after a failure must end well before its ranks' `sleep 300`.
constexpr auto kPromptly = 30s;

struct RunResult {
  int status = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
  Clock::duration elapsed{};
  bool core_dumped = false;  // killed by a signal, and the kernel wrote a core dump
  int terminal_unread = -1;  // bytes typed at the terminal (ProcessSetup) that nobody read
};

struct RunOptions {
  std::vector<std::string> env;  // extra NAME=VALUE for sempirun itself
  // Called whenever stdout grows; may signal sempirun (its pid is passed).
  std::function<void(pid_t, const std::string& out)> on_output;
  // While this returns true (given stderr so far), stdout is not read: a reader that stalls.
  std::function<bool(const std::string& err)> hold_stdout;
  // Called whenever stderr grows; may signal sempirun.
  std::function<void(pid_t, const std::string& err)> on_error_output;
  // Once this returns true (given stdout so far), stdout is closed: a reader that went away,
  // as `head -1` does.
  std::function<bool(const std::string& out)> close_stdout;
};

// Where and how sempirun's process starts.
struct ProcessSetup {
  fs::path cwd;                 // empty: a scratch directory (see support/job_runner.hpp)
  bool unlimited_core = false;  // no limit on the size of a core dump
  std::vector<int> ignored_signals;  // ignored when sempirun starts, as nohup does
  bool own_process_group = false;    // a job of its own, as a shell with job control starts it
  bool only_one_cpu = false;         // sempirun may run on its first usable CPU only (taskset)
  bool stdin_closed = false;         // sempirun starts without a descriptor 0 (as `<&-`)
  // sempirun's stdin: /dev/null by default, else a pipe holding this text (then closed), or
  // a terminal (a pseudo-terminal's slave side) at which `typed` is typed.
  std::optional<std::string> stdin_text{};
  enum class Terminal {
    none,
    plain,       // a terminal, but not sempirun's controlling one
    foreground,  // its controlling terminal, sempirun in the foreground (a session of its own)
    background,  // its controlling terminal, sempirun in a background job of that session
    // As background, until SIGUSR1 to sempirun's parent (the pid run_sempirun passes on) brings
    // the job to the foreground, as `fg` does.
    background_then_foreground,
  };
  Terminal stdin_terminal = Terminal::none;
  std::string typed{};
};

// In the child: makes `terminal` the controlling terminal of a new session, and for a
// background kind starts sempirun in a second process group of it while this process, the
// session's leader and foreground, waits for it (and SIGUSR1) and exits as it did.
void become_terminal_session(int terminal, ProcessSetup::Terminal kind) {
  using Terminal = ProcessSetup::Terminal;
  if (::setsid() < 0 || ::ioctl(terminal, TIOCSCTTY, 0) != 0) ::_exit(127);
  if (kind == Terminal::foreground) return;
  sigset_t awaited;
  sigemptyset(&awaited);
  sigaddset(&awaited, SIGCHLD);
  sigaddset(&awaited, SIGUSR1);
  ::sigprocmask(SIG_BLOCK, &awaited, nullptr);  // sempirun unblocks what it handles
  const pid_t job = ::fork();
  if (job < 0) ::_exit(127);
  if (job == 0) {
    if (::setpgid(0, 0) != 0) ::_exit(127);
    return;
  }
  ::setpgid(job, job);  // both sides: the group exists before tcsetpgrp needs it
  if (kind == Terminal::background_then_foreground) {
    int signo = 0;
    while (::sigwait(&awaited, &signo) == 0 && signo != SIGCHLD) {
      ::signal(SIGTTOU, SIG_IGN);
      if (::tcsetpgrp(terminal, job) != 0) ::_exit(126);
    }
  }
  int status = 0;
  while (::waitpid(job, &status, 0) < 0 && errno == EINTR) {
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

RunOptions with_env(std::vector<std::string> env) {
  RunOptions options;
  options.env = std::move(env);
  return options;
}

RunOptions with_output(std::function<void(pid_t, const std::string&)> on_output) {
  RunOptions options;
  options.on_output = std::move(on_output);
  return options;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

RunResult run_sempirun(const std::vector<std::string>& args, const RunOptions& options = {},
                       const ProcessSetup& setup = {}) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {};
  }
  std::vector<std::string> argv_storage = {SEMPIRUN_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The test's own settings replace inherited ones (getenv would find the first of two).
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const bool replaced = std::any_of(options.env.begin(), options.env.end(), [&](const auto& o) {
      return name_of(o) == name_of(entry);
    });
    if (!replaced) env_storage.push_back(entry);
  }
  env_storage.insert(env_storage.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  const sempi::test::TempDir scratch;
  const fs::path& cwd = setup.cwd.empty() ? scratch.path() : setup.cwd;
  sempi::transport::UniqueFd stdin_source(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  sempi::transport::UniqueFd terminal;  // the pseudo-terminal's master side, kept open
  if (setup.stdin_text) {
    int in_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return {};
    }
    stdin_source.reset(in_pipe[0]);
    const sempi::transport::UniqueFd writer(in_pipe[1]);
    // Within a pipe's capacity: written whole before sempirun starts, then end of file.
    EXPECT_EQ(::write(writer.get(), setup.stdin_text->data(), setup.stdin_text->size()),
              static_cast<ssize_t>(setup.stdin_text->size()));
  } else if (setup.stdin_terminal != ProcessSetup::Terminal::none) {
    terminal.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    const char* slave =
        terminal.valid() && ::grantpt(terminal.get()) == 0 && ::unlockpt(terminal.get()) == 0
            ? ::ptsname(terminal.get())
            : nullptr;
    if (slave == nullptr) {
      ADD_FAILURE() << "pseudo-terminal: " << std::strerror(errno);
      return {};
    }
    stdin_source.reset(::open(slave, O_RDONLY | O_NOCTTY | O_CLOEXEC));
  }
  using Terminal = ProcessSetup::Terminal;
  // Typed ahead: the terminal holds it until it is read, from sempirun's first look at it.
  if (terminal.valid() && !setup.typed.empty()) {
    EXPECT_EQ(::write(terminal.get(), setup.typed.data(), setup.typed.size()),
              static_cast<ssize_t>(setup.typed.size()));
  }
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (setup.stdin_closed) {
      ::close(0);
    } else {
      ::dup2(stdin_source.get(), 0);
    }
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (::chdir(cwd.c_str()) != 0) ::_exit(127);
    if (setup.unlimited_core) {
      const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
      if (::setrlimit(RLIMIT_CORE, &unlimited) != 0) ::_exit(127);
    }
    for (const int sig : setup.ignored_signals) ::signal(sig, SIG_IGN);
    if (setup.own_process_group && ::setpgid(0, 0) != 0) ::_exit(127);
    if (setup.only_one_cpu && !sempi::test::keep_only_first_cpu()) ::_exit(127);
    if (setup.stdin_terminal != Terminal::none && setup.stdin_terminal != Terminal::plain) {
      become_terminal_session(0, setup.stdin_terminal);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  RunResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_pipes = 2;
  const auto deadline = start + kRunDeadline;
  bool timed_out = false;
  while (open_pipes > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= 0ms) {
      timed_out = true;
      break;
    }
    // A negative descriptor is one poll() skips. Held only while stderr is open: once it is
    // closed, sempirun is gone and its stdout's end is to be read.
    const bool hold = options.hold_stdout && fds[1].fd >= 0 && options.hold_stdout(result.err);
    if (fds[0].fd >= 0 && hold) fds[0].fd = ~fds[0].fd;
    if (fds[0].fd < -1 && !hold) fds[0].fd = ~fds[0].fd;
    const int rc = ::poll(fds, 2, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<std::size_t>(n));
        if (i == 0 && options.on_output) options.on_output(pid, result.out);
        if (i == 1 && options.on_error_output) options.on_error_output(pid, result.err);
        if (i == 0 && options.close_stdout && options.close_stdout(result.out)) {
          ::close(fds[0].fd);
          fds[0].fd = -1;
          --open_pipes;
        }
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  if (timed_out) {
    ::kill(pid, SIGKILL);
    ADD_FAILURE() << "sempirun did not finish within the deadline; stderr so far:\n" << result.err;
  }
  for (auto& p : fds) {
    if (p.fd < -1) p.fd = ~p.fd;  // held
    if (p.fd >= 0) ::close(p.fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.elapsed = Clock::now() - start;
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.core_dumped = WIFSIGNALED(status) && WCOREDUMP(status);
  if (terminal.valid()) ::ioctl(stdin_source.get(), FIONREAD, &result.terminal_unread);
  return result;
}

std::string describe(const RunResult& r) {
  return "status " + std::to_string(r.status) + "\n--- stdout:\n" + r.out + "--- stderr:\n" + r.err;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

using sempi::test::TempDir;

// Alive and not a zombie (a killed grandchild is reaped by init, maybe a moment later).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// The state letter of /proc/PID/stat: R, S, T (stopped), Z...; '?' if there is no such process.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() ? text[paren + 2] : '?';
}

// Polls `condition` until it holds, for at most kPromptly: for states that no event announces
// (another process stopped).
bool eventually(const std::function<bool()>& condition) {
  const auto deadline = Clock::now() + kPromptly;
  while (!condition()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Reads the pids the ranks wrote and checks that none of them is still alive.
void expect_all_gone(const fs::path& dir, int expected) {
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.path().filename().string().starts_with("pid.")) continue;
    std::ifstream in(entry.path());
    pid_t pid = 0;
    in >> pid;
    ASSERT_GT(pid, 0) << entry.path();
    ++seen;
    EXPECT_FALSE(alive(pid)) << "rank process " << pid << " outlived sempirun";
  }
  EXPECT_EQ(seen, expected);
}

// Sends `signo` once stdout holds `count` lines saying "ready".
std::function<void(pid_t, const std::string&)> signal_when_ready(int count, int signo) {
  return [count, signo, sent = false](pid_t pid, const std::string& out) mutable {
    const auto lines = lines_of(out);
    if (!sent && std::count(lines.begin(), lines.end(), "ready") >= count) {
      sent = true;
      ::kill(pid, signo);
    }
  };
}

// --- plain programs ---------------------------------------------------------------------------

TEST(Sempirun, RunsEveryRankWithItsEnvironment) {
  const auto r = run_sempirun(
      {"-n", "3", "sh", "-c",
       "echo \"$SEMPI_RANK $SEMPI_SIZE $SEMPI_JOB_ID $SEMPI_LOCAL_RANK $SEMPI_LOCAL_SIZE "
       "$SEMPI_BOOTSTRAP_FD\""});
  ASSERT_EQ(r.status, 0) << describe(r);
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << describe(r);
  std::set<std::string> ranks;
  std::set<std::string> jobs;
  const std::regex pattern("([0-9]+) 3 ([0-9a-f]{32}) ([0-9]+) 3 3");
  for (const auto& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, pattern)) << line;
    EXPECT_EQ(m[1], m[3]) << "local rank equals rank on one host";
    ranks.insert(m[1]);
    jobs.insert(m[2]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
  EXPECT_EQ(jobs.size(), 1u) << "one job id for all ranks";
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// As mpirun: without -n, one rank per processor core sempirun may use; a smaller affinity
// mask (taskset, a cpuset) means fewer ranks.
TEST(Sempirun, WithoutRankCountOneRankPerUsableCore) {
  const auto r = run_sempirun({"sh", "-c", "echo $SEMPI_SIZE"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const std::string size = std::to_string(sempi::usable_cores());
  EXPECT_EQ(lines_of(r.out), std::vector<std::string>(sempi::usable_cores(), size)) << describe(r);
  ProcessSetup one_cpu;
  one_cpu.only_one_cpu = true;
  const auto one = run_sempirun({"sh", "-c", "echo $SEMPI_SIZE"}, {}, one_cpu);
  ASSERT_EQ(one.status, 0) << describe(one);
  EXPECT_EQ(one.out, "1\n");
}

TEST(Sempirun, DifferentJobsGetDifferentIds) {
  const auto a = run_sempirun({"sh", "-c", "echo $SEMPI_JOB_ID"});
  const auto b = run_sempirun({"sh", "-c", "echo $SEMPI_JOB_ID"});
  ASSERT_EQ(a.status, 0);
  ASSERT_EQ(b.status, 0);
  EXPECT_NE(a.out, b.out);
}

TEST(Sempirun, ProgramThatNeverEnrollsJustRuns) {
  const auto r = run_sempirun({"-n", "2", "true"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

TEST(Sempirun, RanksGetOnlyTheirOwnDescriptors) {
  // fds 0-3 and the one `ls` opens to list them; nothing from the launcher or other ranks.
  const auto r = run_sempirun({"-n", "3", "sh", "-c", "ls /proc/self/fd | tr '\\n' ' '; echo"});
  ASSERT_EQ(r.status, 0) << describe(r);
  for (const auto& line : lines_of(r.out)) EXPECT_EQ(line, "0 1 2 3 4 ") << describe(r);
}

// Each rank says what its stdin held, or that it is /dev/null.
const std::vector<std::string> kShowStdin = {
    "sh", "-c",
    "if [ \"$(readlink /proc/self/fd/0)\" = /dev/null ]; then echo \"$SEMPI_RANK: null\"; "
    "else echo \"$SEMPI_RANK: $(tr '\\n' ' ')\"; fi"};

std::vector<std::string> show_stdin(std::vector<std::string> options) {
  options.insert(options.end(), kShowStdin.begin(), kShowStdin.end());
  return options;
}

std::multiset<std::string> lines_set(const std::string& text) {
  const auto lines = lines_of(text);
  return {lines.begin(), lines.end()};
}

// Open MPI's names too, for what reads them before MPI_Init; inherited values do not leak in.
TEST(Sempirun, RanksSeeOpenMpisVariablesToo) {
  const auto r = run_sempirun(
      {"-n", "3", "sh", "-c",
       "echo \"$SEMPI_RANK: $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_SIZE "
       "$OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE $OMPI_COMM_WORLD_NODE_RANK "
       "$OMPI_UNIVERSE_SIZE\""},
      with_env({"OMPI_COMM_WORLD_RANK=99", "OMPI_UNIVERSE_SIZE=99"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_set(r.out),
            (std::multiset<std::string>{"0: 0 3 0 3 0 3", "1: 1 3 1 3 1 3", "2: 2 3 2 3 2 3"}))
      << describe(r);
}

TEST(Sempirun, RankZeroReadsStdinAndTheOthersDevNull) {
  ProcessSetup setup;
  setup.stdin_text = "first line\nsecond\n";
  const auto r = run_sempirun(show_stdin({"-n", "3"}), {}, setup);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_set(r.out),
            (std::multiset<std::string>{"0: first line second ", "1: null", "2: null"}))
      << describe(r);
}

TEST(Sempirun, StdinGoesToTheRankNamed) {
  ProcessSetup setup;
  setup.stdin_text = "data\n";
  const auto r = run_sempirun(show_stdin({"-n", "3", "--stdin", "2"}), {}, setup);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_set(r.out), (std::multiset<std::string>{"0: null", "1: null", "2: data "}))
      << describe(r);

  const auto none = run_sempirun(show_stdin({"-n", "2", "--stdin=none"}), {}, setup);
  ASSERT_EQ(none.status, 0) << describe(none);
  EXPECT_EQ(lines_set(none.out), (std::multiset<std::string>{"0: null", "1: null"}))
      << describe(none);
}

// A rank reading the terminal would be stopped (it leads a process group of its own):
// sempirun reads it and passes on what is typed, to the end of input (Ctrl-D).
TEST(Sempirun, WhatIsTypedAtTheTerminalGoesToTheStdinRank) {
  using Terminal = ProcessSetup::Terminal;
  ProcessSetup setup;
  setup.typed = "typed line\n\x04";  // Ctrl-D at the start of a line: end of input
  for (const auto kind : {Terminal::foreground, Terminal::plain}) {
    setup.stdin_terminal = kind;
    // Were the terminal given to no rank, or the rank stopped, --timeout would end it.
    const auto r = run_sempirun(show_stdin({"-n", "2", "--timeout", "20"}), {}, setup);
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_EQ(lines_set(r.out), (std::multiset<std::string>{"0: typed line ", "1: null"}))
        << describe(r);
    EXPECT_EQ(r.terminal_unread, 0);
  }

  setup.stdin_terminal = Terminal::foreground;
  const auto named =
      run_sempirun(show_stdin({"-n", "3", "--timeout", "20", "--stdin", "1"}), {}, setup);
  ASSERT_EQ(named.status, 0) << describe(named);
  EXPECT_EQ(lines_set(named.out),
            (std::multiset<std::string>{"0: null", "1: typed line ", "2: null"}))
      << describe(named);
}

// A background job must not read the terminal (it would be stopped), nor spin on it: what is
// typed stays there for the shell, and the job runs to its end.
TEST(Sempirun, InTheBackgroundTheTerminalIsLeftAlone) {
  ProcessSetup setup;
  setup.stdin_terminal = ProcessSetup::Terminal::background;
  setup.typed = "for the shell\n";
  const auto r = run_sempirun(
      {"-n", "2", "--timeout", "20", "sh", "-c", "echo \"$SEMPI_RANK: done\""}, {}, setup);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_set(r.out), (std::multiset<std::string>{"0: done", "1: done"})) << describe(r);
  EXPECT_EQ(r.terminal_unread, static_cast<int>(setup.typed.size()));
}

// Started in the background, the job reads nothing until it is in the foreground; then what was
// typed reaches its rank (without a signal to tell sempirun: within a second).
TEST(Sempirun, ABackgroundJobReadsTheTerminalOnceInTheForeground) {
  ProcessSetup setup;
  setup.stdin_terminal = ProcessSetup::Terminal::background_then_foreground;
  setup.typed = "typed line\n\x04";
  bool moved = false;
  const auto r = run_sempirun(show_stdin({"-n", "2", "--timeout", "20"}),
                              with_output([&moved](pid_t session_leader, const std::string& out) {
                                // Rank 1 runs: so has sempirun's event loop, in the background.
                                if (!moved && contains(out, "1: null")) {
                                  moved = true;
                                  ::kill(session_leader, SIGUSR1);
                                }
                              }),
                              setup);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_TRUE(moved);
  EXPECT_EQ(lines_set(r.out), (std::multiset<std::string>{"0: typed line ", "1: null"}))
      << describe(r);
}

// A rank's stdout is line-buffered, as under mpirun (which gives ranks a terminal): a line
// printed without a flush arrives while the rank runs, not when it exits.
TEST(Sempirun, ARanksLinesArriveAsItPrintsThem) {
  bool signalled = false;
  const auto r = run_sempirun(
      {"-n", "2", "--timeout", "60", P2P_CHECK_PATH, "progressline"},
      with_output([&signalled](pid_t sempirun, const std::string& out) {
        if (!signalled && contains(out, "rank 0 progress") && contains(out, "rank 1 progress")) {
          signalled = true;
          ::kill(sempirun, SIGUSR1);  // forwarded to the ranks
        }
      }));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_TRUE(signalled) << describe(r);
}

TEST(Sempirun, ArgumentsPassUntouched) {
  const auto r = run_sempirun({"-n", "1", "--", "sh", "-c", "printf '<%s>' \"$@\"; echo", "sh",
                               "-n", "5", "--help", "a b", ""});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "<-n><5><--help><a b><>\n");
}

TEST(Sempirun, TagOutput) {
  const auto r = run_sempirun({"-n", "2", "--tag-output", "sh", "-c",
                               "echo out $SEMPI_RANK; echo err $SEMPI_RANK >&2; printf tail"});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto out = lines_of(r.out);
  auto err = lines_of(r.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] out 0", "[rank 0] tail", "[rank 1] out 1",
                                           "[rank 1] tail"}));
  EXPECT_EQ(err, (std::vector<std::string>{"[rank 0] err 0", "[rank 1] err 1"}));
}

// A line without its newline (a prompt, a progress bar) is not held until the rank ends it:
// with several ranks it goes out after a short wait, and lines still never mix.
TEST(Sempirun, APartialLineIsForwardedBeforeItsNewline) {
  bool both_seen = false;
  const auto r = run_sempirun(
      {"-n", "2", "--tag-output", "sh", "-c",
       "trap 'echo \" done\"; exit 0' USR1; printf 'working'; "
       "i=0; while [ $i -lt 300 ]; do sleep 0.1 & wait $!; i=$((i+1)); done; echo ' too late'"},
      with_output([&](pid_t pid, const std::string& out) {
        if (!both_seen && contains(out, "[rank 0] working") && contains(out, "[rank 1] working")) {
          both_seen = true;
          ::kill(pid, SIGUSR1);  // passed on to the ranks, which end their lines
        }
      }));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_TRUE(both_seen) << describe(r);
  EXPECT_FALSE(contains(r.out, "too late")) << describe(r);
  // Whole lines only: each rank's open line was ended before the other's piece.
  for (const auto& line : lines_of(r.out)) {
    EXPECT_TRUE(line == "[rank 0] working" || line == "[rank 1] working" ||
                line == "[rank 0]  done" || line == "[rank 1]  done" ||
                line == "[rank 0] working done" || line == "[rank 1] working done")
        << line << "\n"
        << describe(r);
  }
}

TEST(Sempirun, SingleRankOutputIsByteExact) {
  const auto r = run_sempirun({"-n", "1", "sh", "-c", "printf 'a\\nb'"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "a\nb");
}

TEST(Sempirun, ForwardsAndSetsEnvironmentVariables) {
  const auto r =
      run_sempirun({"-n", "2", "-x", "SEMPIRUN_TEST_FWD", "-x", "SEMPIRUN_TEST_SET=x=y", "-x",
                    "SEMPIRUN_TEST_OVER=1", "-x", "SEMPIRUN_TEST_OVER=2", "sh", "-c",
                    "echo \"$SEMPIRUN_TEST_FWD|$SEMPIRUN_TEST_SET|$SEMPIRUN_TEST_OVER\""},
                   with_env({"SEMPIRUN_TEST_FWD=forwarded value"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_of(r.out),
            (std::vector<std::string>{"forwarded value|x=y|2", "forwarded value|x=y|2"}));
}

TEST(Sempirun, ForwardingAnUnsetVariableWarns) {
  const auto r = run_sempirun({"-n", "1", "-x", "SEMPIRUN_TEST_SURELY_UNSET", "sh", "-c",
                               "echo \"${SEMPIRUN_TEST_SURELY_UNSET-unset}\""});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "unset\n");
  EXPECT_TRUE(contains(r.err, "sempirun: warning: -x SEMPIRUN_TEST_SURELY_UNSET: not set"))
      << describe(r);
}

TEST(Sempirun, InheritedSempiVariablesAreReplaced) {
  const auto r = run_sempirun({"-n", "1", "sh", "-c", "echo $SEMPI_RANK $SEMPI_SIZE"},
                              with_env({"SEMPI_RANK=77", "SEMPI_SIZE=99"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "0 1\n");
}

TEST(Sempirun, ConcurrentOutputStaysInWholeLines) {
  // 4 ranks x 3000 lines of ~200 bytes, on stdout and stderr at once: pipe reads split lines
  // constantly, yet every forwarded line must be complete and in per-rank order.
  const std::string script =
      "pad=$(printf '%0180d' 0); i=0; while [ $i -lt 3000 ]; do "
      "echo \"rank $SEMPI_RANK line $i $pad end\"; "
      "if [ $((i % 10)) -eq 0 ]; then echo \"err $SEMPI_RANK $i $pad end\" >&2; fi; "
      "i=$((i+1)); done";
  const auto r = run_sempirun({"-n", "4", "sh", "-c", script});
  ASSERT_EQ(r.status, 0) << r.err.substr(0, 2000);
  const std::string pad(180, '0');
  const std::regex out_line("rank ([0-3]) line ([0-9]+) " + pad + " end");
  std::map<int, int> next;
  const auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 12000u);
  for (const auto& line : out) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, out_line)) << "mixed line: " << line.substr(0, 300);
    const int rank = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[2]), next[rank]++) << "rank " << rank << " lines out of order";
  }
  const std::regex err_line("err ([0-3]) ([0-9]+) " + pad + " end");
  const auto err = lines_of(r.err);
  ASSERT_EQ(err.size(), 1200u);
  for (const auto& line : err) {
    ASSERT_TRUE(std::regex_match(line, err_line)) << "mixed line: " << line.substr(0, 300);
  }
}

// --- failures -----------------------------------------------------------------------------------

TEST(Sempirun, FailingRankEndsTheJobPromptly) {
  const auto r = run_sempirun(
      {"-n", "3", "sh", "-c", "if [ $SEMPI_RANK = 1 ]; then exit 3; fi; exec sleep 300"});
  EXPECT_EQ(r.status, 3) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 exited with status 3\n")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

TEST(Sempirun, KilledRankReportsSignal) {
  const auto r = run_sempirun(
      {"-n", "2", "sh", "-c", "if [ $SEMPI_RANK = 1 ]; then kill -9 $$; fi; exec sleep 300"});
  EXPECT_EQ(r.status, 137) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 was killed by signal 9 (Killed)\n")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

TEST(Sempirun, FirstFailureWins) {
  // Rank 2 fails at once; rank 0 fails only after the teardown began (SIGTERM -> 143).
  const auto r = run_sempirun(
      {"-n", "3", "sh", "-c", "if [ $SEMPI_RANK = 2 ]; then exit 5; fi; exec sleep 300"});
  EXPECT_EQ(r.status, 5) << describe(r);
  EXPECT_TRUE(contains(r.err, "rank 2 exited with status 5")) << describe(r);
  EXPECT_FALSE(contains(r.err, "rank 0")) << describe(r);
}

TEST(Sempirun, ChildrenOfRanksDoNotSurviveTeardown) {
  // The rank's shell forks `sleep` (no exec): SIGTERM must reach the whole process group, or
  // the orphaned sleep would hold the output pipe open for 300 s. Rank 1 fails only once rank 0
  // has recorded the sleep's pid (a FIFO orders them, no timing involved).
  TempDir dir;
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto r = run_sempirun({"-n", "2", "sh", "-c",
                               "if [ $SEMPI_RANK = 1 ]; then read x < " + fifo.string() +
                                   "; exit 4; fi; "
                                   "sleep 300 & echo $! > " +
                                   (dir.path() / "pid.0").string() + "; echo go > " +
                                   fifo.string() + "; wait"});
  EXPECT_EQ(r.status, 4) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 exited with status 4\n")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
  expect_all_gone(dir.path(), 1);
}

// A rank's child that left its process group (setsid) is handed to sempirun when the rank
// dies, and does not outlive the job either (it used to run on, holding the output pipe).
TEST(Sempirun, ChildrenThatLeftTheProcessGroupDoNotSurviveTheJob) {
  TempDir dir;
  // The child reports its own pid (after setsid, which may fork) through a FIFO, so the rank
  // exits only once the pid is known: no timing involved.
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto r = run_sempirun(
      {"-n", "1", "sh", "-c",
       "setsid sh -c 'echo $$ > " + fifo.string() + "; exec sleep 300' & read child < " +
           fifo.string() + "; echo $child > " + (dir.path() / "pid.0").string() + "; exit 0"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
  expect_all_gone(dir.path(), 1);
}

// A rank that exits leaving a child writing to its stdout: sempirun reads what the pipe held
// when the rank exited, not until it is empty (which lasts as long as the child refills it
// faster than it is forwarded), and the child is ended with the job. The rank exits once its
// child is writing without a pause (a FIFO orders them, no timing involved).
TEST(Sempirun, AChildWritingOnAfterItsRankExitedHoldsNothingUp) {
  TempDir dir;
  const auto fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto r = run_sempirun(
      {"-n", "1", "sh", "-c",
       "(yes sempi | { head -c 100000; echo > " + fifo.string() + "; cat; }) & read x < " +
           fifo.string() + "; exit 0"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// sempirun's stdout reader goes away (`sempirun ... | head -1`): the ranks' stdout pipes are
// closed, so a rank writing on dies of SIGPIPE as in a shell pipeline, instead of writing,
// unread, until the job's timeout.
TEST(Sempirun, ARankWritingToAReaderThatWentAwayGetsSigpipe) {
  RunOptions head;
  head.close_stdout = [](const std::string& out) { return !out.empty(); };
  const auto r = run_sempirun({"-n", "2", "yes", "sempi"}, head);
  EXPECT_EQ(r.status, 128 + SIGPIPE) << describe(r);
  EXPECT_TRUE(contains(r.err, "was killed by signal 13 (Broken pipe)")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// Only a reader that went away (EPIPE) closes the ranks' pipes: a write error such as a full
// disk drops the output, and the job runs to its end, as the program run alone would.
TEST(Sempirun, AFullDiskDropsOutputButEndsNoRank) {
  const std::string command = "timeout 60 " + std::string(SEMPIRUN_PATH) +
                              " -n 1 sh -c 'yes sempi | head -c 10000000' > /dev/full 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// What a rank wrote last before it failed, an unfinished line included (held back when output
// is tagged, until its end is read), comes before what sempirun says about its exit.
TEST(Sempirun, ARanksLastWordsComeBeforeTheReportOfItsExit) {
  const auto r = run_sempirun({"-n", "2", "--tag-output", "sh", "-c",
                               "if [ $SEMPI_RANK = 1 ]; then printf 'fatal: bad input' >&2; "
                               "exit 3; fi; exec sleep 300"});
  EXPECT_EQ(r.status, 3) << describe(r);
  const auto words = r.err.find("fatal: bad input");
  const auto report = r.err.find("sempirun: rank 1 exited with status 3");
  ASSERT_NE(words, std::string::npos) << describe(r);
  ASSERT_NE(report, std::string::npos) << describe(r);
  EXPECT_LT(words, report) << describe(r);
}

TEST(Sempirun, TimeoutTearsDownTheJob) {
  const auto r = run_sempirun({"-n", "2", "--timeout", "2", "sleep", "300"});
  EXPECT_EQ(r.status, 124) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: job exceeded --timeout 2 s; ranks still running: 0,1\n"))
      << describe(r);
  EXPECT_GE(seconds(r.elapsed), 2.0);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// sempirun's stdout goes to a reader that stops reading (a paused pager): the job still times
// out, its ranks are stopped and its audit log is sealed. Only then does sempirun wait for the
// reader, and says so; the reader then gets every line, whole.
constexpr const char* kWaitingForStdout = "waiting for the reader of stdout";

TEST(Sempirun, AStalledReaderHoldsUpNeitherTimeoutNorSeal) {
  TempDir dir;
  const auto audit = dir.path() / "audit";
  RunOptions stalled;
  stalled.hold_stdout = [](const std::string& err) { return !contains(err, kWaitingForStdout); };
  const auto r = run_sempirun(
      {"-n", "2", "--timeout", "2", "--audit-dir", audit.string(), "yes", "sempi"}, stalled);
  EXPECT_EQ(r.status, 124) << describe(r);
  EXPECT_TRUE(contains(r.err, "job exceeded --timeout 2 s")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
  const auto log = lines_of(read_file(audit / "launcher.jsonl"));
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(contains(log.back(), "\"audit.seal\"")) << log.back();
  const auto lines = lines_of(r.out);
  // More than the three pipes on the way hold (two ranks' and sempirun's stdout, 64 KiB each,
  // ~33,000 lines): the rest waited in sempirun.
  EXPECT_GT(lines.size(), 40000u);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "sempi"), std::ssize(lines));
}

// ... and an interrupt while it waits discards the rest at once; the job's status stands.
TEST(Sempirun, AnInterruptDiscardsOutputNobodyReads) {
  RunOptions stalled;
  stalled.hold_stdout = [](const std::string&) { return true; };
  stalled.on_error_output = [sent = false](pid_t pid, const std::string& err) mutable {
    if (!sent && contains(err, kWaitingForStdout)) {
      sent = true;
      ::kill(pid, SIGINT);
    }
  };
  const auto r = run_sempirun({"-n", "2", "--timeout", "2", "yes", "sempi"}, stalled);
  EXPECT_EQ(r.status, 124) << describe(r);
  EXPECT_TRUE(contains(r.err, kWaitingForStdout)) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// ... and with --timeout, a reader that never reads holds sempirun up for a few seconds more
// at most: the rest of the output is discarded, with a word on stderr (which is read).
TEST(Sempirun, TimeoutAlsoBoundsTheWaitForAReaderThatNeverReads) {
  RunOptions stalled;
  stalled.hold_stdout = [](const std::string&) { return true; };
  const auto r = run_sempirun({"-n", "2", "--timeout", "2", "yes", "sempi"}, stalled);
  EXPECT_EQ(r.status, 124) << describe(r);
  EXPECT_TRUE(contains(r.err, kWaitingForStdout)) << describe(r);
  EXPECT_TRUE(contains(r.err, "the reader did not take the job's output within --timeout"))
      << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// Ctrl-Z still stops sempirun once the job has ended and it waits for a slow reader (a pager)
// to take the rest of the output: that wait used to drop the stop signal.
TEST(Sempirun, SigtstpStopsSempirunWhileItWaitsForAReader) {
  bool stopped = false;
  RunOptions stalled;
  stalled.hold_stdout = [](const std::string&) { return true; };
  stalled.on_error_output = [&stopped, sent = false](pid_t pid, const std::string& err) mutable {
    if (sent || !contains(err, kWaitingForStdout)) return;
    sent = true;
    ::kill(pid, SIGTSTP);
    stopped = eventually([pid] {
      int status = 0;
      return ::waitpid(pid, &status, WUNTRACED | WNOHANG) == pid && WIFSTOPPED(status);
    });
    ::kill(pid, SIGCONT);
    ::kill(pid, SIGINT);
  };
  const auto r = run_sempirun(
      {"-n", "2", "--timeout", "2", "yes", "sempi"}, stalled,
      {.cwd = {}, .unlimited_core = false, .ignored_signals = {}, .own_process_group = true});
  EXPECT_TRUE(stopped) << describe(r);
  EXPECT_EQ(r.status, 124) << describe(r);
}

TEST(Sempirun, TimeoutNotReachedIsSuccess) {
  const auto r = run_sempirun({"-n", "2", "--timeout", "30", "true"});
  EXPECT_EQ(r.status, 0) << describe(r);
}

void expect_interrupt(int signo, int expected_status) {
  TempDir dir;
  const auto audit = dir.path() / "audit";
  const auto r = run_sempirun(
      {"-n", "3", "--audit-dir", audit.string(), "sh", "-c",
       "echo $$ > " + dir.path().string() + "/pid.$SEMPI_RANK; echo ready; exec sleep 300"},
      with_output(signal_when_ready(3, signo)));
  EXPECT_EQ(r.status, expected_status) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: interrupted; terminating the job\n")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
  expect_all_gone(dir.path(), 3);
  // The job ended in order: the launcher's log closes with its seal.
  const auto log = lines_of(read_file(audit / "launcher.jsonl"));
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(contains(log.back(), "\"audit.seal\"")) << log.back();
}

TEST(Sempirun, SigintTerminatesEveryRank) { expect_interrupt(SIGINT, 130); }

TEST(Sempirun, SigtermTerminatesEveryRank) { expect_interrupt(SIGTERM, 143); }

// A dropped login session ends the job in order too.
TEST(Sempirun, SighupTerminatesEveryRank) { expect_interrupt(SIGHUP, 129); }

// So do the signals of a CPU-time limit and of Ctrl-\ (which used to kill sempirun alone,
// leaving the ranks' children and an unsealed log), and the timer signals nobody expects.
TEST(Sempirun, SigxcpuAndSigquitEndTheJobInOrder) {
  expect_interrupt(SIGXCPU, 128 + SIGXCPU);
  expect_interrupt(SIGQUIT, 128 + SIGQUIT);
  expect_interrupt(SIGPROF, 128 + SIGPROF);
  expect_interrupt(SIGVTALRM, 128 + SIGVTALRM);
}

// SIGUSR1 and SIGUSR2 reach every rank once (a batch system's warning before the end), and the
// job goes on.
TEST(Sempirun, Sigusr1AndSigusr2ArePassedOnToEveryRank) {
  TempDir dir;
  const auto r = run_sempirun(
      {"-n", "2", "sh", "-c",
       "n=0; trap 'n=$((n+1)); echo usr1 $SEMPI_RANK $n' USR1; "
       "trap 'echo usr2 $SEMPI_RANK $n; exit 0' USR2; echo ready; "
       "while :; do sleep 1 & wait $!; done"},
      with_output([stage = 0](pid_t pid, const std::string& out) mutable {
        const auto count = [&](const std::string& what) {
          std::size_t n = 0;
          for (auto at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
          return n;
        };
        if (stage == 0 && count("ready") == 2) {
          ::kill(pid, SIGUSR1);
          stage = 1;
        } else if (stage == 1 && count("usr1 ") == 2) {
          ::kill(pid, SIGUSR2);
          stage = 2;
        }
      }));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "usr2 0 1\n")) << describe(r);
  EXPECT_TRUE(contains(r.out, "usr2 1 1\n")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// Ctrl-Z stops the terminal's foreground process group, which holds sempirun but not the
// ranks (each leads a group of its own). sempirun stops them, then itself, with the signal it
// got (the shell reports a stopped job); continued (fg, bg), it continues them.
TEST(Sempirun, SigtstpStopsTheRanksAndSigcontContinuesThem) {
  std::vector<pid_t> ranks;
  bool sempirun_stopped = false;
  bool ranks_stopped = false;
  bool ranks_continued = false;
  const auto all_ranks = [&](auto predicate) {
    return std::all_of(ranks.begin(), ranks.end(), predicate);
  };
  const auto r = run_sempirun(
      {"-n", "2", "sh", "-c", "echo pid $$; while :; do sleep 1 & wait $!; done"},
      with_output([&](pid_t pid, const std::string& out) {
        if (!ranks.empty()) return;
        std::vector<pid_t> pids;
        for (const auto& line : lines_of(out)) {
          if (line.starts_with("pid ")) pids.push_back(std::stoi(line.substr(4)));
        }
        if (pids.size() < 2) return;
        ranks = pids;
        ::kill(pid, SIGTSTP);
        sempirun_stopped = eventually([pid] {
          int status = 0;
          return ::waitpid(pid, &status, WUNTRACED | WNOHANG) == pid && WIFSTOPPED(status) &&
                 WSTOPSIG(status) == SIGTSTP;
        });
        ranks_stopped =
            eventually([&] { return all_ranks([](pid_t p) { return process_state(p) == 'T'; }); });
        ::kill(pid, SIGCONT);
        ranks_continued =
            eventually([&] { return all_ranks([](pid_t p) { return process_state(p) != 'T'; }); });
        ::kill(pid, SIGTERM);
      }),
      {.cwd = {}, .unlimited_core = false, .ignored_signals = {}, .own_process_group = true});
  EXPECT_EQ(r.status, 128 + SIGTERM) << describe(r);
  EXPECT_TRUE(sempirun_stopped);
  EXPECT_TRUE(ranks_stopped);
  EXPECT_TRUE(ranks_continued);
}

// nohup: a signal ignored when sempirun starts stays ignored, by sempirun and by its ranks.
TEST(Sempirun, SignalsIgnoredAtStartStayIgnored) {
  const auto r = run_sempirun({"-n", "2", "sh", "-c", "kill -HUP $PPID; kill -HUP $$; echo survived"},
                              {}, {.cwd = {}, .unlimited_core = false, .ignored_signals = {SIGHUP}});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "survived\nsurvived\n") << describe(r);
  EXPECT_FALSE(contains(r.err, "interrupted")) << describe(r);
}

TEST(Sempirun, RanksIgnoringSigtermAreKilled) {
  TempDir dir;
  const auto r = run_sempirun({"-n", "2", "sh", "-c",
                               "trap '' TERM; echo $$ > " + dir.path().string() +
                                   "/pid.$SEMPI_RANK; echo ready; while :; do sleep 1; done"},
                              with_output(signal_when_ready(2, SIGINT)));
  EXPECT_EQ(r.status, 130) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
  expect_all_gone(dir.path(), 2);
}

// The job CA key and the audit seal key live only in sempirun's memory; both were found in the
// core file of a launcher that crashed (here: SIGABRT) under `ulimit -c unlimited`.
TEST(Sempirun, LauncherWritesNoCoreDumpWithTheJobKeys) {
  TempDir dir;
  // Killed, the launcher cannot remove the job's socket directory: keep it in `dir`.
  RunOptions abort_when_ready = with_env({"TMPDIR=" + dir.path().string()});
  abort_when_ready.on_output = signal_when_ready(2, SIGABRT);
  const auto r =
      run_sempirun({"-n", "2", "sh", "-c", "echo ready; exec sleep 300"}, abort_when_ready,
                   {.cwd = dir.path(), .unlimited_core = true, .ignored_signals = {}});
  EXPECT_EQ(r.status, 128 + SIGABRT) << describe(r);
  EXPECT_FALSE(r.core_dumped) << describe(r);
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("core")) << entry.path();
  }
}

// However its ranks end, the job's directory for their Unix sockets goes with the job.
// Socket paths travel in JSON, which holds UTF-8 only: a TMPDIR that is not gives way to /tmp.
TEST(Sempirun, TmpdirThatIsNotUtf8IsPassedOver) {
  TempDir tmp;
  const fs::path odd = tmp.path() / "tmp\xe9";
  fs::create_directory(odd);
  fs::permissions(odd, fs::perms::owner_all);
  const auto r = run_sempirun({"-n", "1", "sh", "-c", "echo \"$SEMPI_LOCAL_DIR\""},
                              with_env({"TMPDIR=" + odd.string()}));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_TRUE(r.out.starts_with("/tmp/sempi-")) << describe(r);
  EXPECT_EQ(r.out.find(odd.string()), std::string::npos) << describe(r);
}

TEST(Sempirun, JobSocketDirectoryIsRemovedWhenTheJobEnds) {
  TempDir tmp;
  const auto ok = run_sempirun({"-n", "2", "sh", "-c", "test -d \"$SEMPI_LOCAL_DIR\""},
                               with_env({"TMPDIR=" + tmp.path().string()}));
  EXPECT_EQ(ok.status, 0) << describe(ok);
  const auto killed = run_sempirun({"-n", "2", "sh", "-c", "kill -KILL $$"},
                                   with_env({"TMPDIR=" + tmp.path().string()}));
  EXPECT_EQ(killed.status, 128 + SIGKILL) << describe(killed);
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

// --- usage errors -------------------------------------------------------------------------------

struct UsageCase {
  std::vector<std::string> args;
  std::string message;
  int status = 2;  // 127: no such program, as a shell
};

class SempirunUsage : public testing::TestWithParam<UsageCase> {};

TEST_P(SempirunUsage, ExitsWithAClearMessage) {
  const auto r = run_sempirun(GetParam().args);
  EXPECT_EQ(r.status, GetParam().status) << describe(r);
  EXPECT_TRUE(r.err.starts_with("sempirun: error: ")) << describe(r);
  EXPECT_TRUE(contains(r.err, GetParam().message)) << describe(r);
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    BadCommandLines, SempirunUsage,
    testing::Values(
        UsageCase{{}, "no program given"}, UsageCase{{"-n", "2"}, "no program given"},
        UsageCase{{"-n", "0", "true"}, "-n must be between 1 and 4096"},
        UsageCase{{"-n", "abc", "true"}, "-n must be an integer"},
        UsageCase{{"-n", "5000", "true"}, "-n must be between 1 and 4096"},
        UsageCase{{"--bogus", "true"}, "unknown option '--bogus'"},
        UsageCase{{"--mca", "btl", "self,tcp", "true"}, "--mca: sempi has no MCA components"},
        // The terminal sees an escape in an argument as text, not as a command.
        UsageCase{{"--\x1b[2J", "true"}, "unknown option '--\\x1b[2J'"},
        UsageCase{{"--timeout", "0", "true"}, "--timeout must be between"},
        UsageCase{{"--timeout", "soon", "true"}, "--timeout must be an integer"},
        UsageCase{{"-x", "SEMPI_RANK=3", "true"}, "set by sempirun"},
        UsageCase{{"-x", "SEMPI_LOCAL_DIR=/elsewhere", "true"}, "set by sempirun"},
        UsageCase{{"--audit-key-out", "", "true"}, "--audit-key-out requires a file name"},
        UsageCase{{"--audit-key-out", "/nonexistent/dir/key", "true"},
                  "cannot create /nonexistent/dir/"},
        UsageCase{{"--audit-dir", "/tmp/sempirun-test-caf\xe9", "true"},
                  "is not valid UTF-8; choose another with --audit-dir"},
        UsageCase{{"--policy", "/nonexistent/policy.json", "true"},
                  "cannot read policy file /nonexistent/policy.json"},
        UsageCase{{"/nonexistent/program"},
                  "cannot execute /nonexistent/program: No such file or directory",
                  127},
        UsageCase{{"-n", "3", "no-such-program-sempirun-test"},
                  "cannot execute no-such-program-sempirun-test: No such file",
                  127},
        UsageCase{{"-x", "PATH=/nonexistent", "true"},
                  "cannot execute true: No such file or directory (not found in the "
                  "ranks' PATH nor in the working directory)",
                  127}));

TEST(Sempirun, InvalidPolicyFile) {
  TempDir dir;
  const auto path = dir.path() / "bad.json";
  std::ofstream(path) << "{ \"version\": ";
  const auto r = run_sempirun({"--policy", path.string(), "true"});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: error: " + path.string() + ": invalid JSON"))
      << describe(r);
}

TEST(Sempirun, PolicyErrorsEscapeWhatTheFileSays) {
  // A name in the policy is quoted in the error: it must not reach the terminal as control
  // characters (here: set the window title).
  TempDir dir;
  const auto path = dir.path() / "policy.json";
  std::ofstream(path) << R"({"version": 1, "groups": {"io": "0-1"},
    "segmentation": [{"between": ["io", "\u001b]0;pwned\u0007"]}]})";
  const auto r = run_sempirun({"-n", "1", "--policy", path.string(), "/bin/true"});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << describe(r);
  EXPECT_TRUE(contains(r.err, "\\x1b]0;pwned\\x07")) << describe(r);
}

TEST(Sempirun, ProgramWithoutExecutePermission) {
  TempDir dir;
  const auto path = dir.path() / "script.sh";
  std::ofstream(path) << "#!/bin/sh\necho hi\n";
  ::chmod(path.c_str(), 0644);
  const auto r = run_sempirun({"-n", "2", path.string()});
  EXPECT_EQ(r.status, 126) << describe(r);  // as a shell
  EXPECT_TRUE(contains(r.err, "cannot execute " + path.string() + ": Permission denied"))
      << describe(r);
  EXPECT_EQ(r.out, "");
  // Found in PATH but not executable: 126 too, unless an executable one comes later.
  const auto in_path = run_sempirun({"-n", "1", "-x", "PATH=" + dir.path().string(), "script.sh"});
  EXPECT_EQ(in_path.status, 126) << describe(in_path);
  EXPECT_TRUE(contains(in_path.err, "cannot execute script.sh: Permission denied"))
      << describe(in_path);
  std::filesystem::create_directory(dir.path() / "bin");
  std::ofstream(dir.path() / "bin" / "script.sh") << "#!/bin/sh\necho second\n";
  ::chmod((dir.path() / "bin" / "script.sh").c_str(), 0755);
  const auto later = run_sempirun(
      {"-n", "1", "-x", "PATH=" + dir.path().string() + ":" + (dir.path() / "bin").string(),
       "script.sh"});
  EXPECT_EQ(later.status, 0) << describe(later);
  EXPECT_EQ(later.out, "second\n");
}

// The program is looked up in the ranks' PATH (sempirun -x PATH=...), not sempirun's own: as
// with Open MPI's mpirun, and as the ranks' own exec calls will see it.
TEST(Sempirun, ProgramIsFoundInTheRanksPath) {
  TempDir dir;
  const auto path = dir.path() / "sempirun-test-only-here";
  std::ofstream(path) << "#!/bin/sh\necho \"found $SEMPI_RANK\"\n";
  ::chmod(path.c_str(), 0700);
  const auto r = run_sempirun(
      {"-n", "1", "-x", "PATH=/usr/bin:/bin:" + dir.path().string(), "sempirun-test-only-here"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "found 0\n");
  // An interpreter that does not exist: the file was found, so 126, and the message says
  // where to look.
  std::ofstream(path) << "#!/nonexistent/interpreter\n";
  const auto bad =
      run_sempirun({"-n", "1", "-x", "PATH=" + dir.path().string(), "sempirun-test-only-here"});
  EXPECT_EQ(bad.status, 126) << describe(bad);
  EXPECT_TRUE(contains(bad.err, "(or the interpreter its #! line names)")) << describe(bad);
}

// Started with stdin closed, sempirun gives the stdin rank /dev/null; --wdir's directory, which
// it opens before it fills that gap, must not take descriptor 0 and become the rank's stdin.
TEST(Sempirun, ClosedStdinIsEmptyWithWdirToo) {
  TempDir dir;
  ProcessSetup closed;
  closed.stdin_closed = true;
  const auto r = run_sempirun(
      {"-n", "1", "--wdir", dir.path().string(), "sh", "-c", "cat; echo \"read $?\""}, {}, closed);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "read 0\n") << describe(r);
}

// --wdir, as mpirun's: the ranks run there, PWD says so, and a relative program is found
// there (neither where sempirun runs nor in the PATH has one of that name).
TEST(Sempirun, RanksRunInTheWorkingDirectoryGiven) {
  TempDir dir;
  const fs::path wdir = dir.path() / "wdir";
  fs::create_directories(wdir / "bin");
  std::ofstream(wdir / "bin" / "where") << "#!/bin/sh\necho \"$SEMPI_RANK $(pwd -P) $PWD $0\"\n";
  ::chmod((wdir / "bin" / "where").c_str(), 0700);
  ProcessSetup elsewhere;
  elsewhere.cwd = dir.path();
  const auto r = run_sempirun({"-n", "2", "--wdir", "wdir", "bin/where"}, {}, elsewhere);
  EXPECT_EQ(r.status, 0) << describe(r);
  const std::string real = fs::canonical(wdir).string();
  // $0 as given, as under mpirun: the rank execs it from its directory.
  EXPECT_TRUE(contains(r.out, "0 " + real + " " + real + " bin/where\n")) << describe(r);
  EXPECT_TRUE(contains(r.out, "1 " + real + " " + real + " bin/where\n")) << describe(r);
  // The default audit directory stays where sempirun runs.
  EXPECT_TRUE(fs::is_directory(dir.path() / "sempi-audit")) << describe(r);
  EXPECT_FALSE(fs::exists(wdir / "sempi-audit"));

  const auto missing = run_sempirun({"--wdir", "none", "bin/where"}, {}, elsewhere);
  EXPECT_EQ(missing.status, 2) << describe(missing);
  EXPECT_EQ(missing.err, "sempirun: error: --wdir none: No such file or directory\n")
      << describe(missing);
  // Found relative to the working directory given, not to sempirun's.
  const auto not_here = run_sempirun({"bin/where"}, {}, elsewhere);
  EXPECT_EQ(not_here.status, 127) << describe(not_here);
}

// mpirun's MPMD form: each program takes the next ranks, with its own -x and --wdir, and its
// index in SEMPI_APPNUM (tests/mpi/appnum.c checks MPI_APPNUM and one MPI_COMM_WORLD).
TEST(Sempirun, ProgramsSeparatedByColonsRunAsOneJob) {
  TempDir dir;
  const auto r =
      run_sempirun({"-n", "1", "-x", "A=1", "/bin/sh", "-c",
                    "echo \"a $SEMPI_RANK/$SEMPI_SIZE $SEMPI_APPNUM A=$A B=$B\"", ":", "-n", "2",
                    "-x", "B=2", "--wdir", dir.path().string(), "/bin/sh", "-c",
                    "echo \"b $SEMPI_RANK/$SEMPI_SIZE $SEMPI_APPNUM A=$A B=$B $(pwd -P)\""});
  EXPECT_EQ(r.status, 0) << describe(r);
  const std::string real = fs::canonical(dir.path()).string();
  EXPECT_TRUE(contains(r.out, "a 0/3 0 A=1 B=\n")) << describe(r);
  EXPECT_TRUE(contains(r.out, "b 1/3 1 A= B=2 " + real + "\n")) << describe(r);
  EXPECT_TRUE(contains(r.out, "b 2/3 1 A= B=2 " + real + "\n")) << describe(r);

  // A program of a later context that cannot run is reported as the first one would be,
  // before any rank of the first has started. (SIGTERM ignored from the start, ranks that
  // did start would live 2 s into the teardown: time to leave their mark.)
  const auto missing =
      run_sempirun({"-n", "2", "--wdir", dir.path().string(), "/bin/sh", "-c",
                    "touch started.$SEMPI_RANK", ":", "/nonexistent/program"},
                   {}, {.cwd = {}, .unlimited_core = false, .ignored_signals = {SIGTERM}});
  EXPECT_EQ(missing.status, 127) << describe(missing);
  EXPECT_TRUE(contains(missing.err, "cannot execute /nonexistent/program")) << describe(missing);
  EXPECT_FALSE(fs::exists(dir.path() / "started.0"));
  EXPECT_FALSE(fs::exists(dir.path() / "started.1"));
}

TEST(Sempirun, HelpAndVersion) {
  const auto help = run_sempirun({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_TRUE(contains(help.out, "usage: sempirun")) << help.out;
  EXPECT_TRUE(contains(help.out, "124")) << "the timeout status is documented";
  const auto version = run_sempirun({"--version"});
  EXPECT_EQ(version.status, 0);
  EXPECT_TRUE(version.out.starts_with("sempirun (sempi) ")) << version.out;
}

TEST(Sempirun, AuditDirIsCreatedPrivate) {
  TempDir dir;
  const auto audit = dir.path() / "audit";
  const auto r = run_sempirun({"--audit-dir", audit.string(), "true"});
  ASSERT_EQ(r.status, 0) << describe(r);
  struct stat st {};
  ASSERT_EQ(::stat(audit.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Started where the default ./sempi-audit cannot be made (/proc refuses even root): the error
// says where the default is and how to choose another.
TEST(Sempirun, ADefaultAuditDirThatCannotBeMadeNamesTheOption) {
  ProcessSetup setup;
  setup.cwd = "/proc";
  const auto r = run_sempirun({"-n", "1", "true"}, {}, setup);
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempi-audit")) << describe(r);
  EXPECT_TRUE(contains(r.err, "choose another with --audit-dir")) << describe(r);
}

// The default ./sempi-audit/<job> in a shared directory: whoever may write there (here anyone)
// could rename the job's audit directory and put their own in its place.
TEST(Sempirun, DefaultAuditDirInADirectoryOthersCanChangeIsRefused) {
  TempDir dir;
  const auto shared = dir.path() / "shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  const auto r = run_sempirun({"true"}, {}, {.cwd = shared, .unlimited_core = false, .ignored_signals = {}});
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_TRUE(contains(r.err, shared.string() + " is writable by others")) << describe(r);

  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);  // sticky, like /tmp: fine
  const auto sticky = run_sempirun({"true"}, {}, {.cwd = shared, .unlimited_core = false, .ignored_signals = {}});
  EXPECT_EQ(sticky.status, 0) << describe(sticky);
}

// --- enrollment over the bootstrap protocol ------------------------------------------------------

class SempirunEnroll : public testing::TestWithParam<int> {};

TEST_P(SempirunEnroll, EveryRankEnrollsAndFinalizes) {
  const int n = GetParam();
  const auto r = run_sempirun({"-n", std::to_string(n), ENROLL_PROBE_PATH});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(n)) << describe(r);
  std::sort(lines.begin(), lines.end());
  const std::string digest = sempi::to_hex(sempi::policy::PolicyDocument::default_policy().digest);
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_EQ(lines[static_cast<std::size_t>(rank)],
              "rank " + std::to_string(rank) + " ok policy_digest=" + digest);
  }
  EXPECT_EQ(r.err, "");
}

INSTANTIATE_TEST_SUITE_P(RankCounts, SempirunEnroll, testing::Values(1, 3, 4, 7));

TEST(SempirunEnrollment, PolicyFileIsBoundIntoCertificates) {
  TempDir dir;
  const auto path = dir.path() / "policy.json";
  std::ofstream(path) << R"({"version": 1, "mode": "enforce", "groups": {"all": "*"}})";
  const auto r = run_sempirun({"-n", "2", "--policy", path.string(), ENROLL_PROBE_PATH});
  ASSERT_EQ(r.status, 0) << describe(r);
  const std::string digest = sempi::to_hex(sempi::policy::PolicyDocument::load(path).digest);
  for (const auto& line : lines_of(r.out)) {
    EXPECT_TRUE(line.ends_with(" ok policy_digest=" + digest)) << line;
  }
}

TEST(SempirunEnrollment, RankExitingWithoutFinalizeFailsTheJob) {
  const auto r =
      run_sempirun({"-n", "3", ENROLL_PROBE_PATH, "--mode", "no-finalize", "--only-rank", "1"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 exited without finalizing\n")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// Ranks that lost each other blame each other: the launcher waits for the blamed rank's own
// status, but once every rank has exited, one of the failures must be reported, at once.
TEST(SempirunEnrollment, RanksBlamingEachOtherStillFailTheJob) {
  const auto r = run_sempirun({"-n", "2", ENROLL_PROBE_PATH, "--mode", "blame-next"});
  EXPECT_EQ(r.status, 5) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 0 ")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// A rank that aborts after losing a peer (MPI's default error handler on a failed receive)
// is not the cause either: the job ends with the lost peer's own status, which came later.
TEST(SempirunEnrollment, AnAbortAfterALostPeerIsBlamedOnThePeer) {
  const TempDir dir;
  const auto r = run_sempirun({"-n", "2", ENROLL_PROBE_PATH, "--mode", "lost-then-abort",
                               "--marker", (dir.path() / "aborted").string()});
  EXPECT_EQ(r.status, 9) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 exited with status 9")) << describe(r);
  EXPECT_FALSE(contains(r.err, "rank 0 called abort")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

TEST(SempirunEnrollment, EveryRankExitingWithoutFinalizeFailsTheJob) {
  const auto r = run_sempirun({"-n", "1", ENROLL_PROBE_PATH, "--mode", "no-finalize"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 0 exited without finalizing\n")) << describe(r);
}

TEST(SempirunEnrollment, GarbageCsrIsRefusedAndAbortsTheJob) {
  const auto r =
      run_sempirun({"-n", "3", ENROLL_PROBE_PATH, "--mode", "garbage-csr", "--only-rank", "2"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 2 was refused enrollment: bad CSR")) << describe(r);
  // The probe saw the refusal; the others saw the abort notice naming rank 2.
  EXPECT_TRUE(contains(r.err, "enroll_probe rank 2: refused: ")) << describe(r);
  EXPECT_TRUE(contains(r.err, "job aborted: rank 2 was refused enrollment")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

TEST(SempirunEnrollment, DuplicateEnrollIsRefused) {
  const auto r = run_sempirun({"-n", "1", ENROLL_PROBE_PATH, "--mode", "duplicate-enroll"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(
      contains(r.err, "sempirun: rank 0 was refused enrollment: rank 0 is already enrolled"))
      << describe(r);
}

TEST(SempirunEnrollment, UnknownMessageTypeIsRefused) {
  const auto r =
      run_sempirun({"-n", "2", ENROLL_PROBE_PATH, "--mode", "unknown-message", "--only-rank", "0"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 0 sent an unknown bootstrap message type 'hello'\n"))
      << describe(r);
  EXPECT_TRUE(contains(r.err, "enroll_probe rank 0: refused: ")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

TEST(SempirunEnrollment, AuditHeadBeforeFinalizeIsRefused) {
  const auto r = run_sempirun(
      {"-n", "2", ENROLL_PROBE_PATH, "--mode", "early-audit-head", "--only-rank", "1"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 sent an audit_head before finalize or twice\n"))
      << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

TEST(SempirunEnrollment, PeerLostBeforeTheJobStartedIsRefused) {
  const auto r =
      run_sempirun({"-n", "2", ENROLL_PROBE_PATH, "--mode", "early-peer-lost", "--only-rank", "1"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 sent peer_lost before the job started\n"))
      << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// Rank 1 fails after finalize, which starts the teardown; rank 0 reports its audit head only
// after that. The seal must hold the head rank 0 reported: once, it was dropped, and the seal
// read rank 0's head back from its file, which anyone could have edited in between.
TEST(SempirunEnrollment, AHeadReportedDuringTheTeardownIsSealed) {
  TempDir dir;
  const auto audit = dir.path() / "audit";
  const auto r = run_sempirun(
      {"-n", "2", "--audit-dir", audit.string(), ENROLL_PROBE_PATH, "--mode", "late-head"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 exited with status 1")) << describe(r);
  const auto log = lines_of(read_file(audit / "launcher.jsonl"));
  ASSERT_FALSE(log.empty());
  const auto seal = nlohmann::json::parse(log.back());
  ASSERT_EQ(seal["event"]["action"], "audit.seal") << log.back();
  const auto& rank0 = seal["sempi"]["seal"]["ranks"][0];
  EXPECT_EQ(rank0["source"], "reported") << log.back();
  EXPECT_EQ(rank0["hash"], std::string(64, 'a')) << log.back();
}

TEST(SempirunEnrollment, AbortFromARankSetsTheExitStatus) {
  const auto r =
      run_sempirun({"-n", "3", ENROLL_PROBE_PATH, "--mode", "abort", "--only-rank", "1"});
  EXPECT_EQ(r.status, 7) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 called abort (code 7): probe requested abort\n"))
      << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

// A policy of about 220 KB (260 KB escaped in the welcome): more than a Unix socket's default
// send buffer takes at once (net.core.wmem_default, 208 KiB on Debian).
std::filesystem::path write_large_policy(const std::filesystem::path& dir) {
  const auto path = dir / "large-policy.json";
  std::ofstream out(path);
  out << R"({"version": 1, "mode": "enforce", "groups": {"all": "*"}, "communicators": [)";
  for (int i = 0; i < 2400; ++i) {
    out << (i > 0 ? "," : "") << R"({"name": "communicator-with-a-long-name-)" << i
        << R"(", "members": "*", "collectives": "*", "p2p_tags": "*"})";
  }
  out << "]}";
  return path;
}

// Rank 0 never reads its welcome, which is larger than its socket takes at once; ranks 1 and
// 2 get theirs and abort. The launcher hears them at once: it does not wait on rank 0's
// channel first (which would make "rank 0 stopped reading" the job's cause, five seconds on).
TEST(SempirunEnrollment, ARankThatStopsReadingHoldsUpNoOtherRank) {
  TempDir dir;
  const auto policy = write_large_policy(dir.path());
  const auto r = run_sempirun(
      {"-n", "3", "--policy", policy.string(), ENROLL_PROBE_PATH, "--mode", "stall-first"});
  EXPECT_EQ(r.status, 7) << describe(r);
  EXPECT_TRUE(contains(r.err, "called abort (code 7): probe requested abort")) << describe(r);
  EXPECT_FALSE(contains(r.err, "stopped reading")) << describe(r);
}

// A rank that takes none of its bootstrap messages for 5 s has stopped reading: the job fails,
// naming it, while the other ranks wait for finalize_ok.
TEST(SempirunEnrollment, ARankThatTakesNoBootstrapMessageFailsTheJob) {
  long send_buffer = 0;
  std::ifstream("/proc/sys/net/core/wmem_default") >> send_buffer;
  if (send_buffer <= 0 || send_buffer >= 250 * 1024) {
    GTEST_SKIP() << "a socket here takes the whole welcome at once (wmem_default " << send_buffer
                 << ")";
  }
  TempDir dir;
  const auto policy = write_large_policy(dir.path());
  const auto r = run_sempirun({"-n", "2", "--policy", policy.string(), ENROLL_PROBE_PATH, "--mode",
                               "stall", "--only-rank", "0"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 0 did not accept a bootstrap message for 5 s"))
      << describe(r);
  EXPECT_TRUE(contains(r.err, "job aborted: rank 0 stopped reading its bootstrap channel"))
      << describe(r);
}

TEST(SempirunEnrollment, RankExitingWithoutJoiningFailsTheJob) {
  // Rank 1 exits 0 without enrolling, before or after rank 0 enrolls: either way the job
  // cannot start and fails naming rank 1.
  const auto r = run_sempirun(
      {"-n", "2", ENROLL_PROBE_PATH, "--mode", "exit-before-enroll", "--only-rank", "1"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "sempirun: rank 1 exited without joining the job\n")) << describe(r);
  EXPECT_LT(seconds(r.elapsed), seconds(kPromptly));
}

}  // namespace
