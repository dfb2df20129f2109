#pragma once
// Narrows this thread's affinity mask to the first CPU in it, as `taskset -c N` would. System
// calls only: usable in a child between fork and exec.

#include <sched.h>

namespace sempi::test {

inline bool keep_only_first_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return false;
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &set)) ++first;
  if (first == CPU_SETSIZE) return false;
  CPU_ZERO(&set);
  CPU_SET(first, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace sempi::test
