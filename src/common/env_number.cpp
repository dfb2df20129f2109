#include "common/env_number.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "sempi/error.hpp"

namespace sempi {
namespace {

// Digits only, at most `max`: strtoull alone would skip blanks and take "-1" as 2^64-1 (an
// unlimited budget). `kind` names what the value should be, for the error.
unsigned long long parse_digits(const char* name, const char* value, const char* kind,
                                unsigned long long max) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long parsed =
      std::isdigit(static_cast<unsigned char>(*value)) != 0 ? std::strtoull(value, &end, 10) : 0;
  if (end == nullptr || *end != '\0') {
    throw Error(ErrorClass::config, std::string(name) + "='" + value + "' is not " + kind);
  }
  if (errno == ERANGE || parsed > max) {
    throw Error(ErrorClass::config, std::string(name) + "='" + value + "' is too large (at most " +
                                        std::to_string(max) + ")");
  }
  return parsed;
}

}  // namespace

long parse_env_long(const char* name, const char* value, long fallback, long max) {
  if (value == nullptr || *value == '\0') return fallback;
  return static_cast<long>(
      parse_digits(name, value, "a number", static_cast<unsigned long long>(std::max(max, 0L))));
}

long env_long(const char* name, long fallback, long max) {
  return parse_env_long(name, std::getenv(name), fallback, max);
}

std::uint64_t env_bytes(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return parse_digits(name, value, "a byte count", UINT64_MAX);
}

}  // namespace sempi
