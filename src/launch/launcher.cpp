#include "launch/launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <cstring>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "audit/audit_log.hpp"
#include "audit/audit_reader.hpp"
#include "audit/seal.hpp"
#include "common/cpus.hpp"
#include "common/hex.hpp"
#include "common/printable.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "launch/enrollment.hpp"
#include "launch/job_socket_dir.hpp"
#include "launch/output_forwarder.hpp"
#include "launch/output_writer.hpp"
#include "launch/program_path.hpp"
#include "launch/rank_process.hpp"
#include "launch/terminal_input.hpp"
#include "pki/job_ca.hpp"
#include "pki/job_id.hpp"
#include "pki/pem_files.hpp"
#include "pki/secure_heap.hpp"
#include "policy/policy.hpp"
#include "sempi/error.hpp"

extern char** environ;  // NOLINT: POSIX

namespace sempi::launch {
namespace {

using transport::Clock;
using transport::UniqueFd;
using TimePoint = Clock::time_point;

constexpr std::size_t kReadChunk = 64 * 1024;
/// How long a rank's bootstrap channel may take none of what we queued for it before the
/// rank counts as no longer reading; the socket buffer normally takes a message at once.
constexpr std::chrono::seconds kBootstrapWriteTimeout{5};
/// Wake up at least this often even without events, as a guard against a lost wake-up.
constexpr std::chrono::milliseconds kMaxPollWait{1000};
constexpr std::size_t kMaxReportedText = 512;
/// How long a failure blamed on a lost peer waits for that peer's own exit status.
constexpr std::chrono::seconds kBlameGrace{3};
/// How long the end of a job waits for a slow reader of its output before saying so.
constexpr std::chrono::seconds kOutputNoticeDelay{1};
// With --timeout, how long after it (or after the job's end, if later) sempirun still waits for
// a reader to take the job's output: --timeout bounds sempirun's life, not only the ranks'.
constexpr std::chrono::seconds kOutputGraceAfterTimeout{5};

// Text that came from a rank (abort reasons, endpoints in error messages) is shown on a
// terminal and embedded in JSON: printable ASCII only, bounded.
std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(std::min(text.size(), kMaxReportedText));
  for (const char c : text.substr(0, kMaxReportedText)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : '?');
  }
  if (text.size() > kMaxReportedText) out += "...";
  return out;
}

// --- signals --------------------------------------------------------------------------------

int g_signal_pipe = -1;

extern "C" void on_signal(int signo) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signo);
  ssize_t ignored = ::write(g_signal_pipe, &byte, 1);  // full pipe: a wake-up is pending anyway
  (void)ignored;
  errno = saved;
}

// Signals that end the job in order (teardown, then the seal; exit status 128 + N) instead of
// killing sempirun and leaving the ranks' own children and the log unsealed: an interrupt, a
// hang-up, a kill request, the resource and timer signals a batch system or a limit sends, and
// the other terminating signals a user or a tool may send (profiling timers, I/O, power).
constexpr int kJobEndingSignals[] = {SIGINT,  SIGTERM,   SIGHUP,  SIGQUIT, SIGALRM, SIGXCPU,
                                     SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,   SIGPWR};
// Signals passed on to every rank, as mpirun does: what a batch system's "warn before the end"
// (Slurm's --signal) or a user sends the job.
constexpr int kForwardedSignals[] = {SIGUSR1, SIGUSR2};
// Job control: the terminal stops sempirun's process group (Ctrl-Z, or a background job that
// reads or writes the terminal), but each rank leads a group of its own. sempirun stops the
// ranks, then itself; continued (fg, bg), it continues them.
constexpr int kStopSignals[] = {SIGTSTP, SIGTTIN, SIGTTOU};

bool listed(std::span<const int> signals, int signo) {
  return std::find(signals.begin(), signals.end(), signo) != signals.end();
}
bool ends_the_job(int signo) { return listed(kJobEndingSignals, signo); }
bool is_forwarded(int signo) { return listed(kForwardedSignals, signo); }
bool stops_the_job(int signo) { return listed(kStopSignals, signo); }

// The self-pipe: SIGCHLD and the signals above become bytes the event loop polls for. SIGPIPE is
// ignored so a vanished reader of our stdout cannot kill the launcher.
class SignalPipe {
 public:
  SignalPipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw Error(ErrorClass::io, std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    g_signal_pipe = write_.get();
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    // SIGHUP: a dropped ssh session must still end the job in order and seal its audit log.
    // Unless it was ignored when we started (nohup, or SIGINT for `sempirun &` in a script):
    // then the job keeps ignoring it, ranks included, as the user asked.
    std::vector<int> handled(std::begin(kJobEndingSignals), std::end(kJobEndingSignals));
    handled.insert(handled.end(), std::begin(kForwardedSignals), std::end(kForwardedSignals));
    handled.insert(handled.end(), std::begin(kStopSignals), std::end(kStopSignals));
    for (const int sig : handled) {
      ::sigaction(sig, nullptr, &saved_[sig]);
      if (saved_[sig].sa_handler == SIG_IGN) {
        inherited_ignored_ |= std::uint64_t{1} << sig;
        continue;
      }
      ::sigaction(sig, &action, nullptr);
    }
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    ::sigaction(SIGCHLD, &action, &saved_[SIGCHLD]);
    // The signal mask survives exec: a parent that blocked these (a supervisor that blocks
    // signals around its fork) would leave Ctrl-C and SIGTERM without effect, and a
    // scheduler would escalate to SIGKILL, leaving the log unsealed.
    sigset_t unblock;
    sigemptyset(&unblock);
    for (const int sig : handled) {
      if ((inherited_ignored_ & (std::uint64_t{1} << sig)) == 0) sigaddset(&unblock, sig);
    }
    sigaddset(&unblock, SIGCHLD);
    ::pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &saved_[SIGPIPE]);
  }
  ~SignalPipe() {
    for (const int sig : kJobEndingSignals) ::sigaction(sig, &saved_[sig], nullptr);
    for (const int sig : kForwardedSignals) ::sigaction(sig, &saved_[sig], nullptr);
    for (const int sig : kStopSignals) ::sigaction(sig, &saved_[sig], nullptr);
    for (const int sig : {SIGCHLD, SIGPIPE}) ::sigaction(sig, &saved_[sig], nullptr);
    g_signal_pipe = -1;
  }
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  [[nodiscard]] int fd() const noexcept { return read_.get(); }
  /// Wakes the event loop from another thread: a byte that is no signal.
  void wake() const noexcept {
    const unsigned char byte = 0;
    ssize_t ignored = ::write(write_.get(), &byte, 1);  // full pipe: a wake-up is pending anyway
    (void)ignored;
  }
  /// Bit N set: signal N was ignored when sempirun started, and stays ignored in the ranks.
  [[nodiscard]] std::uint64_t inherited_ignored() const noexcept { return inherited_ignored_; }

  /// Drains the pipe; returns the set of signals received since the last call.
  std::set<int> take() {
    std::set<int> seen;
    unsigned char buf[256];
    for (;;) {
      const ssize_t n = ::read(read_.get(), buf, sizeof buf);
      if (n > 0) {
        seen.insert(buf, buf + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return seen;
    }
  }

 private:
  UniqueFd read_;
  UniqueFd write_;
  struct sigaction saved_[NSIG] {};
  std::uint64_t inherited_ignored_ = 0;
};

// --- process hygiene ------------------------------------------------------------------------

// A launcher started with fd 0, 1 or 2 closed would hand those numbers to its own pipes.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (opened >= 0 && opened != fd) {
        ::dup2(opened, fd);
        ::close(opened);
      }
    }
  }
}

// Three descriptors per rank: 4096 ranks need more than the usual soft limit of 1024.
std::optional<rlimit> raise_fd_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return std::nullopt;
  const rlimit original = limit;
  if (limit.rlim_cur != limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return std::nullopt;
  }
  return original;
}

std::string variable_name(std::string_view entry) {
  return std::string(entry.substr(0, entry.find('=')));
}

// Longest write_error a rank may report (an strerror text is far shorter).
constexpr std::size_t kMaxWriteErrorBytes = 200;

// {"seq":N,"hash":HEX64[,"write_error":TEXT]} from a rank's finalize or audit_head message.
std::optional<audit::ChainHead> parse_head(const nlohmann::json& value) {
  if (!value.is_object()) return std::nullopt;
  const auto seq = value.find("seq");
  const auto hash = value.find("hash");
  if (seq == value.end() || !seq->is_number_integer() || seq->get<std::int64_t>() < -1 ||
      hash == value.end() || !hash->is_string()) {
    return std::nullopt;
  }
  const auto& text = hash->get_ref<const std::string&>();
  if (text.size() != 64 || !is_lower_hex(text)) {
    return std::nullopt;
  }
  audit::ChainHead head{seq->get<std::int64_t>(), text};
  if (const auto error = value.find("write_error"); error != value.end()) {
    if (!error->is_string() || error->get_ref<const std::string&>().empty() ||
        error->get_ref<const std::string&>().size() > kMaxWriteErrorBytes) {
      return std::nullopt;
    }
    head.write_error = error->get<std::string>();
  }
  return head;
}

// How the log of a rank that died before it could report its head at finalize ends, as its
// file has it: the head is its last complete line, and what follows that (a record cut off as
// it was written) is sealed too, so that nothing can be added there afterwards.
struct LogFileEnd {
  audit::ChainHead head;
  std::string cut_off;
};

std::optional<LogFileEnd> end_of_log_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) {
    return std::nullopt;
  }
  LogFileEnd result;
  auto end = audit::read_log_end(path);
  if (!end) {
    result.head = {-1, std::string(64, 'f')};  // unreadable: matches nothing
    return result;
  }
  result.cut_off = std::move(end->cut_off);
  if (!end->last_line.empty()) {
    // Its sequence number read as the verifier reads it; a line that is no record has seq -1
    // and still a hash to seal.
    audit::Record record;
    record.json = audit::parse_record(end->last_line);  // the rank wrote it: nesting checked first
    result.head = {record.seq(), to_hex(audit::sha256(end->last_line))};
  }
  return result;
}

// Both descriptors refer to the same file (or pipe, or terminal).
bool same_file(int a, int b) {
  struct stat sa {};
  struct stat sb {};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// Our children, from /proc/self/task/*/children (empty if the kernel does not offer it).
std::vector<pid_t> children_of_this_process() {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "children");
    pid_t pid = 0;
    while (in >> pid) pids.push_back(pid);
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

}  // namespace

// --- the job --------------------------------------------------------------------------------

class Launcher::Job {
 public:
  Job(const LaunchOptions& options, const policy::PolicyDocument& policy)
      : options_(options),
        policy_(policy),
        started_(Clock::now()),
        validity_(options.timeout ? *options.timeout + std::chrono::hours(1)
                                  : std::chrono::seconds(std::chrono::hours(24))) {}

  int run() {
    // The job CA key and the audit seal key exist only in this process. Non-dumpable, it
    // writes no core file holding them if it crashes, and no other process of the user can
    // read them through ptrace or /proc/PID/mem. sempirun runs no application code, so no
    // debugging is lost; ranks are dumpable again once they exec.
    if (::prctl(PR_SET_DUMPABLE, 0) != 0) {
      throw Error(ErrorClass::io, std::string("cannot protect the job's keys from core dumps: ") +
                                      std::strerror(errno));
    }
    // Descendants a rank leaves behind, even outside its process group (setsid), become our
    // children when their parents die, so that the end of the job can end them too.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
      report(std::string("warning: cannot become the subreaper of the ranks' children (") +
             std::strerror(errno) + "): what a rank leaves running may outlive the job");
    }
    ensure_standard_fds();
    const auto nofile = raise_fd_limit();
    check_fd_budget();
    SignalPipe signals;
    signals_ = &signals;
    children_before_job_ = children_of_this_process();
    // Declared after `signals`, so they are gone before the pipe their wake-ups write to.
    // stdout and stderr on one file (2>&1) share one writer: one queue keeps the order in
    // which the launcher read the lines, and no write of one stream splits a line of the other.
    OutputWriter out(STDOUT_FILENO, [&signals] { signals.wake(); });
    std::optional<OutputWriter> own_err;
    if (!same_file(STDOUT_FILENO, STDERR_FILENO)) {
      own_err.emplace(STDERR_FILENO, [&signals] { signals.wake(); });
    }
    OutputWriter& err = own_err ? *own_err : out;
    stdout_ = &out;
    stderr_ = &err;
    stderr_line_ = own_err ? &own_stderr_line_ : &stdout_line_;

    // Before the first random bytes: OpenSSL then keeps its generators' state there too.
    pki::ensure_secure_heap();
    const auto job = pki::JobId::random();
    socket_dir_.emplace();
    if (!socket_dir_->failure().empty()) {
      report("warning: ranks on this host will use TCP: " + socket_dir_->failure());
    }
    enrollment_.emplace(pki::JobCa::create(job, validity_), policy_, options_.size, validity_,
                        socket_dir_->path());
    start_audit(job);
    std::vector<std::vector<std::string>> app_env;  // each context's ranks' environment
    for (const auto& app : options_.apps) app_env.push_back(build_base_env(app));
    if (options_.timeout) job_deadline_ = started_ + *options_.timeout;

    // A terminal is read here and passed on through a pipe (TerminalInput says why).
    if (options_.stdin_rank && ::isatty(STDIN_FILENO) != 0) terminal_input_.emplace(STDIN_FILENO);
    // Several ranks share our stdout: pieces without a newline get one, so lines never join.
    const bool terminate = options_.tag_output || options_.size > 1;
    ranks_.reserve(options_.size);
    // Every program is looked up once, before any rank starts: one that cannot run (a typo,
    // most often) ends the job before the ranks of the programs before it have started.
    // A --wdir was opened once (resolve_working_dir): the look-up and every rank of its program
    // use the directory so opened, whatever is renamed later (SECURITY.md).
    const auto directory_of = [](const AppContext& app) {
      if (app.working_dir && !app.working_dir_fd) {
        throw Error(ErrorClass::intern, "--wdir was not opened (resolve_working_dir)");
      }
      return app.working_dir_fd ? app.working_dir_fd->get() : AT_FDCWD;
    };
    std::uint32_t startable = options_.size;
    std::vector<std::string> app_program;  // the file each context's ranks exec
    for (std::size_t a = 0, first = 0; a < options_.apps.size(); first += options_.apps[a++].size) {
      const AppContext& app = options_.apps[a];
      try {
        app_program.push_back(find_program(app.program.front(), app_env[a], directory_of(app)));
      } catch (const CannotExecute& e) {
        report("error: " + printable_lines(e.what()));
        cause(e.shell_status(), "sempirun could not start rank " + std::to_string(first), true);
        startable = 0;
        break;
      }
    }
    for (std::uint32_t r = 0; r < startable; ++r) {
      const std::size_t a = options_.app_of(r);
      const AppContext& app = options_.apps[a];
      SpawnRequest request;
      request.argv = app.program;
      request.program = app_program[a];
      request.env = app_env[a];
      request.env.push_back(std::string(kAppnumVariable) + "=" + std::to_string(a));
      request.env.push_back("SEMPI_RANK=" + std::to_string(r));
      request.env.push_back("SEMPI_SIZE=" + std::to_string(options_.size));
      request.env.push_back("SEMPI_JOB_ID=" + job.hex());
      request.env.push_back("SEMPI_LOCAL_RANK=" + std::to_string(r));
      request.env.push_back("SEMPI_LOCAL_SIZE=" + std::to_string(options_.size));
      request.env.push_back(std::string(kBootstrapFdVariable) + "=" +
                            std::to_string(kRankBootstrapFd));
      // Open MPI's names, for what reads them before MPI_Init; one host, so local is world.
      for (const char* name :
           {"OMPI_COMM_WORLD_RANK=", "OMPI_COMM_WORLD_LOCAL_RANK=", "OMPI_COMM_WORLD_NODE_RANK="}) {
        request.env.push_back(name + std::to_string(r));
      }
      for (const char* name :
           {"OMPI_COMM_WORLD_SIZE=", "OMPI_COMM_WORLD_LOCAL_SIZE=", "OMPI_UNIVERSE_SIZE="}) {
        request.env.push_back(name + std::to_string(options_.size));
      }
      request.nofile_limit = nofile;
      if (app.working_dir) request.working_dir = *app.working_dir;
      if (app.working_dir_fd) request.working_dir_fd = app.working_dir_fd->get();
      request.ignored_signals = signals.inherited_ignored();
      const bool reads_stdin = options_.stdin_rank == r;
      if (reads_stdin) {
        request.stdin_fd = terminal_input_ ? terminal_input_->rank_end() : STDIN_FILENO;
      }
      try {
        auto process = RankProcess::spawn(request);
        if (reads_stdin && terminal_input_) terminal_input_->rank_started();
        ForwarderOptions fwd{options_.tag_output ? rank_tag(r) : std::string(), terminate};
        ranks_.push_back(
            std::make_unique<Rank>(std::move(process), fwd, out, stdout_line_, err, *stderr_line_));
        pid_to_rank_[ranks_.back()->process.pid()] = r;
        ++running_;
      } catch (const CannotExecute& e) {
        // Not a rank's failure: the job could not be started as asked (exec failed where
        // the look-up above found a program: it changed since, or its #! interpreter).
        report("error: " + printable_lines(e.what()));
        cause(e.shell_status(), "sempirun could not start rank " + std::to_string(r), true);
        break;
      } catch (const Error& e) {
        report("error: " + printable_lines(e.what()));
        cause(kExitUsage, "sempirun could not start rank " + std::to_string(r), true);
        break;
      }
    }

    event_loop(signals);
    for (auto& rank : ranks_) {
      rank->out.finish();
      rank->err.finish();
    }
    seal_audit();
    deliver_output(signals);
    return exit_status_.value_or(0);
  }

  /// The signal that ended the job (SIGINT, SIGTERM, ...), 0 if none did.
  [[nodiscard]] int interrupted_by() const noexcept { return interrupted_by_; }

 private:
  struct Rank {
    Rank(RankProcess p, const ForwarderOptions& fwd, OutputWriter& out_writer, OpenLine& out_line,
         OutputWriter& err_writer, OpenLine& err_line)
        : process(std::move(p)),
          out(
              fwd, [&out_writer](std::string_view s) { out_writer.write(s); }, out_line),
          err(
              fwd, [&err_writer](std::string_view s) { err_writer.write(s); }, err_line) {}
    RankProcess process;
    BootstrapReader reader;
    OutputForwarder out;
    OutputForwarder err;
    bool running = true;
    bool exited_unjoined = false;  // exited 0 before any rank enrolled
    std::optional<std::uint32_t> lost_peer;  // first peer this rank reported as lost
    // A failure (an exit, or an abort request) blamed on lost_peer, pending that peer's exit.
    struct DeferredFailure {
      std::string how;  // "exited with status 2", "called abort (code 43): ..."
      int status;
      bool abort;  // its rank.abort record is written already
    };
    std::optional<DeferredFailure> deferred_failure;
    // After a protocol error nothing more is read from the rank; the channel stays open so the
    // rank can still read our error reply and abort notice before it sees EOF.
    bool listening = true;
    // Bootstrap messages its socket has not taken yet, sent as it becomes writable: the event
    // loop never waits on one rank's channel (a rank that stops reading, or a welcome larger
    // than the socket buffer, holds up no other rank's messages, output or teardown).
    std::string unsent;
    std::size_t unsent_from = 0;
    std::optional<TimePoint> unsent_deadline;  // kBootstrapWriteTimeout after the last progress
    // The welcome queued, and all of its bytes written: a rank creates its log once welcomed.
    bool welcome_queued = false;
    bool welcomed = false;
  };

  // --- audit --------------------------------------------------------------------------------

  // The job's audit directory (--audit-dir, default ./sempi-audit/<jobid>), the launcher log
  // with its header record, and the job's seal key. Before any rank starts: a job that cannot
  // be audited does not run.
  void start_audit(const pki::JobId& job) {
    seal_key_.emplace(audit::SealKey::generate());
    if (options_.audit_key_out) {
      // First, and never over an existing file (which may be another job's pinned key): a job
      // whose key cannot be kept out of band does not run unpinned.
      pki::write_new_file(*options_.audit_key_out, seal_key_->public_key_hex() + "\n", 0600);
    }
    try {
      audit_dir_ = options_.audit_dir ? *options_.audit_dir
                                      : std::filesystem::path("sempi-audit") / job.hex();
      require_utf8_audit_dir(std::filesystem::absolute(audit_dir_));
      // Absolute (ranks may run elsewhere) and resolved, so no link on the way can redirect it.
      audit_dir_ = pki::make_private_dir(audit_dir_);
      require_utf8_audit_dir(audit_dir_);
      audit_ = audit::AuditLog::create(audit_dir_ / audit::kLauncherFile,
                                       {job.hex(), std::nullopt, /*flush_each=*/true});
    } catch (const Error& e) {
      forget_audit_key();
      if (options_.audit_dir) throw;
      // Started where it cannot write (a read-only directory, /proc): say where the default is.
      throw Error(e.error_class(), std::string(e.what()) +
                                       " (the default audit directory, ./sempi-audit, is in the "
                                       "working directory; choose another with --audit-dir)");
    } catch (...) {
      forget_audit_key();
      throw;
    }
    heads_.assign(options_.size, std::nullopt);
    const auto rules = policy::Policy::compile(policy_);
    audit_->event(
        "job.start", true, {},
        {{"ranks", options_.size},
         {"program", options_.apps.front().program.front()},
         {"apps", apps_record()},
         {"uid", static_cast<long>(::getuid())},
         {"policy_digest", to_hex(policy_.digest)},
         {"policy_default", policy_.is_default},
         {"policy_mode", policy::mode_name(rules.mode())},
         {"on_violation", policy::action_name(rules.action())},
         {"message_audit", policy::message_audit_name(rules.message_audit())},
         {"ca_fingerprint", to_hex(enrollment_->ca().certificate().fingerprint_sha256())},
         {"audit_key", {{"algorithm", "ed25519"}, {"public_key", seal_key_->public_key_hex()}}}});
    if (policy_.is_default) {
      audit_->event("policy.default", true,
                    "no --policy given: the built-in default policy applies (every rank may "
                    "talk to every rank, every operation on every communicator, no message "
                    "audit)");
    }
  }

  // No log, no job: the key of a job that never ran is not kept.
  void forget_audit_key() const {
    std::error_code ignored;
    if (options_.audit_key_out) std::filesystem::remove(*options_.audit_key_out, ignored);
  }

  void audit_event(std::string_view action, bool success, std::string_view reason,
                   const nlohmann::ordered_json& fields = nlohmann::ordered_json::object()) {
    if (audit_) audit_->event(action, success, reason, fields);
  }

  // Collects every rank's chain head (reported at finalize, or read from the file of a rank
  // that died) and signs them with the launcher's own head into the seal.
  void seal_audit() {
    if (!audit_) return;
    audit_event("job.end", exit_status_.value_or(0) == 0, end_reason_,
                {{"exit_status", exit_status_.value_or(0)},
                 {"policy_digest", to_hex(policy_.digest)},
                 {"ca_fingerprint", to_hex(enrollment_->ca().certificate().fingerprint_sha256())}});
    nlohmann::json ranks = nlohmann::json::array();
    for (std::uint32_t r = 0; r < options_.size; ++r) {
      const auto path = audit_dir_ / audit::rank_file_name(static_cast<int>(r));
      std::optional<audit::ChainHead> head = heads_[r];
      std::string source = "reported";
      std::string cut_off;
      if (!head) {
        if (auto end = end_of_log_file(path)) {
          head = end->head;
          cut_off = std::move(end->cut_off);
          source = "file";
        } else {
          // A rank creates its log once welcomed: without one, it never joined (never had the
          // welcome's last byte), or the log is gone (deleted by a rank, say), which verify
          // must report; or it died between the welcome and creating its log, which verify's
          // finding mentions.
          source = r < ranks_.size() && ranks_[r]->welcomed ? "missing" : "none";
        }
      }
      if (!head) head = audit::ChainHead{};
      nlohmann::json entry = {
          {"rank", r}, {"seq", head->seq}, {"hash", head->hash}, {"source", source}};
      // The rank could not write its whole chain: verify reports the records the file lacks
      // as lost to that error, not as removed.
      if (!head->write_error.empty()) entry["write_error"] = head->write_error;
      if (!cut_off.empty()) {
        entry["cut_off"] = {{"bytes", cut_off.size()}, {"hash", to_hex(audit::sha256(cut_off))}};
      }
      ranks.push_back(std::move(entry));
    }
    const audit::ChainHead launcher = audit_->head();
    const nlohmann::json seal = {{"job", enrollment_->ca().job().hex()},
                                 {"sealed_at", utc_now()},
                                 {"launcher", {{"seq", launcher.seq}, {"hash", launcher.hash}}},
                                 {"ranks", ranks}};
    audit_->signed_event("audit.seal", {{"seal", nlohmann::ordered_json(seal)}},
                         [this](std::string_view line) {
                           return seal_key_->sign(audit::seal_message(line));
                         });
    audit_->close();
  }

  // Each rank holds three of our descriptors (bootstrap, stdout, stderr), and starting one
  // takes a few more for a moment. Refusing up front beats failing halfway through the start.
  void check_fd_budget() const {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
    const rlim_t needed = static_cast<rlim_t>(options_.size) * 3 + 32;
    if (needed > limit.rlim_cur) {
      throw Error(ErrorClass::config,
                  "-n " + std::to_string(options_.size) + " needs about " + std::to_string(needed) +
                      " open files, but the limit is " + std::to_string(limit.rlim_cur) +
                      " (raise it with 'ulimit -n')");
    }
  }

  // What each application context runs, and on which ranks, for job.start.
  nlohmann::ordered_json apps_record() const {
    nlohmann::ordered_json apps = nlohmann::ordered_json::array();
    std::uint32_t first = 0;
    for (const auto& app : options_.apps) {
      apps.push_back(
          {{"program", app.program.front()}, {"first_rank", first}, {"ranks", app.size}});
      first += app.size;
    }
    return apps;
  }

  // The environment a context's ranks start from: ours, minus the variables we set per rank,
  // plus the context's -x.
  std::vector<std::string> build_base_env(const AppContext& app) const {
    std::set<std::string> overridden;
    for (const auto& setting : app.env) overridden.insert(setting.name);
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string name = variable_name(*e);
      if (!is_set_by_sempirun(name) && overridden.count(name) == 0) env.emplace_back(*e);
    }
    for (const auto& setting : app.env) {
      // A later -x for the same name replaces an earlier one.
      std::erase_if(env,
                    [&](const std::string& entry) { return variable_name(entry) == setting.name; });
      if (setting.value) {
        env.push_back(setting.name + "=" + *setting.value);
      } else if (const char* value = ::getenv(setting.name.c_str()); value != nullptr) {
        env.push_back(setting.name + "=" + value);
      } else {
        report("warning: -x " + setting.name + ": not set in this environment; not forwarded");
      }
    }
    // The shell's name for the working directory: with --wdir, the ranks' (over -x PWD=...
    // too), as under mpirun.
    if (app.working_dir) {
      std::erase_if(env, [](const std::string& entry) { return variable_name(entry) == "PWD"; });
      env.push_back("PWD=" + app.working_dir->string());
    }
    // Ours alone (an inherited one was left out above): the launcher accepts sockets only in
    // the directory it made.
    if (socket_dir_ && !socket_dir_->path().empty()) {
      env.push_back(std::string(kLocalDirVariable) + "=" + socket_dir_->path().string());
    }
    return env;
  }

  // --- event loop ---------------------------------------------------------------------------

  enum class Source { signals, bootstrap, out, err, input };
  struct Watch {
    Source source;
    std::uint32_t rank;
  };

  void event_loop(SignalPipe& signals) {
    std::vector<pollfd> fds;
    std::vector<Watch> watches;
    for (;;) {
      const auto now = Clock::now();
      check_deadlines(now);
      if (!output_congested()) flush_partial_lines(now);
      close_output_nobody_reads();
      if (running_ == 0) {
        if (!drain_deadline_) begin_drain(now);
        if (!any_output_open() || now >= *drain_deadline_) {
          end_orphans();
          return;
        }
      }

      fds.clear();
      watches.clear();
      fds.push_back({signals.fd(), POLLIN, 0});
      watches.push_back({Source::signals, 0});
      if (terminal_input_) {
        // Once the job ends, or the rank that reads is gone, typing stays with the shell.
        const std::uint32_t reader = *options_.stdin_rank;
        if (exit_status_ || reader >= ranks_.size() || !ranks_[reader]->running) {
          terminal_input_->close();
        }
        if (const auto watch = terminal_input_->watch()) {
          fds.push_back(*watch);
          watches.push_back({Source::input, 0});
        }
      }
      // Our reader is behind: leave the ranks' output in their pipes until it catches up (the
      // writer wakes us then), so the ranks wait in their writes instead of our memory growing.
      const bool hold_output = output_congested();
      for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
        Rank& rank = *ranks_[r];
        const bool unsent = rank.unsent_from < rank.unsent.size();
        if (rank.process.bootstrap().valid() && (rank.listening || unsent)) {
          const auto events =
              static_cast<short>((rank.listening ? POLLIN : 0) | (unsent ? POLLOUT : 0));
          fds.push_back({rank.process.bootstrap().get(), events, 0});
          watches.push_back({Source::bootstrap, r});
        }
        if (hold_output) continue;
        if (rank.process.out().valid()) {
          fds.push_back({rank.process.out().get(), POLLIN, 0});
          watches.push_back({Source::out, r});
        }
        if (rank.process.err().valid()) {
          fds.push_back({rank.process.err().get(), POLLIN, 0});
          watches.push_back({Source::err, r});
        }
      }

      const int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(Clock::now(), hold_output));
      if (rc < 0 && errno != EINTR) {
        report(std::string("error: poll failed: ") + std::strerror(errno));
        cause(1, "sempirun failed", true);
      }
      if (rc > 0) {
        for (std::size_t i = 0; i < fds.size(); ++i) {
          if (fds[i].revents == 0) continue;
          const Watch w = watches[i];
          switch (w.source) {
            case Source::signals:
              for (const int sig : signals.take()) on_launcher_signal(sig);
              break;
            case Source::bootstrap:
              // Read first: what the rank sent counts even if its channel is now closed.
              read_bootstrap(w.rank);
              send_unsent(w.rank);
              break;
            case Source::out:
            case Source::err:
              // Asked again before each read: the queue may have filled in this round.
              if (output_congested()) break;
              read_output(w.rank, w.source == Source::out, false);
              break;
            case Source::input:
              terminal_input_->on_ready();
              break;
          }
        }
      }
      // Cheap (one system call when nothing exited), and it makes a lost SIGCHLD harmless.
      reap();
    }
  }

  // After the seal: what the ranks wrote reaches our reader however slowly it reads. An
  // interrupt discards the rest; the job's exit status stands.
  void deliver_output(SignalPipe& signals) {
    auto notice_at = Clock::now() + kOutputNoticeDelay;
    bool noticed = false;
    std::optional<TimePoint> give_up_at;
    if (options_.timeout) {
      give_up_at = std::max(started_ + *options_.timeout, Clock::now()) + kOutputGraceAfterTimeout;
    }
    for (;;) {
      const bool out_done = stdout_->drained();  // both asked: each arms its own wake-up
      const bool err_done = stderr_->drained();
      if (out_done && err_done) return;
      const auto now = Clock::now();
      if (give_up_at && now >= *give_up_at) {
        if (!out_done) stdout_->abandon();
        if (!err_done) stderr_->abandon();
        // Read if stderr still is; an abandoned stderr drops it.
        report(std::string("the reader did not take the job's output within --timeout; the rest ") +
               "of its " + (out_done ? "stderr" : "stdout") + " is discarded");
        return;
      }
      if (!noticed && now >= notice_at) {
        noticed = true;
        report(std::string("the job has ended; waiting for the reader of ") +
               (out_done ? "stderr" : "stdout") +
               " to take the rest of its output (interrupt to discard it)");
      }
      auto wait =
          noticed ? kMaxPollWait : std::chrono::ceil<std::chrono::milliseconds>(notice_at - now);
      if (give_up_at) {
        wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(*give_up_at - now));
      }
      pollfd p{signals.fd(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(wait.count()));
      for (const int sig : signals.take()) {
        if (stops_the_job(sig)) {  // Ctrl-Z while a pager reads: the time stopped does not count
          const auto stopped = stop_the_job(sig);
          notice_at += stopped;
          if (give_up_at) *give_up_at += stopped;
        }
        if (ends_the_job(sig)) {
          stdout_->abandon();
          stderr_->abandon();
          return;
        }
      }
    }
  }

  // Our reader is behind on either stream (the writer wakes us once it has caught up).
  bool output_congested() { return stdout_->congested() || stderr_->congested(); }

  // sempirun's own messages, in line with the ranks' stderr, on a line of their own: a rank's
  // partial line on the same output is ended first.
  void report(const std::string& message) const {
    if (stderr_ == nullptr) {  // before the output writers exist (the start of run())
      const std::string line = "sempirun: " + message + "\n";
      ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
      (void)ignored;
      return;
    }
    stderr_->write(std::string(stderr_line_->end_for(this)) + "sempirun: " + message + "\n");
  }

  // `output_held`: nothing is read or flushed until the output drains, so partial lines due
  // do not count (they would make the loop spin).
  int poll_timeout_ms(TimePoint now, bool output_held) const {
    TimePoint next = now + kMaxPollWait;
    for (const auto& deadline :
         {job_deadline_, enroll_deadline_, term_at_, kill_at_, drain_deadline_, blame_deadline_}) {
      if (deadline) next = std::min(next, *deadline);
    }
    for (const auto& rank : ranks_) {
      if (rank->unsent_deadline) next = std::min(next, *rank->unsent_deadline);
    }
    for (const auto& rank : ranks_) {
      if (output_held) break;
      for (const OutputForwarder* fwd : {&rank->out, &rank->err}) {
        if (const auto due = fwd->partial_due()) next = std::min(next, *due);
      }
    }
    if (next <= now) return 0;
    // Round up so we never wake just before a deadline and spin.
    return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next - now).count());
  }

  void check_deadlines(TimePoint now) {
    for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
      Rank& rank = *ranks_[r];
      if (!rank.unsent_deadline || now < *rank.unsent_deadline) continue;
      // Written only when poll() says so: a long pass of the loop (queueing every rank's
      // welcome at 4096 ranks on a busy host) must not blame a rank that reads meanwhile.
      send_unsent(r);
      if (!rank.unsent_deadline || now < *rank.unsent_deadline) continue;
      drop_unsent(rank);
      rank.process.bootstrap().reset();  // it sees EOF, if it ever reads again
      blame_stalled_reader(r, "for " + std::to_string(kBootstrapWriteTimeout.count()) + " s");
    }
    if (job_deadline_ && now >= *job_deadline_) {
      job_deadline_.reset();
      if (!exit_status_) {
        std::string still;
        for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
          if (!ranks_[r]->running) continue;
          if (!still.empty()) still += ",";
          still += std::to_string(r);
        }
        const std::string what =
            "job exceeded --timeout " + std::to_string(options_.timeout->count()) + " s";
        report(what + "; ranks still running: " + still);
        cause(kExitTimeout, what, false);
      }
    }
    // Ranks that enrolled wait for the welcome, which needs every rank: the ones that never
    // enrolled are the cause, and only the launcher knows which they are.
    if (enroll_deadline_ && now >= *enroll_deadline_) {
      enroll_deadline_.reset();
      std::vector<std::uint32_t> missing;
      for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
        if (!enrollment_->is_enrolled(r)) missing.push_back(r);
      }
      if (!exit_status_ && !missing.empty()) {
        std::string others;
        for (std::size_t i = 1; i < missing.size(); ++i) {
          others += (i == 1 ? " (nor did rank" + std::string(missing.size() > 2 ? "s " : " ")
                            : std::string(",")) +
                    std::to_string(missing[i]);
        }
        if (!others.empty()) others += ")";
        fail_rank(missing.front(),
                  "did not enroll within " + std::to_string(options_.start_timeout.count()) +
                      " s of the first rank (SEMPI_START_TIMEOUT)" + others,
                  kExitTimeout);
      }
    }
    // The blamed peers did not exit in time, or every rank has exited and none of them was
    // the cause (ranks that lost each other blame each other): report the first deferred
    // failure as it is.
    if (blame_deadline_ && (now >= *blame_deadline_ || running_ == 0)) {
      blame_deadline_.reset();
      for (std::uint32_t r = 0; r < ranks_.size() && !exit_status_; ++r) {
        if (const auto& failure = ranks_[r]->deferred_failure) report_deferred(r, *failure);
      }
    }
    if (term_at_ && now >= *term_at_) {
      term_at_.reset();
      signal_running(SIGTERM);
      kill_at_ = now + kKillGrace;
    }
    if (kill_at_ && now >= *kill_at_) {
      kill_at_.reset();
      signal_running(SIGKILL);
    }
  }

  // --- teardown -----------------------------------------------------------------------------

  // Records the job's exit status (the first cause wins) and starts the teardown: an abort
  // notice to every rank, then SIGTERM (now if `immediate`, else after kTermGrace), then SIGKILL.
  void cause(int status, const std::string& reason, bool immediate) {
    if (exit_status_) return;
    exit_status_ = status;
    end_reason_ = reason;
    audit_event("job.teardown", false, reason, {{"exit_status", status}});
    const nlohmann::json notice = {{"type", "abort"}, {"reason", reason}};
    // Queued like any message: a rank that takes nothing for kBootstrapWriteTimeout sees EOF
    // instead (check_deadlines), if the teardown's signals have not ended it before.
    for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r]->running) send(r, notice);
    }
    if (immediate) {
      signal_running(SIGTERM);
      kill_at_ = Clock::now() + kKillGrace;
    } else {
      term_at_ = Clock::now() + kTermGrace;
    }
  }

  void signal_running(int signo) {
    for (auto& rank : ranks_) {
      if (rank->running) rank->process.signal(signo);
    }
  }

  // SIGSTOP for the ranks: it cannot be caught or ignored, and no orphaned-group rule drops it.
  // sempirun stops with the signal it got, so the shell reports the job as stopped; if its own
  // group is orphaned the kernel discards that, and the ranks are continued at once. The signal
  // goes to the whole process while blocked here, so that one already on its way (an output
  // thread's SIGTTOU) merges with it: one stop, one fg.
  // The launcher's own deadlines move by the time stopped (the ranks' do not: a job stopped
  // for longer than SEMPI_START_TIMEOUT or SEMPI_FINALIZE_TIMEOUT may fail once continued).
  Clock::duration stop_the_job(int signo) {
    signal_running(SIGSTOP);
    sigset_t just_this;
    sigemptyset(&just_this);
    sigaddset(&just_this, signo);
    ::pthread_sigmask(SIG_BLOCK, &just_this, nullptr);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    struct sigaction handler {};
    ::sigaction(signo, &default_action, &handler);
    const auto stopped_at = Clock::now();
    ::kill(::getpid(), signo);
    ::pthread_sigmask(SIG_UNBLOCK, &just_this, nullptr);  // stops here until continued
    ::sigaction(signo, &handler, nullptr);
    const auto stopped_for = Clock::now() - stopped_at;
    for (auto* deadline :
         {&enroll_deadline_, &blame_deadline_, &term_at_, &kill_at_, &drain_deadline_}) {
      if (*deadline) **deadline += stopped_for;
    }
    for (auto& rank : ranks_) {
      if (rank->unsent_deadline) *rank->unsent_deadline += stopped_for;
    }
    signal_running(SIGCONT);
    return stopped_for;  // for the callers' own deadlines
  }

  void on_launcher_signal(int signo) {
    if (stops_the_job(signo)) {
      (void)stop_the_job(signo);
      return;
    }
    if (is_forwarded(signo)) {
      for (auto& rank : ranks_) {
        if (rank->running) rank->process.forward(signo);
      }
      return;
    }
    if (!ends_the_job(signo)) return;  // SIGCHLD: see reap()
    if (!exit_status_) {
      report("interrupted; terminating the job");
      interrupted_by_ = signo;
      cause(kExitSignalBase + signo, "sempirun was interrupted", true);
      return;
    }
    // Interrupted again, or during a teardown: skip ahead one step.
    if (term_at_) {
      term_at_.reset();
      signal_running(SIGTERM);
      kill_at_ = Clock::now() + kKillGrace;
    } else {
      kill_at_.reset();
      signal_running(SIGKILL);
    }
  }

  // Every rank has been reaped. Whatever a rank left behind (in its process group or not, with
  // setsid) has become our child as its parent died (we are the subreaper), and may still hold
  // its output pipes: end_orphans() ends it. Not by signalling the rank's process group: the
  // rank was reaped, so its number may be another process's group by now.
  void begin_drain(TimePoint now) {
    drain_deadline_ = now + kDrainGrace;
    end_orphans();
  }

  // Every rank has been reaped, so each child we still have, apart from those we had before
  // the job (a process `exec sempirun` left us), is a descendant of a rank that left its
  // process group and was handed to us when its parent died: kill and reap them, and again
  // the children their deaths hand over. Bounded: kKillGrace in all, and a child we may not
  // signal (it changed its user) or that does not die (uninterruptible sleep) is left alone.
  void end_orphans() {
    auto deadline = Clock::now() + kKillGrace;
    std::set<pid_t> spared(children_before_job_.begin(), children_before_job_.end());
    while (Clock::now() < deadline) {
      std::vector<pid_t> orphans;
      for (const pid_t pid : children_of_this_process()) {
        if (spared.count(pid) == 0) orphans.push_back(pid);
      }
      if (orphans.empty()) return;
      for (const pid_t pid : orphans) {
        if (::kill(pid, SIGKILL) != 0) spared.insert(pid);
      }
      // Reap what died; wait for SIGCHLD (the self-pipe) for the rest, until the deadline.
      bool reaped = false;
      for (const pid_t pid : orphans) {
        if (::waitpid(pid, nullptr, WNOHANG) > 0) reaped = true;
      }
      if (!reaped) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd p{signals_->fd(), POLLIN, 0};
        if (left.count() > 0) ::poll(&p, 1, static_cast<int>(left.count()));
        for (const int sig : signals_->take()) {  // SIGCHLD is what this waits for
          if (stops_the_job(sig)) deadline += stop_the_job(sig);
          if (ends_the_job(sig)) {
            on_launcher_signal(sig);
            return;
          }
        }
      }
    }
  }

  // Our stdout's (or stderr's) reader has gone, as in `sempirun ... | head -1`: the ranks' pipes
  // to it are closed, so that the ranks get EPIPE or SIGPIPE as they would in a shell pipeline
  // instead of writing on, unread, until the job's timeout.
  void close_output_nobody_reads() {
    for (const bool is_out : {true, false}) {
      if (!(is_out ? stdout_ : stderr_)->reader_gone()) continue;
      for (auto& rank : ranks_) {
        UniqueFd& fd = is_out ? rank->process.out() : rank->process.err();
        if (!fd.valid()) continue;
        (is_out ? rank->out : rank->err).finish();
        fd.reset();
      }
    }
  }

  bool any_output_open() const {
    return std::any_of(ranks_.begin(), ranks_.end(), [](const auto& rank) {
      return rank->process.out().valid() || rank->process.err().valid();
    });
  }

  // --- rank output --------------------------------------------------------------------------

  // Partial lines that waited kPartialLineHold go out, unless the rest of the line is already
  // in the pipe (sempirun may itself have been slow to read it): that is read first.
  void flush_partial_lines(TimePoint now) {
    for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
      Rank& rank = *ranks_[r];
      for (const bool is_out : {true, false}) {
        OutputForwarder& fwd = is_out ? rank.out : rank.err;
        const auto due = fwd.partial_due();
        if (!due || now < *due) continue;
        if ((is_out ? rank.process.out() : rank.process.err()).valid()) {
          read_output(r, is_out, false);
        }
        fwd.flush_partial(now);
      }
    }
  }

  // Reads once; or (`held`) what the pipe holds now and once more: the end of the stream
  // behind it, so that an exited rank's last unfinished line comes out before anything
  // sempirun says about its exit, or one chunk of what a child it left behind keeps writing.
  // Not until the pipe is empty, which such a child could postpone for ever: the event loop
  // reads the rest (the drain after the job bounds it).
  void read_output(std::uint32_t r, bool is_out, bool held) {
    Rank& rank = *ranks_[r];
    UniqueFd& fd = is_out ? rank.process.out() : rank.process.err();
    OutputForwarder& fwd = is_out ? rank.out : rank.err;
    char buf[kReadChunk];
    int in_pipe = 0;
    if (held && ::ioctl(fd.get(), FIONREAD, &in_pipe) != 0) in_pipe = 0;
    const auto held_bytes = static_cast<std::size_t>(std::max(in_pipe, 0));
    std::size_t got = 0;
    while (fd.valid()) {
      const ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        fwd.append(std::string_view(buf, static_cast<std::size_t>(n)), Clock::now());
        const bool within_held = got < held_bytes;
        got += static_cast<std::size_t>(n);
        if (within_held) continue;
        return;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      fwd.finish();  // EOF or error: the stream is over
      fd.reset();
    }
  }

  // --- bootstrap ----------------------------------------------------------------------------

  void read_bootstrap(std::uint32_t r) {
    Rank& rank = *ranks_[r];
    UniqueFd& fd = rank.process.bootstrap();
    if (!fd.valid() || !rank.listening) return;
    const std::error_code read_error = rank.reader.feed(fd.get());
    nlohmann::json message;
    std::error_code error;
    // Messages already received count even if the channel closed right after them.
    while (fd.valid() && rank.listening && rank.reader.next(message, error)) {
      handle_message(r, message);
    }
    if (!fd.valid() || !rank.listening) return;
    if (error) {
      protocol_error(r, "sent a malformed bootstrap message (" + error.message() + ")");
      return;
    }
    // EOF or a socket error: the rank closed its channel. Its exit status tells the story.
    if (read_error) {
      drop_unsent(rank);
      fd.reset();
    }
  }

  // Queues `message` for rank r and sends what its socket takes now; the event loop sends
  // the rest as the socket becomes writable (send_unsent).
  void send(std::uint32_t r, const nlohmann::json& message) {
    Rank& rank = *ranks_[r];
    UniqueFd& fd = rank.process.bootstrap();
    if (!fd.valid()) return;
    if (append_bootstrap_message(message, rank.unsent)) {
      // Nothing was queued: the message (a welcome with a big policy and address table) is
      // too large for the protocol. The job's fault, not the rank's.
      drop_unsent(rank);
      fd.reset();
      const std::string what = "a bootstrap message for rank " + std::to_string(r) + " is " +
                               std::to_string(bootstrap_message_text(message).size()) +
                               " bytes, more than " + std::to_string(kMaxBootstrapMessage);
      report("error: " + what + " (use a smaller policy or fewer ranks)");
      cause(1, what, true);
      return;
    }
    if (!rank.unsent_deadline) rank.unsent_deadline = Clock::now() + kBootstrapWriteTimeout;
    send_unsent(r);
  }

  void send_unsent(std::uint32_t r) {
    Rank& rank = *ranks_[r];
    UniqueFd& fd = rank.process.bootstrap();
    while (fd.valid() && rank.unsent_from < rank.unsent.size()) {
      const ssize_t n = ::send(fd.get(), rank.unsent.data() + rank.unsent_from,
                               rank.unsent.size() - rank.unsent_from, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        rank.unsent_from += static_cast<std::size_t>(n);
        rank.unsent_deadline = Clock::now() + kBootstrapWriteTimeout;  // it is reading
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      const int error = n < 0 ? errno : EPIPE;
      drop_unsent(rank);
      fd.reset();
      // A rank that exited is reported when it is reaped; any other failure is the channel's.
      if (error != EPIPE) blame_stalled_reader(r, "(" + std::string(std::strerror(error)) + ")");
      return;
    }
    // All of it written: a welcome among it was delivered (seal_audit).
    if (fd.valid() && rank.welcome_queued) rank.welcomed = true;
    drop_unsent(rank);
  }

  // A running rank whose bootstrap channel takes no more is the job's cause, unless the job is
  // already ending (then the message was an abort notice, and the rank is being ended anyway).
  void blame_stalled_reader(std::uint32_t r, const std::string& how) {
    if (!ranks_[r]->running || exit_status_) return;
    report("rank " + std::to_string(r) + " did not accept a bootstrap message " + how);
    cause(1, "rank " + std::to_string(r) + " stopped reading its bootstrap channel", false);
  }

  static void drop_unsent(Rank& rank) {
    rank.unsent.clear();
    rank.unsent_from = 0;
    rank.unsent_deadline.reset();
  }

  // Refuses the rank's request and fails the job: a rank that misbehaves during bootstrap
  // cannot be part of a trustworthy job.
  void protocol_error(std::uint32_t r, const std::string& what) {
    const std::string text = "rank " + std::to_string(r) + " " + sanitize(what);
    send(r, {{"type", "error"}, {"reason", text}});
    ranks_[r]->listening = false;
    if (exit_status_) return;
    report(text);
    cause(1, text, false);
  }

  void handle_message(std::uint32_t r, const nlohmann::json& message) {
    const auto& type = message["type"].get_ref<const std::string&>();
    if (type == "abort") {
      handle_abort(r, message);
      return;
    }
    if (type == "peer_lost") {
      // A rank has no peers before its welcome: a report then could only shift the blame.
      if (!enrollment_->all_enrolled()) {
        protocol_error(r, "sent peer_lost before the job started");
        return;
      }
      // The rank's connection to `peer` broke without a goodbye. If the rank now fails, that is
      // a consequence: the job's cause is the peer (see on_exit).
      if (const auto it = message.find("peer"); it != message.end() && it->is_number_unsigned() &&
                                                 it->get<std::uint64_t>() < ranks_.size() &&
                                                 !ranks_[r]->lost_peer) {
        ranks_[r]->lost_peer = static_cast<std::uint32_t>(it->get<std::uint64_t>());
      }
      return;
    }
    if (type == "audit_head") {
      // Taken during a teardown too: a rank that failed after finalize must not make the seal
      // read another rank's head back from its file, which anyone may have edited since.
      handle_audit_head(r, message);
      return;
    }
    if (exit_status_) return;  // tearing down: no more certificates, no more fences
    if (type == "enroll") {
      if (const auto refused = enrollment_->enroll(r, message)) {
        audit_event("rank.enroll", false, *refused, {{"rank", r}});
        protocol_error(r, "was refused enrollment: " + *refused);
        return;
      }
      audit_event("rank.enroll", true, {}, {{"rank", r}});
      // The first rank waits for the others from now on: not forever (see check_deadlines).
      if (!enroll_deadline_) enroll_deadline_ = Clock::now() + options_.start_timeout;
      audit_event("certificate.issue", true, {},
                  {{"rank", r},
                   {"fingerprint", to_hex(enrollment_->certificate(r)->fingerprint_sha256())}});
      for (std::uint32_t u = 0; u < ranks_.size(); ++u) {
        if (ranks_[u]->exited_unjoined) {
          fail_rank(u, "exited without joining the job", 1);
          return;
        }
      }
      if (enrollment_->all_enrolled()) {
        enroll_deadline_.reset();
        // Every rank runs here, on the CPUs of our affinity mask, which they inherit. Read once:
        // every rank must get the same answer (their collectives choose by it).
        const bool oversubscribed = options_.size > static_cast<std::uint32_t>(usable_cpus());
        for (std::uint32_t w = 0; w < ranks_.size() && !exit_status_; ++w) {
          auto welcome = enrollment_->welcome(w);
          welcome["audit_dir"] = audit_dir_.string();
          welcome["oversubscribed"] = oversubscribed;
          ranks_[w]->welcome_queued = true;
          send(w, welcome);
        }
      }
    } else if (type == "finalize") {
      std::optional<audit::ChainHead> head;
      if (const auto it = message.find("audit_head"); it != message.end()) {
        head = parse_head(*it);
        if (!head) {
          protocol_error(r, "sent a finalize with a malformed audit_head");
          return;
        }
      }
      if (const auto refused = enrollment_->finalize(r)) {
        protocol_error(r, "sent an invalid finalize: " + *refused);
        return;
      }
      if (head) heads_[r] = *head;
      audit_event(
          "rank.finalize", true, {},
          head ? nlohmann::ordered_json{{"rank", r}, {"audit_head", audit::chain_head_json(*head)}}
               : nlohmann::ordered_json{{"rank", r}});
      if (enrollment_->all_finalized()) {
        const nlohmann::json ok = {{"type", "finalize_ok"}};
        for (std::uint32_t w = 0; w < ranks_.size(); ++w) send(w, ok);
      }
    } else {
      protocol_error(r, "sent an unknown bootstrap message type '" + type + "'");
    }
  }

  // A rank reports its head only once its peers said goodbye: what it decided while it waited
  // in finalize is in the chain the seal covers.
  void handle_audit_head(std::uint32_t r, const nlohmann::json& message) {
    const auto it = message.find("audit_head");
    const auto head = it != message.end() ? parse_head(*it) : std::nullopt;
    const bool valid = head && enrollment_->is_finalized(r) && !heads_[r];
    if (!valid && exit_status_) return;  // tearing down: the job's cause is already known
    if (!head) {
      protocol_error(r, "sent a malformed audit_head");
      return;
    }
    if (!valid) {
      protocol_error(r, "sent an audit_head before finalize or twice");
      return;
    }
    heads_[r] = *head;
    if (!head->write_error.empty()) {
      report("rank " + std::to_string(r) + " could not write its whole audit log (" +
             printable(head->write_error) + "): records were lost");
    }
    audit_event("rank.audit_head", head->write_error.empty(),
                head->write_error.empty() ? "" : "the rank could not write its whole audit log",
                {{"rank", r}, {"audit_head", audit::chain_head_json(*head)}});
  }

  void handle_abort(std::uint32_t r, const nlohmann::json& message) {
    if (exit_status_) return;
    long long code = 1;
    if (const auto it = message.find("code"); it != message.end() && it->is_number_integer()) {
      code = it->get<long long>();
    }
    std::string reason;
    if (const auto it = message.find("reason"); it != message.end() && it->is_string()) {
      reason = sanitize(it->get_ref<const std::string&>());
    }
    const std::string how =
        "called abort (code " + std::to_string(code) + ")" + (reason.empty() ? "" : ": " + reason);
    audit_event("rank.abort", false, reason, {{"rank", r}, {"code", code}});
    // Exit statuses are 8 bits; a code outside 1..255 still has to read as a failure.
    Rank::DeferredFailure failure{how, code >= 1 && code <= 255 ? static_cast<int>(code) : 1, true};
    // An abort because a peer vanished (MPI's default error handler on a failed receive) is a
    // consequence, like such a rank's exit: the peer's own exit status is the cause.
    if (blames_lost_peer(*ranks_[r])) {
      defer(*ranks_[r], std::move(failure));
      return;
    }
    report_deferred(r, failure);
  }

  // True if `rank` reported a peer lost that has not exited yet, or whose own failure waits
  // for its lost peer in turn: the rank's failure then waits for that cause (kBlameGrace).
  bool blames_lost_peer(const Rank& rank) const {
    return rank.lost_peer &&
           (ranks_[*rank.lost_peer]->running || ranks_[*rank.lost_peer]->deferred_failure);
  }

  void defer(Rank& rank, Rank::DeferredFailure failure) {
    if (!rank.deferred_failure) rank.deferred_failure = std::move(failure);  // the first says why
    if (!blame_deadline_) blame_deadline_ = Clock::now() + kBlameGrace;
  }

  void report_deferred(std::uint32_t r, const Rank::DeferredFailure& failure) {
    if (!failure.abort) {
      fail_rank(r, failure.how, failure.status);
      return;
    }
    const std::string text = "rank " + std::to_string(r) + " " + failure.how;
    report(text);
    cause(failure.status, text, false);
  }

  // --- exits --------------------------------------------------------------------------------

  void reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) return;
      const auto it = pid_to_rank_.find(pid);
      if (it == pid_to_rank_.end()) continue;  // an orphan handed to us (see end_orphans)
      const std::uint32_t r = it->second;
      pid_to_rank_.erase(it);  // the pid may come back as an orphan's
      on_exit(r, ExitStatus::from_wait_status(status));
    }
  }

  void on_exit(std::uint32_t r, ExitStatus status) {
    Rank& rank = *ranks_[r];
    rank.running = false;
    --running_;
    // What the rank said before it died comes first: its last output and bootstrap messages
    // (an abort request must not be reported as a plain exit).
    read_output(r, true, true);
    read_output(r, false, true);
    read_bootstrap(r);
    drop_unsent(rank);
    rank.process.bootstrap().reset();
    if (exit_status_) return;

    if (!status.success()) {
      // A rank that failed because a peer vanished is not the cause: wait (briefly) for the
      // peer's own exit status, which is what the user needs to see. The peer may itself have
      // failed as a consequence and be waiting for its own lost peer (ranks exit in a chain, and
      // are reaped in pid order, not exit order): then this failure waits for that cause too.
      if (blames_lost_peer(rank)) {
        defer(rank, {status.describe(), status.shell_status(), false});
        return;
      }
      // Its abort request waited for the peer it blamed, which did not fail: the abort says why.
      if (rank.deferred_failure) {
        report_deferred(r, *rank.deferred_failure);
        return;
      }
      fail_rank(r, status.describe(), status.shell_status());
    } else if (rank.deferred_failure) {
      // An abort with code 0 (status 0 on exit): still an abort, once its blamed peer is seen.
      if (!blames_lost_peer(rank)) report_deferred(r, *rank.deferred_failure);
    } else if (enrollment_->is_enrolled(r)) {
      if (!enrollment_->is_finalized(r)) fail_rank(r, "exited without finalizing", 1);
    } else if (enrollment_->any_enrolled()) {
      fail_rank(r, "exited without joining the job", 1);
    } else {
      rank.exited_unjoined = true;  // fine, unless another rank enrolls later
    }
  }

  void fail_rank(std::uint32_t r, const std::string& how, int status) {
    const std::string text = "rank " + std::to_string(r) + " " + how;
    audit_event("rank.failure", false, how, {{"rank", r}, {"exit_status", status}});
    report(text);
    cause(status, text, false);
  }

  const LaunchOptions& options_;
  const policy::PolicyDocument& policy_;
  const TimePoint started_;
  const std::chrono::seconds validity_;
  std::optional<JobSocketDir> socket_dir_;  // removed when the launcher is (the job ended)
  std::optional<Enrollment> enrollment_;
  std::optional<TerminalInput> terminal_input_;  // sempirun's stdin is a terminal
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unordered_map<pid_t, std::uint32_t> pid_to_rank_;
  SignalPipe* signals_ = nullptr;   // set for the duration of run()
  std::vector<pid_t> children_before_job_;  // not ours to end (see end_orphans)
  OutputWriter* stdout_ = nullptr;  // set for the duration of run()
  OutputWriter* stderr_ = nullptr;
  OpenLine stdout_line_;
  OpenLine own_stderr_line_;               // when stderr is not the same file as stdout
  OpenLine* stderr_line_ = &stdout_line_;  // the one stderr_ writes to
  std::uint32_t running_ = 0;
  std::optional<int> exit_status_;
  int interrupted_by_ = 0;  // the signal that ended the job, if one did (Launcher::interrupted_by)
  std::optional<TimePoint> job_deadline_;
  std::optional<TimePoint> enroll_deadline_;  // armed by the first enrollment, until the last
  std::optional<TimePoint> term_at_;
  std::optional<TimePoint> kill_at_;
  std::optional<TimePoint> drain_deadline_;
  std::optional<TimePoint> blame_deadline_;
  // Audit: the job's directory and log, the seal key, and the heads ranks reported.
  std::filesystem::path audit_dir_;
  std::unique_ptr<audit::AuditLog> audit_;
  std::optional<audit::SealKey> seal_key_;
  std::vector<std::optional<audit::ChainHead>> heads_;
  std::string end_reason_;
};

Launcher::Launcher(LaunchOptions options, policy::PolicyDocument policy)
    : options_(std::move(options)), policy_(std::move(policy)) {}

Launcher::~Launcher() = default;

int Launcher::run() {
  Job job(options_, policy_);
  const int status = job.run();
  interrupted_by_ = job.interrupted_by();
  return status;
}

}  // namespace sempi::launch
