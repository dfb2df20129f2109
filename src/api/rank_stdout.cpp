// A rank's standard output is the launcher's pipe, which the C library buffers in full: a
// progress line would show only when the buffer fills or the rank exits, and what a rank had
// printed when it crashed or was torn down would be lost. mpirun gives its ranks a terminal,
// so theirs is line-buffered; so is a sempi rank's. The launcher still forwards whole lines.
//
// Set before main (a constructor of this library), since setvbuf must come before any output
// on the stream; a program that sets its own buffering in main overrides it. Only in a rank
// started by sempirun, and only while its stdout is still a pipe (not redirected to a file);
// a rank that does not link sempi (a script) keeps its own buffering.

#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "launch/bootstrap_protocol.hpp"

namespace sempi {
namespace {

[[gnu::constructor]] void line_buffer_rank_stdout() {
  if (std::getenv(launch::kBootstrapFdVariable) == nullptr) return;
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  // Loaded late (dlopen) after output that is still buffered: leave the stream as it is.
  if (::__fpending(stdout) != 0) return;
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
}

}  // namespace
}  // namespace sempi
