#pragma once
// The library's own logger, for what a rank or the audit writer has to tell the user: a lost
// connection, a refused peer, a stalled sender, an audit log that cannot be written.
//
// It writes to standard error. Standard output belongs to the program: its results are often
// piped on or compared, and a warning there would corrupt them (mpirun keeps its own messages
// off it too). It is not registered with spdlog, so a program that uses spdlog keeps its own
// default logger and may name one "sempi" itself.

#include <spdlog/logger.h>

namespace sempi {

/// The logger; each message goes out whole with one write, at any level, from any thread.
spdlog::logger& diagnostics();

}  // namespace sempi
