#include "launch/terminal_input.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launch/blocked_signals.hpp"
#include "sempi/error.hpp"

namespace sempi::launch {
namespace {

// One read of a terminal in canonical mode returns at most one line, of at most 4095 bytes.
constexpr std::size_t kReadSize = 4096;

}  // namespace

TerminalInput::TerminalInput(int terminal) : terminal_(terminal) {
  // A file description of our own, nonblocking: another reader of the terminal (a pager the
  // output goes to) may take the input poll() reported, and a blocking read would then hold
  // the whole launcher until the next key. Setting O_NONBLOCK on fd 0 would change the shell's.
  own_.reset(::open(("/proc/self/fd/" + std::to_string(terminal)).c_str(),
                    O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (own_.valid()) terminal_ = own_.get();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(ErrorClass::io,
                std::string("cannot create the pipe for standard input: ") + std::strerror(errno));
  }
  rank_end_.reset(fds[0]);  // blocking: the rank reads it as it would read any stdin
  to_rank_.reset(fds[1]);
  ::fcntl(to_rank_.get(), F_SETFL, O_NONBLOCK);
}

bool TerminalInput::in_foreground() const {
  const pid_t foreground = ::tcgetpgrp(terminal_);
  // ENOTTY: a terminal, but not our controlling one; no job control applies to reading it.
  if (foreground < 0) return errno == ENOTTY;
  return foreground == ::getpgrp();
}

std::optional<pollfd> TerminalInput::watch() const {
  if (closed()) return std::nullopt;
  if (pending_from_ < pending_.size()) return pollfd{to_rank_.get(), POLLOUT, 0};
  if (!in_foreground()) return std::nullopt;
  return pollfd{terminal_, POLLIN, 0};
}

void TerminalInput::on_ready() {
  if (closed()) return;
  if (pending_from_ < pending_.size()) {
    write_pending();
  } else {
    read_terminal();
  }
}

void TerminalInput::read_terminal() {
  pending_.resize(kReadSize);
  ssize_t n = 0;
  {
    // SIGTTIN blocked: should the job go to the background between the check and the read,
    // the read fails with EIO instead of the kernel signalling (and, the signal being caught,
    // restarting the read) in a loop.
    const BlockedSignals blocked(only_signal(SIGTTIN));
    n = ::read(terminal_, pending_.data(), pending_.size());
  }
  if (n > 0) {
    pending_.resize(static_cast<std::size_t>(n));
    pending_from_ = 0;
    write_pending();  // usually the pipe has room: no second round of poll()
    return;
  }
  pending_.clear();
  pending_from_ = 0;
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  // EIO in the background: moved there since watch(); read again once in the foreground.
  if (n < 0 && errno == EIO && !in_foreground()) return;
  close();  // end of input (Ctrl-D), or the terminal hung up
}

void TerminalInput::write_pending() {
  while (pending_from_ < pending_.size()) {
    const ssize_t n =
        ::write(to_rank_.get(), pending_.data() + pending_from_, pending_.size() - pending_from_);
    if (n > 0) {
      pending_from_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the rank has not read yet: poll for room
    close();  // EPIPE: the rank exited or closed its stdin
    return;
  }
  pending_.clear();
  pending_from_ = 0;
}

void TerminalInput::close() noexcept {
  to_rank_.reset();
  rank_end_.reset();
  pending_.clear();
  pending_from_ = 0;
}

}  // namespace sempi::launch
