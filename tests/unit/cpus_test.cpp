// usable_cpus() and usable_cores(): what sempirun starts a rank per when -n is not given.

#include "common/cpus.hpp"

#include <sched.h>

#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "support/affinity.hpp"

namespace sempi {
namespace {

cpu_set_t affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  return set;
}

// Restores this thread's affinity mask when the test ends, passed or not.
class AffinityRestorer {
 public:
  AffinityRestorer() : saved_(affinity()) {}
  ~AffinityRestorer() { ::sched_setaffinity(0, sizeof saved_, &saved_); }
  AffinityRestorer(const AffinityRestorer&) = delete;
  AffinityRestorer& operator=(const AffinityRestorer&) = delete;

 private:
  cpu_set_t saved_;
};

int read_number(const std::string& path) {
  std::ifstream in(path);
  int value = -1;
  in >> value;
  return value;
}

TEST(Cpus, CountTheAffinityMask) {
  cpu_set_t set = affinity();
  EXPECT_EQ(usable_cpus(), CPU_COUNT(&set));
  EXPECT_GE(usable_cores(), 1);
  EXPECT_LE(usable_cores(), usable_cpus());
}

// Counted another way: the (package, die, core) numbers of the usable CPUs.
TEST(Cpus, CoresAreDistinctPhysicalCores) {
  cpu_set_t set = affinity();
  std::set<std::tuple<int, int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int core = read_number(topology + "core_id");
    if (core < 0) GTEST_SKIP() << "no CPU topology in sysfs here";
    cores.emplace(read_number(topology + "physical_package_id"), read_number(topology + "die_id"),
                  core);
  }
  EXPECT_EQ(usable_cores(), static_cast<int>(cores.size()));
}

TEST(Cpus, OneCpuAllowedIsOneCore) {
  const AffinityRestorer restore;
  ASSERT_TRUE(test::keep_only_first_cpu());
  EXPECT_EQ(usable_cpus(), 1);
  EXPECT_EQ(usable_cores(), 1);
}

// Hardware threads of one core count once, whichever of them the mask holds; a CPU whose core
// is unknown counts as one.
TEST(Cpus, ThreadsOfOneCoreCountOnce) {
  // Two cores of two threads each, numbered as Linux numbers them: 0 and 2 share a core.
  const auto smt = [](int cpu) { return cpu % 2 == 0 ? std::string("0,2") : std::string("1,3"); };
  EXPECT_EQ(cores_among(std::vector<int>{0, 1, 2, 3}, smt), 2);
  EXPECT_EQ(cores_among(std::vector<int>{0, 2}, smt), 1);
  EXPECT_EQ(cores_among(std::vector<int>{0, 1}, smt), 2);
  EXPECT_EQ(cores_among(std::vector<int>{0, 1, 2}, [](int) { return std::string(); }), 3);
  EXPECT_EQ(cores_among(std::vector<int>{}, smt), 1);
}

}  // namespace
}  // namespace sempi
