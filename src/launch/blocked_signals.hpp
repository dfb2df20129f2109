#pragma once
// Blocks a set of signals in the calling thread for the life of the object, then restores the
// thread's previous mask.

#include <signal.h>

namespace sempi::launch {

class BlockedSignals {
 public:
  explicit BlockedSignals(const sigset_t& signals) noexcept {
    ::pthread_sigmask(SIG_BLOCK, &signals, &saved_);
  }
  ~BlockedSignals() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

 private:
  sigset_t saved_{};
};

/// The set holding every signal, or only `signo`.
inline sigset_t all_signals() noexcept {
  sigset_t set;
  sigfillset(&set);
  return set;
}
inline sigset_t only_signal(int signo) noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  return set;
}

}  // namespace sempi::launch
