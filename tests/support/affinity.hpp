#pragma once
// Narrows this thread's affinity mask to the first CPU in it, as `taskset -c N` would. System
// calls only, on a mask on the stack (no allocation): usable in a child between fork and exec.

#include <sched.h>

#include <cstddef>

namespace sempi::test {

inline bool keep_only_first_cpu() {
  // Room for 8192 CPUs: a plain cpu_set_t holds 1024, and the kernel refuses a smaller mask
  // than the machine's.
  constexpr int kCpus = 8192;
  unsigned long bits[kCpus / (8 * sizeof(unsigned long))] = {};
  auto* set = reinterpret_cast<cpu_set_t*>(bits);
  constexpr std::size_t kSize = sizeof bits;
  if (::sched_getaffinity(0, kSize, set) != 0) return false;
  int first = 0;
  while (first < kCpus && !CPU_ISSET_S(first, kSize, set)) ++first;
  if (first == kCpus) return false;
  CPU_ZERO_S(kSize, set);
  CPU_SET_S(first, kSize, set);
  return ::sched_setaffinity(0, kSize, set) == 0;
}

}  // namespace sempi::test
