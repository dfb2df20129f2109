#include "launch/output_writer.hpp"

#include <limits.h>  // PIPE_BUF
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sempi::launch {

struct OutputWriter::State {
  int fd;
  std::function<void()> wake;
  std::mutex mutex;
  std::condition_variable work;
  std::condition_variable progress;  // for the destructor's bounded wait
  std::string bytes;              // queued, not yet taken by the thread
  std::vector<std::size_t> ends;  // where in `bytes` each queued piece ends
  std::size_t queued = 0;         // queued plus being written
  std::optional<std::size_t> wake_at_or_below;
  bool broken = false;       // a write failed: later pieces are dropped
  bool reader_gone = false;  // ... with EPIPE: nobody reads at all (`| head -1` has exited)
  bool abandoned = false;  // the user gave up on it
  bool stopping = false;

  // Under `mutex`.
  void written(std::size_t n) {
    queued -= n;
    if (wake_at_or_below && queued <= *wake_at_or_below) {
      wake_at_or_below.reset();
      if (wake) wake();
    }
    if (queued == 0) progress.notify_all();
  }
  // Under `mutex`.
  void drop_queued() {
    written(bytes.size());
    bytes.clear();
    ends.clear();
  }
};

namespace {

// Blocking, as the descriptor is; one that someone handed us non-blocking is waited on.
// 0, or the errno of the failed write.
int write_fully(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    return n < 0 ? errno : EIO;  // EPIPE (SIGPIPE is ignored), a full disk, ...
  }
  return 0;
}

}  // namespace

OutputWriter::OutputWriter(int fd, std::function<void()> wake, std::chrono::milliseconds final_wait)
    : state_(std::make_shared<State>()), final_wait_(final_wait) {
  state_->fd = fd;
  state_->wake = std::move(wake);
  // Signals are the event loop's: the thread starts with all of them blocked (a new thread
  // inherits the mask), and ours is restored however the start ends.
  struct BlockAllSignals {
    sigset_t saved;
    BlockAllSignals() {
      sigset_t all;
      sigfillset(&all);
      ::pthread_sigmask(SIG_SETMASK, &all, &saved);
    }
    ~BlockAllSignals() { ::pthread_sigmask(SIG_SETMASK, &saved, nullptr); }
  } blocked;
  thread_ = std::thread([state = state_] { run(*state); });
}

OutputWriter::~OutputWriter() {
  bool idle = false;
  {
    std::unique_lock lock(state_->mutex);
    state_->stopping = true;
    state_->work.notify_one();
    if (!state_->abandoned) {
      state_->progress.wait_for(lock, final_wait_, [&] { return state_->queued == 0; });
    }
    idle = state_->queued == 0;
    if (!idle) state_->wake = nullptr;  // whatever it wakes may be gone by the time it writes
  }
  if (idle) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

void OutputWriter::write(std::string_view piece) {
  if (piece.empty()) return;
  std::lock_guard lock(state_->mutex);
  if (state_->broken || state_->abandoned) return;
  const bool was_idle = state_->ends.empty();
  state_->bytes.append(piece);
  state_->ends.push_back(state_->bytes.size());
  state_->queued += piece.size();
  if (was_idle) state_->work.notify_one();
}

std::size_t OutputWriter::queued() const {
  std::lock_guard lock(state_->mutex);
  return state_->queued;
}

bool OutputWriter::congested() {
  std::lock_guard lock(state_->mutex);
  if (state_->queued <= kMaxQueuedOutput) return false;
  state_->wake_at_or_below = kMaxQueuedOutput / 2;
  return true;
}

bool OutputWriter::drained() {
  std::lock_guard lock(state_->mutex);
  if (state_->queued == 0) return true;
  state_->wake_at_or_below = 0;
  return false;
}

bool OutputWriter::broken() const {
  std::lock_guard lock(state_->mutex);
  return state_->broken;
}

bool OutputWriter::reader_gone() const {
  std::lock_guard lock(state_->mutex);
  return state_->reader_gone;
}

void OutputWriter::abandon() {
  std::lock_guard lock(state_->mutex);
  state_->abandoned = true;
  state_->drop_queued();
}

void OutputWriter::run(State& s) {
  std::string bytes;
  std::vector<std::size_t> ends;
  std::unique_lock lock(s.mutex);
  for (;;) {
    s.work.wait(lock, [&] { return s.stopping || !s.ends.empty(); });
    if (s.ends.empty()) return;
    bytes.swap(s.bytes);
    ends.swap(s.ends);
    s.bytes.clear();
    s.ends.clear();
    lock.unlock();

    // Whole pieces, joined up to PIPE_BUF bytes a write (a longer piece goes alone).
    std::size_t start = 0;
    std::size_t i = 0;
    while (i < ends.size()) {
      std::size_t end = ends[i++];
      while (i < ends.size() && ends[i] - start <= PIPE_BUF) end = ends[i++];
      const int error = write_fully(s.fd, bytes.data() + start, end - start);
      const bool ok = error == 0;
      lock.lock();
      s.written(end - start);
      if (!ok) s.broken = true;
      if (error == EPIPE) s.reader_gone = true;
      const bool go_on = ok && !s.abandoned;
      if (!go_on) {  // the rest of this batch, and what was queued meanwhile, are dropped
        s.written(bytes.size() - end);
        s.drop_queued();
      }
      lock.unlock();
      if (!go_on) break;
      start = end;
    }
    lock.lock();
  }
}

}  // namespace sempi::launch
