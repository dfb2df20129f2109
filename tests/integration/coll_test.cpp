// Real jobs under sempirun: every collective against a serial reference (coll_check) at 1..9
// ranks, on the world and on split sub-communicators, and the pi example (reduce).

#include <gtest/gtest.h>

#include "support/job_runner.hpp"

namespace sempi::test {
namespace {

using namespace std::chrono_literals;

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, MatchSerialReference) {
  const auto result =
      run_job({SEMPIRUN_PATH, "-n", std::to_string(GetParam()), COLL_CHECK_PATH, "all"}, 240s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("all checks passed"), std::string::npos) << result.output;
  std::printf("[ %d ranks: %.1f s ]\n", GetParam(), result.seconds);
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Range(1, 10));

// A collective that one rank's own argument checks refuse: the ranks waiting for that rank
// fail at once with its error instead of waiting for the job's timeout (60 s here), and the
// next collectives still line up (coll_check's "abandoned" checks say what each rank sees).
TEST(Collectives, OneRankRefusingItsArgumentsFailsThoseWaitingForIt) {
  for (const char* ranks : {"2", "3", "4"}) {
    const auto result = run_job({SEMPIRUN_PATH, "-n", ranks, "--timeout", "60", COLL_CHECK_PATH,
                                 "abandoned"},
                                120s);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_LT(result.seconds, 30) << result.output;
  }
}

// A rank that runs out of memory setting up a collective (after it took the collective's
// number): the ranks waiting for it fail at once, naming it (coll_check's "outofmemory").
TEST(Collectives, ARankOutOfMemoryBuildingACollectiveFailsThoseWaitingForIt) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "RLIMIT_AS cannot bound a sanitizer's address space";
#endif
  const auto result =
      run_job({SEMPIRUN_PATH, "-n", "3", "--timeout", "60", COLL_CHECK_PATH, "outofmemory"}, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_LT(result.seconds, 30) << result.output;
}

TEST(Collectives, SingletonWithoutLauncher) {
  const auto result = run_job({COLL_CHECK_PATH, "all"}, 120s);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(Collectives, PiExampleUsesReduce) {
  for (const char* ranks : {"1", "3", "5"}) {
    const auto pi = run_job({SEMPIRUN_PATH, "-n", ranks, PI_PATH, "100000"}, 120s);
    EXPECT_EQ(pi.exit_code, 0) << pi.output;
    EXPECT_NE(pi.output.find("pi: 3.14159"), std::string::npos) << pi.output;
  }
}

}  // namespace
}  // namespace sempi::test
