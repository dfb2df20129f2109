#include "common/cpus.hpp"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>

namespace sempi {
namespace {

// This process's affinity mask; false if it cannot be read.
bool affinity(cpu_set_t& set) {
  CPU_ZERO(&set);
  return ::sched_getaffinity(0, sizeof set, &set) == 0;
}

// The hardware threads that share CPU `cpu`'s core ("0,4" or "0-1"), as the kernel lists them;
// empty if it cannot be read.
std::string core_siblings(int cpu) {
  const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  for (const char* name : {"core_cpus_list", "thread_siblings_list"}) {  // new name, old name
    std::ifstream in(topology + name);
    std::string list;
    if (std::getline(in, list) && !list.empty()) return list;
  }
  return {};
}

}  // namespace

int usable_cpus() {
  cpu_set_t set;
  if (!affinity(set)) return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, CPU_COUNT(&set));
}

int usable_cores() {
  cpu_set_t set;
  if (!affinity(set)) return usable_cpus();
  std::set<std::string> cores;  // one sibling list per core
  int unknown = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    std::string siblings = core_siblings(cpu);
    if (siblings.empty()) {
      ++unknown;
    } else {
      cores.insert(std::move(siblings));
    }
  }
  return std::max(1, static_cast<int>(cores.size()) + unknown);
}

}  // namespace sempi
