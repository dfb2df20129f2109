// sempirun's command line: what parses, and every way it is refused.

#include "launch/launch_options.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sempi/error.hpp"

#include "support/temp_dir.hpp"

namespace sempi::launch {
namespace {

namespace fs = std::filesystem;

// `slots`: what a context without -n gets (sempirun passes the usable cores).
ParsedCommandLine parse(std::vector<std::string> args, std::uint32_t slots = 1) {
  return parse_launch_options(args, slots);
}

LaunchOptions run_options(std::vector<std::string> args) {
  auto parsed = parse(std::move(args));
  EXPECT_EQ(parsed.action, LaunchAction::run);
  return parsed.options;
}

// Expects a usage error whose message contains `needle`.
void expect_refused(std::vector<std::string> args, const std::string& needle) {
  try {
    parse(args);
    ADD_FAILURE() << "accepted: " << testing::PrintToString(args);
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

using sempi::test::TempDir;

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(LaunchOptions, Defaults) {
  const auto o = run_options({"prog"});
  EXPECT_EQ(o.size, 1u);
  EXPECT_TRUE(o.apps.at(0).env.empty());
  EXPECT_FALSE(o.policy_file);
  EXPECT_FALSE(o.audit_dir);
  EXPECT_FALSE(o.timeout);
  EXPECT_FALSE(o.tag_output);
  EXPECT_EQ(o.apps.at(0).program, std::vector<std::string>{"prog"});
}

// As mpirun: a program without -n runs on every slot (one rank per usable core), also in an
// MPMD part; -n overrides it, and -n 0 stays an error.
TEST(LaunchOptions, WithoutRankCountEverySlotGetsARank) {
  EXPECT_EQ(run_options({"prog"}).size, 1u);
  const auto o = parse({"prog"}, 6).options;
  EXPECT_EQ(o.size, 6u);
  EXPECT_EQ(o.apps.at(0).size, 6u);
  EXPECT_EQ(parse({"-n", "2", "prog"}, 6).options.size, 2u);
  const auto mpmd = parse({"a", ":", "-n", "1", "b", ":", "c"}, 3).options;
  ASSERT_EQ(mpmd.apps.size(), 3u);
  EXPECT_EQ(mpmd.apps[0].size, 3u);
  EXPECT_EQ(mpmd.apps[1].size, 1u);
  EXPECT_EQ(mpmd.apps[2].size, 3u);
  EXPECT_EQ(mpmd.size, 7u);
  EXPECT_EQ(parse({"prog"}, 0).options.size, 1u);  // no slots known: still one rank
  EXPECT_EQ(parse({"prog"}, 5000).options.size, kMaxRanks);
  EXPECT_THROW(parse({"-n", "4096", "a", ":", "b"}, 2), Error);
  expect_refused({"-np", "0", "prog"}, "-np must be between 1 and 4096");
}

TEST(LaunchOptions, AllFlags) {
  const auto o =
      run_options({"-n", "4", "-x", "A", "-x", "B=1=2", "-x", "C=", "--policy", "p.json",
                   "--audit-dir", "audit", "--timeout", "30", "--tag-output", "prog", "arg"});
  EXPECT_EQ(o.size, 4u);
  ASSERT_EQ(o.apps.at(0).env.size(), 3u);
  EXPECT_EQ(o.apps.at(0).env[0], (EnvSetting{"A", std::nullopt}));
  EXPECT_EQ(o.apps.at(0).env[1], (EnvSetting{"B", "1=2"}));
  EXPECT_EQ(o.apps.at(0).env[2], (EnvSetting{"C", ""}));
  EXPECT_EQ(o.policy_file, fs::path("p.json"));
  EXPECT_EQ(o.audit_dir, fs::path("audit"));
  EXPECT_EQ(o.timeout, std::chrono::seconds(30));
  EXPECT_TRUE(o.tag_output);
  EXPECT_EQ(o.apps.at(0).program, (std::vector<std::string>{"prog", "arg"}));
}

TEST(LaunchOptions, NpAndInlineLongValues) {
  const auto o = run_options({"-np", "4096", "--timeout=5", "--policy=x.json", "prog"});
  EXPECT_EQ(o.size, 4096u);
  EXPECT_EQ(o.timeout, std::chrono::seconds(5));
  EXPECT_EQ(o.policy_file, fs::path("x.json"));
}

TEST(LaunchOptions, OpenMpiSpellings) {
  EXPECT_EQ(run_options({"-c", "3", "prog"}).size, 3u);
  EXPECT_EQ(run_options({"--np", "5", "prog"}).size, 5u);
  EXPECT_EQ(run_options({"--n=6", "prog"}).size, 6u);
  const auto o = run_options({"--oversubscribe", "-np", "8", "prog"});
  EXPECT_EQ(o.size, 8u);
  EXPECT_EQ(o.apps.at(0).program, std::vector<std::string>{"prog"});
  expect_refused({"--oversubscribe=yes", "prog"}, "does not take a value");
  EXPECT_EQ(run_options({"--allow-run-as-root", "-n", "2", "prog"}).size, 2u);
  expect_refused({"--allow-run-as-root=1", "prog"}, "does not take a value");
  expect_refused({"-c", "2", "--np", "3", "prog"}, "more than once");
  expect_refused({"--np", "0", "prog"}, "--np must be between 1 and 4096");  // named as given
  // mpirun's long options with one dash, as it takes them.
  const auto dashed = run_options(
      {"-np", "3", "-oversubscribe", "-tag-output", "-wdir", "/tmp", "-timeout", "7", "prog"});
  EXPECT_EQ(dashed.size, 3u);
  EXPECT_TRUE(dashed.tag_output);
  EXPECT_EQ(dashed.apps.at(0).working_dir, fs::path("/tmp"));
  EXPECT_EQ(dashed.timeout, std::chrono::seconds(7));
  expect_refused({"-np", "0", "prog"}, "-np must be between 1 and 4096");
  expect_refused({"-timeout=7", "prog"}, "unknown option '-timeout=7'");
}

// What sempirun does (no binding) is accepted; what it cannot do is refused with the reason.
TEST(LaunchOptions, OpenMpiOptionsNotTakenSayWhy) {
  EXPECT_EQ(run_options({"--bind-to", "none", "prog"}).apps.at(0).program,
            std::vector<std::string>{"prog"});
  EXPECT_EQ(run_options({"-bind-to", "none", "prog"}).size, 1u);
  EXPECT_EQ(run_options({"--bind-to=none", "prog"}).size, 1u);
  expect_refused({"--bind-to", "core", "prog"},
                 "--bind-to core: sempirun does not bind ranks to cores (they run as under "
                 "--bind-to none, which it takes)");
  expect_refused({"--bind-to"}, "--bind-to requires a value");
  // Placement on one host that changes nothing is accepted; the rest is refused with why.
  EXPECT_EQ(run_options({"--map-by", "core", "prog"}).size, 1u);
  EXPECT_EQ(run_options({"--map-by", ":OVERSUBSCRIBE", "prog"}).size, 1u);
  EXPECT_EQ(run_options({"-map-by", "slot:OVERSUBSCRIBE", "prog"}).size, 1u);
  expect_refused({"--map-by", "ppr:2:node", "prog"}, "--map-by ppr:2:node: sempirun places");
  expect_refused({"--map-by", "core:PE=2", "prog"}, "--map-by core:PE=2: sempirun places");
  expect_refused({"--map-by", ":", "prog"}, "sempirun places");
  // Shortened, as mpirun takes them; not what mpirun would read as another kind of mapping.
  for (const char* shortened : {"sock", "l3", "hwt", "s", "NU", "core:oversub", ":o"}) {
    EXPECT_EQ(run_options({"--map-by", shortened, "prog"}).size, 1u) << shortened;
  }
  for (const char* other : {"se", "d", "p", "slots", "core:no", "core:PE=1", "core:"}) {
    expect_refused({"--map-by", other, "prog"}, "sempirun places");
  }
  EXPECT_EQ(run_options({"-H", "localhost:4", "-n", "2", "prog"}).size, 2u);
  // A program without -n runs on -H's slots, as with mpirun: N for "host:N", 1 without a count,
  // added up over the list and over repeated options in one part.
  EXPECT_EQ(parse({"-H", "localhost:4", "prog"}, 2).options.size, 4u);
  EXPECT_EQ(run_options({"--host", "localhost,127.0.0.1:2", "prog"}).size, 3u);
  EXPECT_EQ(run_options({"-H", "LOCALHOST,", "prog"}).size, 1u);  // as mpirun takes it
  EXPECT_EQ(run_options({"-H", "localhost:2", "--host=localhost:3", "prog"}).size, 5u);
  // The slots are the job's: every part without -n gets them all, and the last part's -H
  // decides (as mpirun --oversubscribe runs these).
  const auto sizes = [](std::vector<std::string> args) {
    std::vector<std::uint32_t> out;
    for (const auto& app : parse(std::move(args), 2).options.apps) out.push_back(app.size);
    return out;
  };
  using Sizes = std::vector<std::uint32_t>;
  EXPECT_EQ(sizes({"-H", "localhost:3", "a", ":", "b"}), (Sizes{3, 3}));
  EXPECT_EQ(sizes({"-H", "localhost:3", "-n", "1", "a", ":", "b"}), (Sizes{1, 3}));
  EXPECT_EQ(sizes({"-H", "localhost:2", "a", ":", "-H", "localhost:1", "b"}), (Sizes{1, 1}));
  EXPECT_EQ(sizes({"-H", "localhost:1", "a", ":", "-H", "localhost:2", "b"}), (Sizes{2, 2}));
  // Slots are no limit, and their count matters only to a part without -n.
  EXPECT_EQ(run_options({"-H", "localhost:2", "-n", "3", "prog"}).size, 3u);
  EXPECT_EQ(run_options({"-H", "localhost:0", "-n", "1", "prog"}).size, 1u);
  EXPECT_EQ(run_options({"-H", "localhost:99999", "-n", "2", "prog"}).size, 2u);
  EXPECT_EQ(run_options({"-H", "localhost:2,localhost:0", "prog"}).size, 2u);
  expect_refused({"-H", "localhost:0", "prog"},
                 "-H localhost:0: this host has no slots for a program without -n");
  expect_refused({"-H", "localhost:4096,localhost", "prog"}, "the job would have 4097 ranks");
  expect_refused({"-H", "localhost:99999", "prog"}, "the job would have 99999 ranks");
  EXPECT_EQ(run_options({"--map-by", "L3cache", "--map-by=core:oversubscribe", "prog"}).size, 1u);
  expect_refused({"-H", ",", "prog"}, "sempirun runs every rank on this host");
  expect_refused({"--host", "localhost,node2", "prog"},
                 "--host localhost,node2: sempirun runs every rank on this host");
  expect_refused({"-H", "", "prog"}, "sempirun runs every rank on this host");
  expect_refused({"-N", "4", "prog"},
                 "-N: sempirun runs every rank on this host, so ranks per "
                 "host is ranks: give their number with -n");
  expect_refused({"--mca", "btl", "self,tcp", "prog"},
                 "--mca: sempi has no MCA components; its settings are the ranks' SEMPI_* "
                 "variables");
  expect_refused({"-mca", "btl", "self,tcp", "prog"}, "-mca: sempi has no MCA components");
  expect_refused({"-H", "node1,node2", "prog"},
                 "-H node1,node2: sempirun runs every rank on this host; it does not start ranks "
                 "on other hosts");
  expect_refused({"--hostfile", "hosts", "prog"}, "--hostfile: sempirun runs every rank on");
  expect_refused({"-machinefile", "hosts", "prog"}, "-machinefile: sempirun runs every rank on");
  expect_refused({"--rank-by", "core", "prog"}, "--rank-by: sempirun places the ranks");
  expect_refused({"--report-bindings", "prog"}, "--report-bindings: sempirun does not bind");
}

TEST(LaunchOptions, Stdin) {
  EXPECT_EQ(run_options({"-n", "4", "prog"}).stdin_rank, 0u);
  EXPECT_FALSE(run_options({"prog"}).stdin_given);
  const auto o = run_options({"--stdin", "3", "-n", "4", "prog"});
  EXPECT_EQ(o.stdin_rank, 3u);
  EXPECT_TRUE(o.stdin_given);
  EXPECT_FALSE(run_options({"--stdin=none", "prog"}).stdin_rank);
  expect_refused({"--stdin", "4", "-n", "4", "prog"}, "--stdin 4: the job has only 4 ranks");
  expect_refused({"--stdin", "1", "prog"}, "the job has only 1 rank");
  expect_refused({"--stdin", "all", "prog"}, "--stdin takes a rank or 'none', got 'all'");
  expect_refused({"--stdin", "-1", "prog"}, "takes a rank or 'none'");
  expect_refused({"--stdin", "", "prog"}, "takes a rank or 'none'");
  expect_refused({"--stdin", "5000", "-n", "4", "prog"}, "between 0 and 4095");
  expect_refused({"--stdin", "0", "--stdin", "none", "prog"}, "more than once");
  expect_refused({"--stdin"}, "--stdin requires a value");
}

TEST(LaunchOptions, ProgramArgumentsPassUntouched) {
  const auto o = run_options({"-n", "2", "prog", "-n", "5", "--timeout", "x", "--", "-x"});
  EXPECT_EQ(o.size, 2u);
  EXPECT_EQ(o.apps.at(0).program,
            (std::vector<std::string>{"prog", "-n", "5", "--timeout", "x", "--", "-x"}));
}

TEST(LaunchOptions, DoubleDashEndsOptions) {
  EXPECT_EQ(run_options({"-n", "2", "--", "-weird-name", "--help"}).apps.at(0).program,
            (std::vector<std::string>{"-weird-name", "--help"}));
  EXPECT_EQ(run_options({"--", "--"}).apps.at(0).program, std::vector<std::string>{"--"});
  EXPECT_EQ(run_options({"-"}).apps.at(0).program, std::vector<std::string>{"-"});  // not an option
}

TEST(LaunchOptions, HelpAndVersion) {
  EXPECT_EQ(parse({"--help"}).action, LaunchAction::help);
  EXPECT_EQ(parse({"-h"}).action, LaunchAction::help);
  EXPECT_EQ(parse({"-n", "2", "--help"}).action, LaunchAction::help);
  EXPECT_EQ(parse({"--version"}).action, LaunchAction::version);
  EXPECT_EQ(run_options({"prog", "--help"}).apps.at(0).program,
            (std::vector<std::string>{"prog", "--help"}));  // the program's own flag
  EXPECT_NE(std::string(launch_usage()).find("124"), std::string::npos);
}

TEST(LaunchOptions, MissingProgram) {
  expect_refused({}, "no program given");
  expect_refused({"-n", "2"}, "no program given");
  expect_refused({"-n", "2", "--"}, "no program given");
  expect_refused({"--", ""}, "program name is empty");
}

TEST(LaunchOptions, BadRankCount) {
  expect_refused({"-n", "0", "prog"}, "between 1 and 4096");
  expect_refused({"-n", "4097", "prog"}, "between 1 and 4096");
  expect_refused({"-n", "99999999999999999999999", "prog"}, "between 1 and 4096");
  expect_refused({"-n", "abc", "prog"}, "must be an integer");
  expect_refused({"-n", "-1", "prog"}, "must be an integer");
  expect_refused({"-n", "+3", "prog"}, "must be an integer");
  expect_refused({"-n", "3x", "prog"}, "must be an integer");
  expect_refused({"-n", "", "prog"}, "must be an integer");
  expect_refused({"-n"}, "-n requires a value");
  expect_refused({"-n", "2", "-np", "3", "prog"}, "more than once");
}

TEST(LaunchOptions, BadTimeout) {
  expect_refused({"--timeout", "0", "prog"}, "--timeout must be between 1");
  expect_refused({"--timeout", "-5", "prog"}, "--timeout must be an integer");
  expect_refused({"--timeout", "1.5", "prog"}, "--timeout must be an integer");
  expect_refused({"--timeout", "abc", "prog"}, "--timeout must be an integer");
  expect_refused({"--timeout=", "prog"}, "--timeout must be an integer");
  expect_refused({"--timeout", "999999999999", "prog"}, "--timeout must be between");
  expect_refused({"--timeout"}, "--timeout requires a value");
}

// The launcher waits for enrollments as long as the ranks will wait: it reads their setting.
TEST(LaunchOptions, StartTimeoutIsTheRanksSetting) {
  ::unsetenv("SEMPI_START_TIMEOUT");
  auto o = run_options({"prog"});
  resolve_start_timeout(o);
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(300));

  ::setenv("SEMPI_START_TIMEOUT", "40", 1);
  resolve_start_timeout(o);
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(40));
  o = run_options({"-x", "SEMPI_START_TIMEOUT=7", "-x", "SEMPI_START_TIMEOUT=9", "prog"});
  resolve_start_timeout(o);
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(9));  // the last -x, as the ranks see
  o = run_options({"-x", "SEMPI_START_TIMEOUT", "prog"});  // forwards ours
  resolve_start_timeout(o);
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(40));
  o = run_options({"-x", "SEMPI_START_TIMEOUT=7", "-x", "SEMPI_START_TIMEOUT", "prog"});
  resolve_start_timeout(o);
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(40));  // the bare -x forwards ours again

  for (const char* bad : {"abc", "-1", " 5", "5s", "0", "99999999999999999999", "31536001"}) {
    o = run_options({"-x", std::string("SEMPI_START_TIMEOUT=") + bad, "prog"});
    try {
      resolve_start_timeout(o);
      ADD_FAILURE() << "accepted SEMPI_START_TIMEOUT=" << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::config);
      EXPECT_NE(std::string(e.what()).find(std::string("SEMPI_START_TIMEOUT='") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
  ::unsetenv("SEMPI_START_TIMEOUT");
}

// mpirun's MPMD form: ':' separates programs; each has its own -n, -x and --wdir and takes
// the next ranks; the job's own options may come in any part, once.
TEST(LaunchOptions, ProgramsSeparatedByColonsShareOneJob) {
  const auto o =
      run_options({"--tag-output", "-n", "1", "-x", "A=1", "server", "--port", "0", ":", "-np", "3",
                   "--wdir", "/tmp", "--timeout", "9", "client", ":", "tool"});
  ASSERT_EQ(o.apps.size(), 3u);
  EXPECT_EQ(o.size, 5u);
  EXPECT_TRUE(o.tag_output);
  EXPECT_EQ(o.timeout, std::chrono::seconds(9));
  EXPECT_EQ(o.apps[0].program, (std::vector<std::string>{"server", "--port", "0"}));
  EXPECT_EQ(o.apps[0].size, 1u);
  EXPECT_EQ(o.apps[0].env, (std::vector<EnvSetting>{{"A", "1"}}));
  EXPECT_FALSE(o.apps[0].working_dir);
  EXPECT_EQ(o.apps[1].program, std::vector<std::string>{"client"});
  EXPECT_EQ(o.apps[1].size, 3u);
  EXPECT_TRUE(o.apps[1].env.empty());
  EXPECT_EQ(o.apps[1].working_dir, fs::path("/tmp"));
  EXPECT_EQ(o.apps[2].program, std::vector<std::string>{"tool"});
  EXPECT_EQ(o.apps[2].size, 1u);
  EXPECT_EQ(o.app_of(0), 0u);
  EXPECT_EQ(o.app_of(1), 1u);
  EXPECT_EQ(o.app_of(3), 1u);
  EXPECT_EQ(o.app_of(4), 2u);

  // As under mpirun, ':' separates after "--" too; "--" ends only its own context's options.
  const auto dashes = run_options({"-n", "2", "--", "prog", ":", "-n", "3", "--", "-x"});
  ASSERT_EQ(dashes.apps.size(), 2u);
  EXPECT_EQ(dashes.apps[0].program, std::vector<std::string>{"prog"});
  EXPECT_EQ(dashes.apps[1].size, 3u);
  EXPECT_EQ(dashes.apps[1].program, std::vector<std::string>{"-x"});
  // Per program, -n and --wdir once; the job's options once in all.
  EXPECT_EQ(run_options({"-n", "2", "a", ":", "-n", "2", "b"}).size, 4u);
  EXPECT_EQ(run_options({"--stdin", "3", "-n", "2", "a", ":", "-n", "2", "b"}).stdin_rank, 3u);
  expect_refused({"--stdin", "3", "-n", "2", "a", ":", "b"}, "--stdin 3: the job has only 3 ranks");
  expect_refused({"--timeout", "5", "a", ":", "--timeout", "6", "b"}, "--timeout given more");
  expect_refused({"-n", "4096", "a", ":", "b"}, "the job would have 4097 ranks; at most 4096");
  expect_refused({"a", ":"}, "no program given after ':' (context 1)");
  expect_refused({"a", ":", ":", "b"}, "no program given after ':' (context 1)");
  expect_refused({"a", ":", "-n", "2"}, "no program given after ':' (context 1)");
  expect_refused({":", "a"}, "no program given");
  expect_refused({"a", ":", "-x", "SEMPI_APPNUM=3", "b"}, "set by sempirun");
}

// Each program's ranks wait as long as their own setting says: the launcher, the longest.
TEST(LaunchOptions, StartTimeoutIsTheLongestOfThePrograms) {
  ::unsetenv("SEMPI_START_TIMEOUT");
  auto o = run_options(
      {"-x", "SEMPI_START_TIMEOUT=7", "a", ":", "-x", "SEMPI_START_TIMEOUT=30", "b", ":", "c"});
  resolve_start_timeout(o);
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(300));  // c: the default
  o = run_options({"-x", "SEMPI_START_TIMEOUT=7", "a", ":", "-x", "SEMPI_START_TIMEOUT=30", "b"});
  resolve_start_timeout(o);
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(30));
  o = run_options({"a", ":", "-x", "SEMPI_START_TIMEOUT=x", "b"});
  EXPECT_THROW(resolve_start_timeout(o), Error);
}

TEST(LaunchOptions, UnknownFlags) {
  expect_refused({"--frobnicate", "prog"}, "unknown option '--frobnicate'");
  expect_refused({"-q", "prog"}, "unknown option '-q'");
  expect_refused({"-n3", "prog"}, "unknown option '-n3'");
  expect_refused({"--tag-output=yes", "prog"}, "does not take a value");
}

TEST(LaunchOptions, BadEnvironmentSettings) {
  expect_refused({"-x", "", "prog"}, "invalid environment variable name");
  expect_refused({"-x", "=v", "prog"}, "invalid environment variable name");
  expect_refused({"-x", "1A=v", "prog"}, "invalid environment variable name");
  expect_refused({"-x", "A-B=v", "prog"}, "invalid environment variable name");
  expect_refused({"-x", "SEMPI_RANK=0", "prog"}, "set by sempirun");
  expect_refused({"-x", "SEMPI_BOOTSTRAP_FD", "prog"}, "set by sempirun");
  expect_refused({"-x", "OMPI_COMM_WORLD_RANK=2", "prog"}, "set by sempirun");
  expect_refused({"-x"}, "-x requires a value");
}

TEST(LaunchOptions, EmptyPaths) {
  expect_refused({"--policy", "", "prog"}, "--policy requires a file name");
  expect_refused({"--audit-dir=", "prog"}, "--audit-dir requires a directory name");
}

TEST(LaunchOptions, DefaultPolicy) {
  const auto policy = load_policy(run_options({"prog"}));
  EXPECT_TRUE(policy.is_default);
  EXPECT_EQ(policy.digest, policy::PolicyDocument::default_policy().digest);
}

TEST(LaunchOptions, PolicyFile) {
  TempDir dir;
  write_text(dir.path() / "p.json", R"({"version": 1, "mode": "enforce"})");
  const auto policy = load_policy(run_options({"--policy", (dir.path() / "p.json").string(), "x"}));
  EXPECT_FALSE(policy.is_default);
  EXPECT_EQ(policy.canonical, R"({"mode":"enforce","version":1})");
}

TEST(LaunchOptions, PolicyFileErrors) {
  TempDir dir;
  const auto refused = [&](const fs::path& path, const std::string& needle) {
    try {
      load_policy(run_options({"--policy", path.string(), "prog"}));
      ADD_FAILURE() << "accepted policy " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::config);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(dir.path() / "missing.json", "cannot read policy file");
  write_text(dir.path() / "bad.json", "{ not json");
  refused(dir.path() / "bad.json", "invalid JSON");
  write_text(dir.path() / "array.json", "[1, 2]");
  refused(dir.path() / "array.json", "must be a JSON object");
  refused(dir.path(), "policy file");  // a directory
}

// Open MPI's four spellings; made absolute against this process's directory, as mpirun does.
TEST(LaunchOptions, WorkingDirectory) {
  EXPECT_FALSE(run_options({"prog"}).apps.at(0).working_dir);
  EXPECT_EQ(run_options({"--wdir", "/tmp", "prog"}).apps.at(0).working_dir, fs::path("/tmp"));
  EXPECT_EQ(run_options({"-wdir", "/tmp", "prog"}).apps.at(0).working_dir, fs::path("/tmp"));
  EXPECT_EQ(run_options({"-wd", "/tmp", "prog"}).apps.at(0).working_dir, fs::path("/tmp"));
  EXPECT_EQ(run_options({"--wd=/tmp", "prog"}).apps.at(0).working_dir, fs::path("/tmp"));
  expect_refused({"--wdir", "", "prog"}, "--wdir requires a directory name");
  expect_refused({"-wd", "/tmp", "--wdir", "/", "prog"}, "--wdir given more than once");
  expect_refused({"--wdir"}, "--wdir requires a value");

  TempDir dir;
  write_text(dir.path() / "file", "x");
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  fs::create_directories(dir.path() / "sub" / "deeper");
  fs::create_directory_symlink(dir.path() / "sub" / "deeper", dir.path() / "link");
  auto relative = run_options({"--wdir", "link/../", "prog"});  // the link's parent: sub
  resolve_working_dir(relative);
  const auto refusal = [](const std::string& given) -> std::string {
    auto o = run_options({"--wdir", given, "prog"});
    try {
      resolve_working_dir(o);
    } catch (const Error& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::config);
      return e.what();
    }
    return "accepted";
  };
  const std::string missing = refusal("none");
  const std::string file = refusal("file");
  const std::string through_a_file = refusal("file/../sub");  // as the kernel (and cd) sees it
  fs::current_path(before);
  EXPECT_EQ(relative.apps.at(0).working_dir, fs::canonical(dir.path() / "sub"));
  // It is opened, once: what the ranks will use is that directory, named or renamed.
  ASSERT_TRUE(relative.apps.at(0).working_dir_fd);
  fs::rename(dir.path() / "sub", dir.path() / "renamed");
  struct stat opened {};
  struct stat renamed {};
  ASSERT_EQ(::fstat(relative.apps.at(0).working_dir_fd->get(), &opened), 0);
  ASSERT_EQ(::stat((dir.path() / "renamed").c_str(), &renamed), 0);
  EXPECT_EQ(opened.st_ino, renamed.st_ino);
  EXPECT_EQ(missing, "--wdir none: No such file or directory");
  EXPECT_EQ(file, "--wdir file: Not a directory");
  EXPECT_EQ(through_a_file, "--wdir file/../sub: Not a directory");
  auto unset = run_options({"prog"});
  resolve_working_dir(unset);
  EXPECT_FALSE(unset.apps.at(0).working_dir);
  EXPECT_FALSE(unset.apps.at(0).working_dir_fd);
}

TEST(LaunchOptions, AuditDirCreatedPrivate) {
  TempDir dir;
  const fs::path audit = dir.path() / "a" / "audit";
  prepare_audit_dir(run_options({"--audit-dir", audit.string(), "prog"}));
  struct stat st {};
  ASSERT_EQ(::stat(audit.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  prepare_audit_dir(run_options({"--audit-dir", audit.string(), "prog"}));  // exists: fine

  write_text(dir.path() / "file", "x");
  EXPECT_THROW(prepare_audit_dir(run_options({"--audit-dir", (dir.path() / "file").string(), "p"})),
               Error);
}

}  // namespace
}  // namespace sempi::launch
