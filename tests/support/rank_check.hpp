#pragma once
// Checks for rank programs run under sempirun: a failed CHECK prints the rank, line and
// condition and exits 1 (the launcher then ends the job with that status). Also the payload
// helpers shared by tests: a deterministic byte pattern and its FNV-1a checksum.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace sempi::test {

/// This process's rank, for failure messages (set it after Environment starts).
inline int g_rank = -1;

inline constexpr std::uint64_t kFnvBasis = 1469598103934665603ull;

inline std::uint64_t fnv1a(std::span<const std::uint8_t> data, std::uint64_t h = kFnvBasis) {
  for (std::uint8_t b : data) h = (h ^ b) * 1099511628211ull;
  return h;
}

/// `size` bytes of xorshift output seeded by `seed`: different seeds give different payloads.
inline std::vector<std::uint8_t> pattern(std::size_t size, std::uint64_t seed) {
  std::vector<std::uint8_t> v(size);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::uint8_t>(x);
  }
  return v;
}

}  // namespace sempi::test

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s\n", ::sempi::test::g_rank, \
                   __LINE__, #cond);                                                  \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
