#pragma once
// Numbers from SEMPI_* environment variables: digits only, at most a given maximum, and
// otherwise a sempi::Error(config) that names the variable and quotes its value.

#include <climits>
#include <cstdint>

namespace sempi {

/// The largest number of seconds a SEMPI_* timeout may have (a year): durations are added to
/// steady_clock::now(), and an overflowed deadline would lie in the past.
inline constexpr long kMaxEnvSeconds = 365L * 24 * 3600;

/// `value` read as the setting of the variable `name`; `fallback` when it is null or empty.
long parse_env_long(const char* name, const char* value, long fallback, long max = LONG_MAX);

/// The same for the variable's value in this process's environment.
long env_long(const char* name, long fallback, long max = LONG_MAX);

/// A byte count from the environment (any uint64), `fallback` when unset or empty.
std::uint64_t env_bytes(const char* name, std::uint64_t fallback);

}  // namespace sempi
