#include "common/env_number.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "sempi/error.hpp"

namespace sempi {

long parse_env_long(const char* name, const char* value, long fallback, long max) {
  if (value == nullptr || *value == '\0') return fallback;
  // Digits only: strtol would also take blanks and signs.
  char* end = nullptr;
  errno = 0;
  const long parsed =
      std::isdigit(static_cast<unsigned char>(*value)) != 0 ? std::strtol(value, &end, 10) : 0;
  if (end == nullptr || *end != '\0') {
    throw Error(ErrorClass::config, std::string(name) + "='" + value + "' is not a number");
  }
  if (errno == ERANGE || parsed > max) {
    throw Error(ErrorClass::config, std::string(name) + "='" + value + "' is too large (at most " +
                                        std::to_string(max) + ")");
  }
  return parsed;
}

long env_long(const char* name, long fallback, long max) {
  return parse_env_long(name, std::getenv(name), fallback, max);
}

}  // namespace sempi
