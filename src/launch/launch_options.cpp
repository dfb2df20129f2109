#include "launch/launch_options.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/printable.hpp"
#include "common/utf8.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "pki/pem_files.hpp"
#include "policy/policy.hpp"
#include "sempi/error.hpp"

namespace sempi::launch {
namespace {

constexpr const char* kUsage =
    "usage: sempirun [options] [--] PROGRAM [ARGS...]\n"
    "       sempirun [options] PROGRAM [ARGS...] : [options] PROGRAM2 [ARGS...] ...\n"
    "\n"
    "Starts PROGRAM as N ranks of one job. Every rank gets a certificate from a job CA that\n"
    "exists only in this process's memory; ranks talk mutually authenticated TLS 1.3.\n"
    "As with mpirun, ':' separates programs of one job (MPMD): each takes the next -n ranks,\n"
    "with its own -n, -x and --wdir (the other options are the job's, wherever given), and\n"
    "its ranks see its index (0, 1, ...) as MPI_APPNUM. An argument ':' always separates.\n"
    "\n"
    "options:\n"
    "  -n N, -np N          number of ranks of the program, 1..4096 in all; also -c,\n"
    "                       --n, --np. Default, as mpirun: one per slot, which is as\n"
    "                       many as -H gives this host (localhost:4; the last -H given,\n"
    "                       in any part, for all), else one per processor core (only\n"
    "                       those in this process's affinity mask: mpirun counts all)\n"
    "  -x VAR               forward VAR from this environment to the program's ranks\n"
    "                       (repeatable)\n"
    "  -x VAR=VALUE         set VAR=VALUE in the program's ranks' environment (repeatable)\n"
    "  --policy FILE        the job's policy (JSON, see 'sempi policy check'); default:\n"
    "                       every rank, every operation, every communicator\n"
    "  --audit-dir DIR      the job's audit log directory (mode 0700; must not hold a log\n"
    "                       yet, nor be writable by others); default ./sempi-audit/JOBID\n"
    "  --audit-key-out FILE write the audit seal's public key (hex) to FILE, which must\n"
    "                       not exist, as the job starts: kept where the logs are not, it\n"
    "                       lets 'sempi audit verify --public-key' detect a rewritten log\n"
    "  --timeout SECONDS    tear the job down after SECONDS; exit status 124. Output a\n"
    "                       reader has not taken 5 s after that (or after the job's\n"
    "                       end, if later) is discarded\n"
    "  --wdir DIR           run the program's ranks in DIR (also -wdir, -wd), where a\n"
    "                       relative PROGRAM is found too; links in DIR are resolved when\n"
    "                       the job starts, and PWD names the result. Default: this\n"
    "                       directory\n"
    "  --tag-output         prefix every output line with \"[rank R] \"\n"
    "  --stdin R|none       the rank that reads sempirun's standard input (default 0);\n"
    "                       the others read /dev/null. From a terminal, what is typed\n"
    "                       while the job is in the foreground\n"
    "  --oversubscribe      accepted for mpirun's sake: any number of ranks may share\n"
    "                       this host's cores\n"
    "  --allow-run-as-root  accepted for mpirun's sake: sempirun runs as any user\n"
    "  --bind-to none       accepted for mpirun's sake: ranks are not bound to cores;\n"
    "                       so are --map-by slot, core, ... (with :OVERSUBSCRIBE), which\n"
    "                       place ranks on one host no differently, and -H/--host naming\n"
    "                       only this host (its slots are no limit)\n"
    "  --help               print this help\n"
    "  --version            print the version\n"
    "  --                   end of options; PROGRAM follows\n"
    "\n"
    "Options stop at the first argument that is not an option: PROGRAM and its arguments,\n"
    "up to a ':', are passed to the ranks untouched. As with mpirun, a long option may start\n"
    "with one dash (-np, -wdir, -oversubscribe). mpirun's --mca, --hostfile, other hosts,\n"
    "other mappings and bindings are refused, each with the reason.\n"
    "\n"
    "Ranks see SEMPI_RANK, SEMPI_SIZE, SEMPI_JOB_ID, SEMPI_LOCAL_RANK, SEMPI_LOCAL_SIZE,\n"
    "SEMPI_APPNUM, SEMPI_BOOTSTRAP_FD (which init removes), SEMPI_LOCAL_DIR (if the job has\n"
    "a socket directory), and Open MPI's OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,\n"
    "_LOCAL_SIZE, _NODE_RANK and OMPI_UNIVERSE_SIZE; stdin: see --stdin; stdout and stderr\n"
    "are forwarded line by line (a line without its newline after 0.2 s; a program linked\n"
    "with sempi has its stdout line-buffered).\n"
    "\n"
    "exit status:\n"
    "  0        every rank exited 0 (and every rank that joined the job finalized)\n"
    "  1..255   the first failing rank's status (128+N if it was killed by signal N), or the\n"
    "           code a rank passed to abort (1 for a code outside 1..255, 0 included: an\n"
    "           abort is a failure); 1 if a rank exited 0 without finalizing\n"
    "  2        bad usage, bad policy file, or a rank's process could not be set up\n"
    "  124      --timeout expired, or a rank did not enroll within SEMPI_START_TIMEOUT\n"
    "           seconds (default 300) of the first\n"
    "  126      PROGRAM was found but cannot be executed (as a shell)\n"
    "  127      PROGRAM was not found (in the ranks' PATH, which -x PATH=... sets, nor in\n"
    "           the working directory)\n"
    "  128+N    sempirun was interrupted by signal N: SIGHUP (129), SIGINT (130), SIGQUIT,\n"
    "           SIGTERM (143), SIGALRM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO or\n"
    "           SIGPWR end the job in order (a signal ignored when sempirun started, as\n"
    "           under nohup, stays ignored, in the ranks too); then sempirun dies of the\n"
    "           same signal, as a shell expects, except SIGQUIT, SIGXCPU and SIGXFSZ\n"
    "           (no core file: it exits with 128+N)\n"
    "SIGUSR1 and SIGUSR2 are passed on to every rank. SIGTSTP (Ctrl-Z), SIGTTIN and SIGTTOU\n"
    "stop the ranks with sempirun; fg or bg continues them all.\n"
    "When a rank fails, the others receive an abort message, then SIGTERM after 2 s and\n"
    "SIGKILL after 2 more seconds (a rank that called abort leaves when its notice comes).\n";

// Names sempirun sets itself; letting -x override them would misdirect a rank.
// Ours, and the names Open MPI's launcher sets, which programs and tools read before MPI_Init
// (to pick a GPU, or PyTorch's and Horovod's start-up).
constexpr auto kReservedVariables = std::to_array<std::string_view>(
    {"SEMPI_BOOTSTRAP_FD", "SEMPI_RANK", "SEMPI_APPNUM", "SEMPI_SIZE", "SEMPI_JOB_ID",
     "SEMPI_LOCAL_RANK", "SEMPI_LOCAL_SIZE", "SEMPI_LOCAL_DIR", "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     "OMPI_COMM_WORLD_NODE_RANK", "OMPI_UNIVERSE_SIZE"});

[[noreturn]] void usage_error(const std::string& message) {
  throw Error(ErrorClass::config, message);
}

// mpirun's options that sempirun does not take, and why: a script written for mpirun gets a
// reason it can act on, not "unknown option".
struct NotTaken {
  std::string_view option;
  std::string_view why;
};
constexpr std::string_view kOtherHosts =
    "sempirun runs every rank on this host; it does not start ranks on other hosts";
constexpr std::string_view kPerHost =
    "sempirun runs every rank on this host, so ranks per host is ranks: give their number "
    "with -n";
constexpr std::string_view kPlacement =
    "sempirun places the ranks on this host in rank order and does not bind them; it takes "
    "--map-by with a plain object (slot, core, ...) and :OVERSUBSCRIBE, nothing else";
constexpr std::string_view kNoBinding =
    "sempirun does not bind ranks to cores (they run as under --bind-to none, which it takes)";
constexpr std::string_view kNoMca =
    "sempi has no MCA components; its settings are the ranks' SEMPI_* variables (README, "
    "\"Tuning knobs\"), set with -x";
constexpr auto kNotTaken = std::to_array<NotTaken>({
    {"--mca", kNoMca},
    {"--gmca", kNoMca},
    {"--hostfile", kOtherHosts},
    {"--machinefile", kOtherHosts},
    {"--default-hostfile", kOtherHosts},
    {"--npernode", kPerHost},
    {"-N", kPerHost},
    {"--rank-by", kPlacement},
    {"--cpus-per-proc", kNoBinding},
    {"--bind-to-core", kNoBinding},
    {"--report-bindings", kNoBinding},
    {"--cpu-set", kNoBinding},
});

// Equal, ignoring ASCII case.
bool same_text(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// True for a --map-by that places ranks on one host as sempirun does anyway: an object
// ("slot", "core", ...) and at most the OVERSUBSCRIBE modifier, in any case and each maybe
// shortened ("sock", "l3", "core:oversub"), as mpirun takes them; no ppr, seq, dist, PE=n,
// span or file (no start of those is the start of an object here, so what mpirun would read
// as one of them is refused).
bool plain_mapping(std::string_view policy) {
  const std::size_t colon = policy.find(':');
  const std::string_view object = policy.substr(0, colon);
  constexpr auto kObjects =
      std::to_array<std::string_view>({"slot", "hwthread", "core", "l1cache", "l2cache", "l3cache",
                                       "socket", "numa", "board", "node"});
  const auto starts = [](std::string_view word, std::string_view start) {
    return !start.empty() && same_text(word.substr(0, start.size()), start);
  };
  const auto known = [&](std::string_view o) { return starts(o, object); };
  if (!object.empty() && std::none_of(kObjects.begin(), kObjects.end(), known)) return false;
  return colon == std::string_view::npos ? !object.empty()
                                         : starts("OVERSUBSCRIBE", policy.substr(colon + 1));
}

// The option `arg` is, without an inline value: mpirun takes its long options with one dash
// too (-np, -wdir), so "-word" is "--word".
std::string canonical_flag(const std::string& arg, const std::string& flag) {
  const bool one_dash_long =
      !arg.starts_with("--") && arg.size() > 2 && arg.find('=') == std::string::npos;
  return one_dash_long ? "-" + arg : flag;
}

const NotTaken* not_taken(std::string_view flag) {
  for (const auto& o : kNotTaken) {
    if (o.option == flag) return &o;
  }
  return nullptr;
}

// Strict decimal: digits only (no sign, no spaces, no "0x"), within [min, max].
std::int64_t parse_decimal(const std::string& text, std::int64_t min, std::int64_t max,
                           const std::string& what) {
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) usage_error(what + " must be an integer, got '" + text + "'");
  std::int64_t value = 0;
  for (const char c : text) {
    value = value * 10 + (c - '0');
    if (value > max) break;  // stop before overflow; reported below
  }
  if (value < min || value > max) {
    usage_error(what + " must be between " + std::to_string(min) + " and " + std::to_string(max) +
                ", got '" + text + "'");
  }
  return value;
}

// The slots a -H/--host list ("a,b:4") names if every host in it is this one (a CI script's
// "-H localhost:4"), as mpirun counts them: N for "host:N" (0 too), 1 for a host without a
// count, added up over the list (at most 2^32 - 1). nullopt if it names another host, or none:
// empty entries ("a,") are skipped, as by mpirun, and an empty list names no host.
std::optional<std::uint64_t> slots_on_this_host(std::string_view hosts) {
  constexpr std::uint64_t kCap = UINT32_MAX;
  bool named = false;
  std::uint64_t slots = 0;
  char name[256] = {};
  const bool have_name = ::gethostname(name, sizeof name - 1) == 0;
  for (std::size_t start = 0; start <= hosts.size();) {
    const std::size_t comma = std::min(hosts.find(',', start), hosts.size());
    std::string_view host = hosts.substr(start, comma - start);
    std::uint64_t count = 1;
    const auto colon = host.rfind(':');
    if (colon != std::string_view::npos && colon + 1 < host.size() &&
        host.find_first_not_of("0123456789", colon + 1) == std::string_view::npos) {
      count = 0;
      for (const char c : host.substr(colon + 1)) {
        count = std::min(kCap, count * 10 + static_cast<std::uint64_t>(c - '0'));
      }
      host = host.substr(0, colon);  // "host:slots"
    }
    if (!host.empty()) {
      const bool here = same_text(host, "localhost") || host == "127.0.0.1" ||
                        (have_name && same_text(host, name));  // host names ignore case
      if (!here) return std::nullopt;
      named = true;
      slots = std::min(kCap, slots + count);
    }
    start = comma + 1;
  }
  if (!named) return std::nullopt;
  return slots;
}

bool valid_variable_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

EnvSetting parse_env_setting(const std::string& text) {
  const auto eq = text.find('=');
  EnvSetting setting;
  setting.name = text.substr(0, eq);
  if (eq != std::string::npos) setting.value = text.substr(eq + 1);
  if (!valid_variable_name(setting.name)) {
    usage_error("-x: invalid environment variable name '" + setting.name + "'");
  }
  if (is_set_by_sempirun(setting.name)) {
    usage_error("-x " + setting.name + ": this variable is set by sempirun for each rank");
  }
  return setting;
}

}  // namespace

bool is_set_by_sempirun(std::string_view name) {
  return std::find(kReservedVariables.begin(), kReservedVariables.end(), name) !=
         kReservedVariables.end();
}

ParsedCommandLine parse_launch_options(std::span<const std::string> args, std::uint32_t slots) {
  ParsedCommandLine parsed;
  LaunchOptions& options = parsed.options;
  std::size_t i = 0;

  // Value of the option at args[i]: "--opt=VALUE" inline, or the next argument.
  auto take_value = [&](const std::string& flag, std::optional<std::string> inline_value) {
    if (inline_value) return *inline_value;
    if (i + 1 >= args.size()) usage_error(flag + " requires a value");
    return args[++i];
  };

  // As mpirun: -H's slots for this host are the job's, the last part that has -H deciding
  // (repeated within a part, they add up); every part without -n runs on all of them, or on
  // `slots` (the cores) without -H. Not a limit: -n may ask for more, as --oversubscribe lets.
  std::optional<std::uint64_t> host_slots;
  std::string host_option;  // the -H options that set host_slots, for a message
  std::vector<bool> sized;  // each part: -n given
  for (;;) {  // one application context per round: its options, then its program
    AppContext& app = options.apps.emplace_back();
    bool have_size = false;
    bool part_named_host = false;
    for (; i < args.size(); ++i) {
      const std::string& arg = args[i];
      if (arg == "--") {
        ++i;
        break;
      }
      if (arg.size() < 2 || arg[0] != '-') break;  // the program ("-" alone is not an option)

      std::string flag = arg;
      std::optional<std::string> inline_value;
      if (arg.starts_with("--")) {
        if (const auto eq = arg.find('='); eq != std::string::npos) {
          flag = arg.substr(0, eq);
          inline_value = arg.substr(eq + 1);
        }
      }
      const std::string key = canonical_flag(arg, flag);  // `flag` stays as given, for messages
      const auto no_value = [&] {
        if (inline_value) usage_error(flag + " does not take a value");
      };
      // A path option: given once (`name` in the messages), not empty.
      const auto take_path = [&](std::optional<std::filesystem::path>& slot,
                                 const std::string& name, const char* what) {
        if (slot) usage_error(name + " given more than once");
        const std::string value = take_value(flag, inline_value);
        if (value.empty()) usage_error(name + " requires " + what);
        slot = value;
      };

      if (key == "-h" || key == "--help") {
        no_value();
        parsed.action = LaunchAction::help;
        return parsed;
      }
      if (key == "--version") {
        no_value();
        parsed.action = LaunchAction::version;
        return parsed;
      }
      // Open MPI's spellings of the rank count are accepted too (-np is --np).
      if (key == "-n" || key == "-c" || key == "--n" || key == "--np") {
        if (have_size) usage_error(flag + " given more than once");
        app.size = static_cast<std::uint32_t>(
            parse_decimal(take_value(flag, inline_value), 1, kMaxRanks, flag));
        have_size = true;
      } else if (key == "-x") {
        app.env.push_back(parse_env_setting(take_value(flag, inline_value)));
      } else if (key == "--policy") {
        take_path(options.policy_file, key, "a file name");
      } else if (key == "--audit-dir") {
        take_path(options.audit_dir, key, "a directory name");
      } else if (key == "--audit-key-out") {
        take_path(options.audit_key_out, key, "a file name");
      } else if (key == "--timeout") {
        if (options.timeout) usage_error("--timeout given more than once");
        options.timeout = std::chrono::seconds(
            parse_decimal(take_value(flag, inline_value), 1, kMaxTimeoutSeconds, "--timeout"));
      } else if (key == "--wdir" || key == "--wd") {
        take_path(app.working_dir, flag, "a directory name");  // Open MPI's (and -wdir, -wd)
      } else if (key == "--tag-output") {
        no_value();
        options.tag_output = true;
      } else if (key == "--stdin") {
        if (options.stdin_given) usage_error("--stdin given more than once");
        const std::string value = take_value(flag, inline_value);
        if (value == "none") {
          options.stdin_rank.reset();
        } else if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
          usage_error("--stdin takes a rank or 'none', got '" + value + "'");
        } else {
          options.stdin_rank =
              static_cast<std::uint32_t>(parse_decimal(value, 0, kMaxRanks - 1, "--stdin"));
        }
        options.stdin_given = true;
      } else if (key == "--oversubscribe") {
        // As Open MPI's: sempirun never refuses more ranks than cores (waiting ranks then yield
        // the core between polls), so scripts written for mpirun may keep it.
        no_value();
      } else if (key == "--allow-run-as-root") {
        // Open MPI refuses root without it; sempirun runs as whoever starts it (containers).
        no_value();
      } else if (key == "--bind-to") {
        // What sempirun does; any other binding it cannot honour.
        if (const std::string value = take_value(flag, inline_value); value != "none") {
          usage_error(flag + " " + value + ": " + std::string(kNoBinding));
        }
      } else if (key == "--map-by") {
        if (const std::string value = take_value(flag, inline_value); !plain_mapping(value)) {
          usage_error(flag + " " + value + ": " + std::string(kPlacement));
        }
      } else if (key == "-H" || key == "--host") {
        const std::string value = take_value(flag, inline_value);
        const auto named = slots_on_this_host(value);
        if (!named) usage_error(flag + " " + value + ": " + std::string(kOtherHosts));
        host_slots =
            std::min<std::uint64_t>(UINT32_MAX, (part_named_host ? *host_slots : 0) + *named);
        host_option = part_named_host ? host_option + " " + flag + " " + value : flag + " " + value;
        part_named_host = true;
      } else if (const NotTaken* o = not_taken(key); o != nullptr) {
        usage_error(flag + ": " + std::string(o->why));
      } else {
        usage_error("unknown option '" + arg + "'");
      }
    }

    sized.push_back(have_size);
    // The program and its arguments: up to the next ':' (as mpirun, even after "--"), or all
    // that is left.
    std::size_t end = i;
    while (end < args.size() && args[end] != ":") ++end;
    app.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i),
                       args.begin() + static_cast<std::ptrdiff_t>(end));
    if (app.program.empty()) {
      usage_error(options.apps.size() == 1 ? "no program given"
                                           : "no program given after ':' (context " +
                                                 std::to_string(options.apps.size() - 1) + ")");
    }
    if (app.program.front().empty()) usage_error("the program name is empty");
    if (end == args.size()) break;
    i = end + 1;  // past the ':'
  }

  // Too many -H slots make the job too large (below); too many cores, the largest job.
  const std::uint64_t default_size =
      host_slots ? *host_slots : std::clamp<std::uint32_t>(slots, 1, kMaxRanks);
  std::uint64_t ranks = 0;
  for (std::size_t a = 0; a < options.apps.size(); ++a) {
    AppContext& app = options.apps[a];
    if (!sized[a]) {
      if (default_size == 0) {
        usage_error(host_option + ": this host has no slots for a program without -n");
      }
      app.size = static_cast<std::uint32_t>(std::min<std::uint64_t>(default_size, kMaxRanks));
    }
    ranks += sized[a] ? app.size : default_size;
  }

  if (ranks > kMaxRanks) {
    usage_error("the job would have " + std::to_string(ranks) + " ranks; at most " +
                std::to_string(kMaxRanks));
  }
  options.size = static_cast<std::uint32_t>(ranks);
  if (options.stdin_rank && *options.stdin_rank >= options.size) {
    usage_error("--stdin " + std::to_string(*options.stdin_rank) + ": the job has only " +
                std::to_string(options.size) + (options.size == 1 ? " rank" : " ranks"));
  }
  return parsed;
}

std::size_t LaunchOptions::app_of(std::uint32_t rank) const {
  std::uint32_t first = 0;
  for (std::size_t a = 0; a < apps.size(); ++a) {
    if (rank - first < apps[a].size) return a;
    first += apps[a].size;
  }
  return apps.empty() ? 0 : apps.size() - 1;
}

policy::PolicyDocument load_policy(const LaunchOptions& options) {
  if (!options.policy_file) return policy::PolicyDocument::default_policy();
  std::error_code ec;
  if (std::filesystem::is_directory(*options.policy_file, ec)) {
    throw Error(ErrorClass::config,
                "policy file " + options.policy_file->string() + " is a directory");
  }
  auto document = policy::PolicyDocument::load(*options.policy_file);
  // Refuse an invalid policy before any rank starts; the message lists each JSON path.
  try {
    (void)policy::Policy::compile(document);
  } catch (const Error& e) {
    throw Error(ErrorClass::config, options.policy_file->string() + ": " + e.what());
  }
  return document;
}

void require_utf8_audit_dir(const std::filesystem::path& dir) {
  if (!is_utf8(dir.native())) {
    throw Error(ErrorClass::config, "the audit directory " + printable(dir.native()) +
                                        " is not valid UTF-8; choose another with --audit-dir");
  }
}

void prepare_audit_dir(const LaunchOptions& options) {
  if (!options.audit_dir) return;
  require_utf8_audit_dir(std::filesystem::absolute(*options.audit_dir));
  pki::make_private_dir(*options.audit_dir);
}

namespace {

void resolve_working_dir(AppContext& app) {
  if (!app.working_dir) return;
  const std::string given = app.working_dir->string();  // escaped where it is printed
  // Opened now, links and ".." resolved as the kernel does (so "link/.." is the link's parent,
  // as for mpirun): the look-up and every rank use this descriptor, so a rename after this,
  // of the directory or of a parent others may write to, cannot redirect them.
  transport::UniqueFd opened(::open(given.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!opened.valid() || ::faccessat(opened.get(), ".", X_OK, 0) != 0) {
    throw Error(ErrorClass::config, "--wdir " + given + ": " + std::strerror(errno));
  }
  // Above 2: sempirun started with stdin, stdout or stderr closed gives each /dev/null later,
  // and must not find this directory there instead.
  transport::UniqueFd dir(::fcntl(opened.get(), F_DUPFD_CLOEXEC, 3));
  if (!dir.valid())
    throw Error(ErrorClass::config, "--wdir " + given + ": " + std::strerror(errno));
  // Its name, for PWD and messages: what the kernel says was opened.
  std::error_code ec;
  auto name = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(dir.get()), ec);
  if (ec || !name.is_absolute()) name = std::filesystem::canonical(given, ec);  // no /proc
  if (ec) throw Error(ErrorClass::config, "--wdir " + given + ": " + ec.message());
  app.working_dir = name;
  app.working_dir_fd = std::make_shared<const transport::UniqueFd>(std::move(dir));
}

}  // namespace

void resolve_working_dir(LaunchOptions& options) {
  for (auto& app : options.apps) resolve_working_dir(app);
}

void resolve_start_timeout(LaunchOptions& options) {
  // The longest any context's ranks are given: the launcher must not end the wait before
  // the ranks themselves would.
  std::optional<std::chrono::seconds> longest;
  for (const auto& app : options.apps) {
    const char* value = ::getenv(kStartTimeoutVariable);
    for (const auto& setting : app.env) {  // a later -x replaces an earlier one
      if (setting.name != kStartTimeoutVariable) continue;
      value = setting.value ? setting.value->c_str() : ::getenv(kStartTimeoutVariable);
    }
    const auto timeout = start_timeout(value);
    if (!longest || timeout > *longest) longest = timeout;
  }
  options.start_timeout = longest.value_or(start_timeout(::getenv(kStartTimeoutVariable)));
}

const char* launch_usage() noexcept { return kUsage; }

}  // namespace sempi::launch
