#pragma once
// Carries a terminal's input to the rank that reads standard input (`--stdin`).
//
// A file or a pipe on sempirun's stdin is inherited by that rank as it is: no copy, and the
// rank takes only what it reads. A terminal cannot be: each rank leads a process group of its
// own, and the terminal's job control stops (SIGTTIN) any process outside the foreground group
// that reads it. So, as mpirun does, sempirun reads the terminal itself, only while its job is
// in the foreground, and writes what it read into a pipe that is the rank's stdin. End of
// input (Ctrl-D) closes the pipe. Input read but not yet taken when the rank exits is lost, as
// under mpirun; sempirun stops reading then, so later typing stays with the shell.
//
// A job moved to the foreground (fg) is noticed at the event loop's next wake-up, within a
// second: SIGCONT is not caught. What is typed while the job runs in the foreground goes to
// the rank (as under mpirun), whether it reads it or not: a job that reads no input and whose
// output goes to a pager (which reads the same terminal) is best run with --stdin none.
//
// Thread safety: none; driven by the launcher's event loop.

#include <poll.h>

#include <cstddef>
#include <optional>
#include <string>

#include "transport/socket.hpp"

namespace sempi::launch {

class TerminalInput {
 public:
  /// `terminal`: sempirun's stdin, a terminal; not owned. Throws sempi::Error(io) if the pipe
  /// cannot be created.
  explicit TerminalInput(int terminal);

  /// The descriptor to become the rank's stdin (the pipe's read end), until rank_started().
  [[nodiscard]] int rank_end() const noexcept { return rank_end_.get(); }
  /// The rank has its own copy of rank_end() now (or will never have): ours closes, so that
  /// the rank's exit ends the pipe.
  void rank_started() noexcept { rank_end_.reset(); }

  /// What to poll for now: the terminal's input (in the foreground, once what was read last
  /// has gone out) or room in the pipe. Nothing once closed, or while in the background.
  [[nodiscard]] std::optional<pollfd> watch() const;
  /// poll() reported an event on the descriptor of watch().
  void on_ready();
  /// Stops forwarding for good (the job is ending); the rank sees end of file.
  void close() noexcept;
  [[nodiscard]] bool closed() const noexcept { return !to_rank_.valid(); }

 private:
  [[nodiscard]] bool in_foreground() const;
  void read_terminal();
  void write_pending();

  int terminal_;                  // what is read: own_ if it could be opened
  transport::UniqueFd own_;        // the terminal opened anew, nonblocking
  transport::UniqueFd to_rank_;   // the pipe's write end, nonblocking
  transport::UniqueFd rank_end_;  // the pipe's read end, until the rank holds it
  std::string pending_;           // read from the terminal, not yet in the pipe
  std::size_t pending_from_ = 0;
};

}  // namespace sempi::launch
