#include "common/cpus.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

namespace sempi {
namespace {

// The CPUs of this process's affinity mask; empty if it cannot be read. The mask is sized for
// the machine: a fixed cpu_set_t holds 1024 CPUs, and the call fails (EINVAL) beyond that.
std::vector<int> affinity_cpus() {
  const long configured = ::sysconf(_SC_NPROCESSORS_CONF);
  for (int n = std::max<int>(CPU_SETSIZE, configured > 0 ? static_cast<int>(configured) : 0);
       n <= (1 << 20); n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) break;
    const std::size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    if (::sched_getaffinity(0, size, set) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < n; ++cpu) {
        if (CPU_ISSET_S(cpu, size, set)) cpus.push_back(cpu);
      }
      CPU_FREE(set);
      return cpus;
    }
    const int error = errno;
    CPU_FREE(set);
    if (error != EINVAL) break;
  }
  return {};
}

// Every CPU the machine has online: the fallback when the mask cannot be read.
std::vector<int> all_cpus() {
  std::vector<int> cpus(std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t i = 0; i < cpus.size(); ++i) cpus[i] = static_cast<int>(i);
  return cpus;
}

// The hardware threads that share CPU `cpu`'s core, as sysfs lists them; empty if unreadable.
std::string sysfs_core_siblings(int cpu) {
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
  const auto cpus = affinity_cpus();
  return cpus.empty() ? static_cast<int>(all_cpus().size()) : static_cast<int>(cpus.size());
}

int usable_cores() {
  auto cpus = affinity_cpus();
  if (cpus.empty()) cpus = all_cpus();
  return cores_among(cpus, sysfs_core_siblings);
}

int cores_among(std::span<const int> cpus, const std::function<std::string(int)>& core_siblings) {
  std::set<std::string> cores;  // one sibling list per core
  int unknown = 0;
  for (const int cpu : cpus) {
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
