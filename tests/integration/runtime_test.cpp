// Real jobs under sempirun: point-to-point semantics at 1..8 ranks, the examples, and failure
// handling (a rank that exits, is killed, hangs; SIGINT to the launcher).

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "support/job_runner.hpp"
#include "support/temp_dir.hpp"

namespace sempi::test {
namespace {

using namespace std::chrono_literals;

JobResult run(int ranks, const std::string& scenario, std::vector<std::string> extra = {},
              std::chrono::seconds timeout = 240s) {
  std::vector<std::string> argv = {SEMPIRUN_PATH, "-n", std::to_string(ranks)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(P2P_CHECK_PATH);
  argv.push_back(scenario);
  return run_job(argv, timeout);
}

class PointToPoint : public ::testing::TestWithParam<int> {};

TEST_P(PointToPoint, AllChecksPass) {
  const auto result = run(GetParam(), "all");
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Ranks, PointToPoint, ::testing::Values(1, 2, 3, 4, 7, 8));

// Ranks on one host talk over Unix sockets by default; TCP (as between hosts) must carry the
// same traffic just as well.
TEST(PointToPointOverTcp, AllChecksPass) {
  const auto result = run(4, "all", {"-x", "SEMPI_LOCAL_TRANSPORT=tcp"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// Which transport carries each channel, as the audit log records it.
std::map<std::string, int> transports_in_audit(const std::vector<std::string>& extra) {
  const TempDir dir;
  std::vector<std::string> options = {"--audit-dir", dir.path().string()};
  options.insert(options.end(), extra.begin(), extra.end());
  const auto result = run(3, "ring", options, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  std::map<std::string, int> seen;
  for (const auto& file : std::filesystem::directory_iterator(dir.path())) {
    std::ifstream in(file.path());
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"connection.open\"") == std::string::npos &&
          line.find("\"connection.accept\"") == std::string::npos) {
        continue;
      }
      const auto at = line.find("\"transport\":\"");
      if (at == std::string::npos) {
        ++seen["(none)"];
        continue;
      }
      const auto begin = at + 13;
      ++seen[line.substr(begin, line.find('"', begin) - begin)];
    }
  }
  return seen;
}

TEST(LocalTransport, RanksOnOneHostUseSharedRingsAndUnixSocketsOrTcpOnRequest) {
  // 3 ranks: 3 channels, each recorded by both ends.
  EXPECT_EQ(transports_in_audit({}), (std::map<std::string, int>{{"shm", 6}}));
  EXPECT_EQ(transports_in_audit({"-x", "SEMPI_LOCAL_TRANSPORT=unix"}),
            (std::map<std::string, int>{{"unix", 6}}));
  EXPECT_EQ(transports_in_audit({"-x", "SEMPI_LOCAL_TRANSPORT=tcp"}),
            (std::map<std::string, int>{{"tcp", 6}}));
}

// The job's socket directory goes with the job, however its ranks end.
TEST(LocalTransport, SocketDirectoryIsGoneAfterTheJobEvenWhenARankIsKilled) {
  const TempDir tmp;
  const char* saved = std::getenv("TMPDIR");
  const std::string previous = saved != nullptr ? saved : "";
  ::setenv("TMPDIR", tmp.path().c_str(), 1);
  const auto killed = run(3, "sigkill", {}, 120s);
  const auto ring = run(3, "ring", {}, 120s);
  if (saved != nullptr) {
    ::setenv("TMPDIR", previous.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_EQ(ring.exit_code, 0) << ring.output;
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

TEST(LocalTransport, UnknownTransportIsAClearError) {
  const auto result = run(2, "environment", {"-x", "SEMPI_LOCAL_TRANSPORT=udp"}, 120s);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("SEMPI_LOCAL_TRANSPORT='udp' is not 'shm', 'unix' or 'tcp'"),
            std::string::npos)
      << result.output;
}

TEST(PointToPointLimits, UnexpectedDataStaysWithinThePerPeerBudget) {
  const auto result = run(3, "backpressure", {"-x", "SEMPI_MAX_UNEXPECTED_BYTES=4194304"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// More unmatched data from one peer than the budget, ahead of the messages the receiver waits
// for: the sender's eager credit keeps the receiver reading. Over TCP and shared rings alike.
TEST(PointToPointLimits, UnmatchedDataBeyondTheBudgetDoesNotStallACorrectProgram) {
  for (const char* transport : {"shm", "tcp"}) {
    const auto result =
        run(2, "overbudget",
            {"--timeout", "60", "-x", "SEMPI_MAX_UNEXPECTED_BYTES=1048576", "-x",
             std::string("SEMPI_LOCAL_TRANSPORT=") + transport},
            120s);
    EXPECT_EQ(result.exit_code, 0) << transport << "\n" << result.output;
  }
}

// More unmatched empty messages than the budget ahead of the message a rank waits for: it
// reads on up to twice the budget, and past that says why it stopped (no silent stall). The
// warning goes to standard error: standard output is the program's.
TEST(PointToPointLimits, AWaiterReadsPastTheBudgetAndSaysWhenItStops) {
  const auto result =
      run(2, "emptyflood", {"--timeout", "60", "-x", "SEMPI_MAX_UNEXPECTED_BYTES=1048576"}, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const std::string warning =
      "sempi[rank 0]: rank 1 has sent more messages that no receive matched than this rank holds";
  EXPECT_NE(result.standard_error.find(warning), std::string::npos) << result.output;
  EXPECT_NE(result.standard_error.find("twice SEMPI_MAX_UNEXPECTED_BYTES=1048576"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.standard_output.find("sempi"), std::string::npos) << result.output;
}

// A peer that filled this rank's unexpected-data budget (so it is no longer read) and then
// reset its connection while staying alive: the loss must still be noticed, not polled forever.
TEST(PointToPointLimits, ResetOfAPeerThatIsNotBeingReadIsNoticed) {
  TempDir dir;
  for (const char* fifo : {"reset", "done"}) {
    ASSERT_EQ(::mkfifo((dir.path() / fifo).c_str(), 0600), 0);
  }
  // A TCP reset: only TCP connections have one (ranks on one host otherwise use Unix sockets).
  std::vector<std::string> argv = {SEMPIRUN_PATH, "-n", "2", "--timeout", "60", "-x",
                                   "SEMPI_MAX_UNEXPECTED_BYTES=65536", "-x",
                                   "SEMPI_LOCAL_TRANSPORT=tcp", P2P_CHECK_PATH,
                                   "resetpaused", dir.path().string()};
  const auto result = run_job(argv, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// A thread asleep in poll() is woken by a message another thread of its rank sends to the rank
// itself, not by poll()'s timeout (no socket carries it).
TEST(PointToPointProgress, SendToSelfWakesAThreadAsleepInPoll) {
  // One rank: its two threads are the whole job, two fewer to share the cores with.
  const auto result = run(1, "selfwake", {"-x", "SEMPI_SPIN_US=0"}, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(PointToPointProgress, SpinningWaiterStillServesOtherPeers) {
  // 30 s of spinning: far longer than the test, so only the spin loop's periodic full poll can
  // read rank 2's frame; without it rank 0 would wait until the timeout.
  const auto result = run(3, "sidechannel", {"-x", "SEMPI_SPIN_US=30000000"}, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// Each rank runs with OpenSSL's secure heap set up (pki_test checks that keys land in it); with
// SEMPI_SECURE_HEAP=0 it does not, which shows that the rank's check can fail.
TEST(KeyProtection, RanksKeepTheirPrivateKeyInTheSecureHeap) {
  auto job = run(2, "keyheap", {}, 120s);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("rank 0: secure heap set up"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("rank 1: secure heap set up"), std::string::npos) << job.output;
  auto off = run(2, "keyheap", {"-x", "SEMPI_SECURE_HEAP=0"}, 120s);
  EXPECT_NE(off.exit_code, 0) << off.output;
  EXPECT_NE(off.output.find("secure heap missing"), std::string::npos) << off.output;
}

TEST(Examples, RingAndPiRunOnFourRanks) {
  auto ring = run_job({SEMPIRUN_PATH, "-n", "4", RING_PATH}, 120s);
  EXPECT_EQ(ring.exit_code, 0) << ring.output;
  EXPECT_NE(ring.output.find("token 18 (expected 18)"), std::string::npos) << ring.output;
  auto pi = run_job({SEMPIRUN_PATH, "-n", "4", PI_PATH, "100000"}, 120s);
  EXPECT_EQ(pi.exit_code, 0) << pi.output;
  EXPECT_NE(pi.output.find("pi: 3.14159"), std::string::npos) << pi.output;
}

// sempirun holds three descriptors per rank and each rank one or two per peer: 24 ranks under a
// soft limit of 32 need both to raise their limit (sempirun restoring the program's limit only
// after it has moved the rank's descriptors into place), toward a hard limit that allows it.
TEST(Examples, TwentyFourRanksRunUnderASoftDescriptorLimitOf32) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < 2 * 24 + 256) {
    GTEST_SKIP() << "the hard descriptor limit is " << limit.rlim_max;
  }
  auto ring = run_job({"/bin/sh", "-c", "ulimit -Sn 32 && exec \"$0\" -n 24 \"$1\"", SEMPIRUN_PATH,
                       RING_PATH},
                      300s);
  EXPECT_EQ(ring.exit_code, 0) << ring.output;
  EXPECT_NE(ring.output.find("token 828 (expected 828)"), std::string::npos) << ring.output;
}

TEST(Examples, RunWithoutLauncherAsSingleton) {
  auto ring = run_job({RING_PATH}, 60s);
  EXPECT_EQ(ring.exit_code, 0) << ring.output;
  auto check = run_job({P2P_CHECK_PATH, "edge"}, 60s);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST(Failure, TimeoutVariableTooLargeIsAClearErrorNotAnExpiredDeadline) {
  // Past the range of a long, or of a steady_clock deadline: once, such a value overflowed into
  // a deadline in the past, and the rank failed with "deadline passed" naming nothing.
  for (const char* value : {"99999999999999999999", "9223372036854775807"}) {
    const auto result =
        run(2, "environment", {"-x", std::string("SEMPI_START_TIMEOUT=") + value}, 120s);
    EXPECT_NE(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("SEMPI_START_TIMEOUT='" + std::string(value) + "' is too large"),
              std::string::npos)
        << result.output;
    EXPECT_LT(result.seconds, 30) << result.output;
  }
}

// Ranks that never start sempi: the ranks that did wait for their welcome, and sempirun ends
// the job SEMPI_START_TIMEOUT after the first enrollment, naming the missing ranks. Before, the
// first waiting rank timed out on its own and was reported as the cause.
TEST(Failure, RanksThatNeverEnrollAreNamedWhenTheStartTimesOut) {
  // 8 s: ranks 0 and 2 must both enroll within it, also on a loaded machine under ASan.
  const auto result = run(4, "neverjoin", {"-x", "SEMPI_START_TIMEOUT=8"}, 120s);
  EXPECT_EQ(result.exit_code, 124) << result.output;
  EXPECT_NE(result.output.find("sempirun: rank 1 did not enroll within 8 s of the first rank "
                               "(SEMPI_START_TIMEOUT) (nor did rank 3)\n"),
            std::string::npos)
      << result.output;
  for (const char* innocent : {"sempirun: rank 0", "sempirun: rank 2"}) {
    EXPECT_EQ(result.output.find(innocent), std::string::npos) << result.output;
  }
  EXPECT_LT(result.seconds, 60) << result.output;
}

// Read at initialization: once it was read only while finalizing, in a destructor, and a bad
// value terminated the rank (SIGABRT) after all its work instead of failing its start.
// A program whose descriptor 3 is no longer the launcher's socket (a shell redirected it) says
// so and writes nothing into what is there now.
TEST(Failure, BootstrapDescriptorThatIsNotTheLaunchersSocketIsRefused) {
  TempDir dir;
  const auto file = dir.path() / "fd3";
  const auto result = run_job({SEMPIRUN_PATH, "-n", "1", "/bin/sh", "-c",
                               "exec 3>\"$0\"; exec \"$1\"", file.string(), RING_PATH},
                              120s);
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("is not the launcher's socket"), std::string::npos)
      << result.output;
  EXPECT_EQ(std::filesystem::file_size(file), 0u) << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

TEST(Failure, BadFinalizeTimeoutIsAnInitializationError) {
  const auto result = run(2, "environment", {"-x", "SEMPI_FINALIZE_TIMEOUT=abc"}, 120s);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("p2p_check: SEMPI_FINALIZE_TIMEOUT='abc' is not a number"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("terminate called"), std::string::npos) << result.output;
}

TEST(Environment, RanksAreDumpableOnlyWhenAsked) {
  const auto asked = run(2, "environment", {"-x", "SEMPI_DUMPABLE=1"}, 120s);
  EXPECT_EQ(asked.exit_code, 0) << asked.output;  // check_environment looks at PR_GET_DUMPABLE
  const auto bad = run(2, "environment", {"-x", "SEMPI_DUMPABLE=yes"}, 120s);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("SEMPI_DUMPABLE='yes' is not 0 or 1"), std::string::npos)
      << bad.output;
}

// An eager message is one frame: a limit above the frame payload every peer accepts would make
// large sends fail as frames too large, instead of going by rendezvous.
TEST(Environment, AnEagerLimitAboveTheFramePayloadIsAClearError) {
  const auto result = run(2, "environment", {"-x", "SEMPI_EAGER_LIMIT=100000000"}, 120s);
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("SEMPI_EAGER_LIMIT='100000000' is too large (at most 67108864"),
            std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

TEST(Failure, NegativeOrNonNumericByteLimitIsRefusedNotUnlimited) {
  // strtoull takes "-1" as 2^64-1: once, that silently lifted the unexpected-data bound.
  const std::pair<const char*, const char*> cases[] = {
      {"-1", "is not a byte count"},
      {"abc", "is not a byte count"},
      {" 5", "is not a byte count"},
      {"64k", "is not a byte count"},
      {"99999999999999999999", "is too large"},
  };
  for (const auto& [value, complaint] : cases) {
    const auto result =
        run(2, "environment", {"-x", std::string("SEMPI_MAX_UNEXPECTED_BYTES=") + value}, 120s);
    EXPECT_NE(result.exit_code, 0) << result.output;
    EXPECT_NE(
        result.output.find("SEMPI_MAX_UNEXPECTED_BYTES='" + std::string(value) + "' " + complaint),
        std::string::npos)
        << result.output;
    EXPECT_LT(result.seconds, 30) << result.output;
  }
}

TEST(Failure, RankExitingWithStatus3EndsTheJobWithStatus3) {
  const auto result = run(4, "exit3", {}, 120s);
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("rank 3"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

TEST(Failure, AbortWithAReasonThatIsNotUtf8SetsTheExitStatus) {
  const auto result = run(3, "abort7", {}, 120s);
  EXPECT_EQ(result.exit_code, 7) << result.output;
  EXPECT_NE(result.output.find("rank 2 called abort (code 7): bad "), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

// The seconds-of-day timestamp of the first `action` record in an audit log file.
std::optional<double> record_time(const std::filesystem::path& file, const std::string& action) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"action\":\"" + action + "\"") == std::string::npos) continue;
    const auto t = line.find('T');  // "@timestamp":"2026-12-07T19:48:57.829765Z"
    if (t == std::string::npos) return std::nullopt;
    return std::stod(line.substr(t + 1, 2)) * 3600 + std::stod(line.substr(t + 4, 2)) * 60 +
           std::stod(line.substr(t + 7, 9));
  }
  return std::nullopt;
}

// A rank that calls abort leaves as soon as the launcher's abort notice reaches it, its audit
// log written up to the notice: the job ends well within the 2 s the launcher gives ranks that
// are still working before it sends SIGTERM (until which the aborting rank used to wait).
TEST(Failure, AnAbortingRankLeavesWhenItsNoticeComes) {
  const TempDir dir;
  const auto result = run(3, "abort7", {"--audit-dir", dir.path().string()}, 120s);
  EXPECT_EQ(result.exit_code, 7) << result.output;
  const auto teardown = record_time(dir.path() / "launcher.jsonl", "job.teardown");
  const auto end = record_time(dir.path() / "launcher.jsonl", "job.end");
  ASSERT_TRUE(teardown && end) << result.output;
  double took = *end - *teardown;
  if (took < 0) took += 24 * 3600;  // across midnight
  EXPECT_LT(took, 1.5) << result.output;
  EXPECT_TRUE(record_time(dir.path() / "rank-2.jsonl", "job.abort")) << result.output;
}

TEST(Failure, RankKilledBySigkillEndsTheJob) {
  const auto result = run(3, "sigkill", {}, 120s);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.output;
  EXPECT_NE(result.output.find("rank 2"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

TEST(Failure, HangingRankIsEndedByTimeout) {
  const auto result = run(3, "hang", {"--timeout", "3"}, 120s);
  EXPECT_EQ(result.exit_code, 124) << result.output;
  EXPECT_NE(result.output.find("timeout"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

// A rank that finalized is gone for its peers without a job abort: a probe or matched probe
// for its messages fails with peer_failed instead of waiting forever, and so do receives and
// probes from any source once no other member is left (one posted before, too).
TEST(Failure, ProbeForAFinalizedRankFails) {
  const auto result =
      run(2, "probegone", {"--timeout", "60", "-x", "SEMPI_FINALIZE_TIMEOUT=2"}, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_LT(result.seconds, 40) << result.output;
}

// A rank that finalizes while its peers still wait on it: their receives, blocking probes and
// collectives fail as soon as its FINALIZING arrives. They used to wait until its finalize
// gave up on them (SEMPI_FINALIZE_TIMEOUT, 300 s here).
TEST(Failure, WaitingOnARankThatFinalizedFailsAtOnce) {
  const auto result = run(3, "finalizeearly", {"--timeout", "100"}, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

TEST(Failure, SigintToTheLauncherTearsTheJobDown) {
  const TempDir dir;
  const auto ready = std::filesystem::path(dir.path()) / "ready";
  bool was_running = false;
  std::chrono::steady_clock::time_point interrupted;
  const auto result = run_job(
      {SEMPIRUN_PATH, "-n", "3", P2P_CHECK_PATH, "sleep", ready.string()}, 120s, [&](pid_t pid) {
        // Once every rank runs (rank 0 says so after a barrier), interrupt as Ctrl-C would.
        // Polled, bounded.
        const auto give_up = std::chrono::steady_clock::now() + 60s;
        while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(10ms);
        }
        was_running = std::filesystem::exists(ready);
        interrupted = std::chrono::steady_clock::now();
        ::kill(pid, SIGINT);
      });
  EXPECT_TRUE(was_running) << result.output;
  EXPECT_EQ(result.exit_code, 130) << result.output;
  // Died of SIGINT after the teardown, not exited with 130: a shell loop stops on Ctrl-C.
  EXPECT_EQ(result.signal, SIGINT) << result.output;
  EXPECT_NE(result.output.find("interrupted; terminating the job"), std::string::npos)
      << result.output;
  EXPECT_LT(std::chrono::steady_clock::now() - interrupted, 30s) << result.output;
}

// Started with SIGTERM blocked (the mask survives exec: a supervisor that blocks signals
// around its fork), sempirun still ends the job on SIGTERM, where it used to ignore it.
TEST(Failure, SigtermEndsTheJobEvenIfBlockedWhenSempirunStarted) {
  const TempDir dir;
  const auto ready = std::filesystem::path(dir.path()) / "ready";
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigset_t saved;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &saved), 0);  // the child inherits it
  const auto result = run_job(
      {SEMPIRUN_PATH, "-n", "2", P2P_CHECK_PATH, "sleep", ready.string()}, 90s, [&](pid_t pid) {
        const auto give_up = std::chrono::steady_clock::now() + 60s;
        while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(10ms);
        }
        ::kill(pid, SIGTERM);
      });
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &saved, nullptr), 0);
  EXPECT_EQ(result.signal, SIGTERM) << result.output;
  EXPECT_NE(result.output.find("interrupted; terminating the job"), std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace sempi::test
