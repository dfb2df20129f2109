#pragma once
// Splits one rank's output stream into lines so that lines of different ranks never mix: every
// complete line is handed to the sink in one piece, and the launcher writes each piece with one
// write(). Optionally each line is prefixed "[rank R] ".
//
// A line without its newline yet (a prompt, a progress bar) is not held for ever: with several
// ranks on one output it waits kPartialLineHold for the rest, then goes out as an open line,
// which the rank's next piece continues; a piece of anyone else first ends it with a newline.
//
// Thread safety: none; one forwarder per stream, driven by the launcher's event loop.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sempi::launch {

/// A line longer than this is emitted in pieces of this size, so a rank that never writes a
/// newline cannot make the launcher buffer without bound.
inline constexpr std::size_t kMaxForwardedLine = 64 * 1024;

/// How long a partial line of a rank that shares its output waits for its newline.
inline constexpr std::chrono::milliseconds kPartialLineHold{200};

/// Whose line is unfinished on one output (stdout; or stdout and stderr, when they are one
/// file). Shared by the forwarders that write there and by the launcher's own messages.
struct OpenLine {
  const void* owner = nullptr;  // who wrote the open line; null at the start of a line

  /// What to write before a piece of `writer`: a newline if someone else's line is open.
  std::string_view end_for(const void* writer) {
    if (owner == nullptr || owner == writer) return {};
    owner = nullptr;
    return "\n";
  }
};

struct ForwarderOptions {
  /// Empty, or e.g. "[rank 3] " (see rank_tag()).
  std::string prefix;
  /// Several ranks share the output, or lines are tagged: partial lines wait up to
  /// kPartialLineHold for their newline, and a stream's unterminated last line gets one. With a
  /// single untagged rank the output passes through byte for byte, at once.
  bool terminate_pieces = false;
};

class OutputForwarder {
 public:
  using Clock = std::chrono::steady_clock;
  /// `sink` receives each piece: (newline ending another's line) + (prefix) + text.
  using Sink = std::function<void(std::string_view)>;

  /// `line` is shared by everything written to the sink's output, and outlives the forwarder.
  OutputForwarder(ForwarderOptions options, Sink sink, OpenLine& line);

  /// Appends bytes read from the rank; emits every line they complete.
  void append(std::string_view data, Clock::time_point now);
  /// Emits the partial line held back, once it has waited kPartialLineHold by `now`.
  void flush_partial(Clock::time_point now);
  /// When flush_partial will emit the partial line held back; nullopt if none is.
  [[nodiscard]] std::optional<Clock::time_point> partial_due() const;
  /// End of stream: emits a final unterminated line, if any.
  void finish();

  /// Bytes held back waiting for a newline.
  [[nodiscard]] std::size_t pending() const noexcept { return buffer_.size(); }

 private:
  void emit(std::string_view text, bool ends_line);

  ForwarderOptions options_;
  Sink sink_;
  OpenLine& line_;
  std::string buffer_;
  std::optional<Clock::time_point> held_since_;  // of the partial line in buffer_
  std::string piece_;                            // reused output buffer
};

/// "[rank R] ".
std::string rank_tag(std::uint32_t rank);

}  // namespace sempi::launch
