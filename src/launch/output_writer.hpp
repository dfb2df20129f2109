#pragma once
// Writes to one of sempirun's own descriptors (stdout or stderr) from a thread of its own, so a
// reader that stops reading (a paused pager, a pipe nobody drains) stalls neither the launcher's
// event loop nor --timeout, signals, teardown or the audit seal. The event loop only queues.
//
// The queue is bounded by its user: while congested() the launcher stops reading the ranks'
// output pipes, so a rank that writes faster than the reader reads blocks in its own write(), as
// it would without sempirun.
//
// Pieces (whole lines, see OutputForwarder) are written in order. Consecutive pieces are joined
// into one write() only up to PIPE_BUF bytes, so that a line of up to PIPE_BUF bytes is never
// split by another process writing to the same pipe. (When sempirun's stdout and stderr are the
// same file, it uses one writer for both.)
//
// Thread safety: write(), queued(), congested(), drained() and broken() are for one thread (the
// event loop); the writer thread is internal. The wake callback runs on the writer thread.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>

namespace sempi::launch {

/// Above this many queued bytes the writer is congested; it is relieved at half of it.
inline constexpr std::size_t kMaxQueuedOutput = 1024 * 1024;
/// The most the destructor waits for queued output (normally sempirun waits with drained()).
inline constexpr std::chrono::seconds kFinalWriteWait{1};

class OutputWriter {
 public:
  /// `fd` stays owned by the caller and open for the writer's life. `wake` is called on the
  /// writer thread when a wait armed by congested() or drained() is over; it must not block
  /// (writing a byte to a self-pipe is what the launcher does). `final_wait`: see the
  /// destructor (tests lengthen it, so that waiting by mistake cannot pass for a slow machine).
  OutputWriter(int fd, std::function<void()> wake,
               std::chrono::milliseconds final_wait = kFinalWriteWait);
  /// Waits up to `final_wait` for what is queued to be written, unless abandon() was called,
  /// then joins the thread. A thread still blocked in write() after that (the reader is not
  /// reading) is detached: it writes on if the reader comes back before the process ends, and
  /// what is left then is lost.
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  /// Queues one piece; never blocks. Dropped once a write failed (EPIPE, a full disk, ...): the
  /// job still runs to its end.
  void write(std::string_view piece);

  /// Bytes queued or being written.
  [[nodiscard]] std::size_t queued() const;
  /// More than kMaxQueuedOutput bytes wait. Then `wake` is called once they fall to half.
  [[nodiscard]] bool congested();
  /// Everything queued was written (or dropped). If not, `wake` is called once it is.
  [[nodiscard]] bool drained();
  /// A write failed; later pieces are dropped.
  [[nodiscard]] bool broken() const;
  /// A write failed with EPIPE: the pipe's reader has gone (not a full disk, which the
  /// program run alone would ignore too).
  [[nodiscard]] bool reader_gone() const;
  /// Drops what is queued and not yet being written, and every later piece; the destructor
  /// will not wait. For when the user gave up on a reader that does not read (an interrupt).
  void abandon();

 private:
  struct State;
  static void run(State& state);  // the thread's body

  std::shared_ptr<State> state_;  // shared with the thread, which may outlive this object
  std::chrono::milliseconds final_wait_;
  std::thread thread_;
};

}  // namespace sempi::launch
