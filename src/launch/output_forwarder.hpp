#pragma once
// Splits one rank's output stream into lines so that lines of different ranks never mix: every
// complete line is handed to the sink in one piece, and the launcher writes each piece with one
// write(). Optionally each line is prefixed "[rank R] ".
//
// Thread safety: none; one forwarder per stream, driven by the launcher's event loop.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sempi::launch {

/// A line longer than this is emitted in pieces of this size, so a rank that never writes a
/// newline cannot make the launcher buffer without bound.
inline constexpr std::size_t kMaxForwardedLine = 64 * 1024;

struct ForwarderOptions {
  /// Empty, or e.g. "[rank 3] " (see rank_tag()).
  std::string prefix;
  /// Append '\n' to a piece that does not end with one (the unterminated last line, or a piece
  /// of an over-long line). Needed whenever several ranks share a stream, or lines are tagged;
  /// with a single untagged rank the output passes through byte for byte.
  bool terminate_pieces = false;
};

class OutputForwarder {
 public:
  /// `sink` receives each piece: prefix + line (+ '\n').
  using Sink = std::function<void(std::string_view)>;

  OutputForwarder(ForwarderOptions options, Sink sink);

  /// Appends bytes read from the rank; emits every line they complete.
  void append(std::string_view data);
  /// End of stream: emits a final unterminated line, if any.
  void finish();

  /// Bytes held back waiting for a newline.
  [[nodiscard]] std::size_t pending() const noexcept { return buffer_.size(); }

 private:
  void emit(std::string_view line, bool terminated);

  ForwarderOptions options_;
  Sink sink_;
  std::string buffer_;
  std::string piece_;  // reused output buffer
};

/// "[rank R] ".
std::string rank_tag(std::uint32_t rank);

}  // namespace sempi::launch
