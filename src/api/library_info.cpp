#include "sempi/version.hpp"

namespace sempi {

const char* library_version() noexcept { return kVersionString; }

}  // namespace sempi
