#include "common/diagnostics.hpp"

#include <memory>

#include <spdlog/sinks/stdout_sinks.h>

namespace sempi {

spdlog::logger& diagnostics() {
  // Never destroyed: a thread that reports while the process exits must not find it gone.
  static spdlog::logger* const logger = [] {
    auto* created =
        new spdlog::logger("sempi", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    // The messages name themselves ("sempi[rank 3]: ..."), as mpirun's do; no timestamp.
    created->set_pattern("%v");
    return created;
  }();
  return *logger;
}

}  // namespace sempi
