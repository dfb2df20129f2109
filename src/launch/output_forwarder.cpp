#include "launch/output_forwarder.hpp"

#include <utility>

namespace sempi::launch {

OutputForwarder::OutputForwarder(ForwarderOptions options, Sink sink, OpenLine& line)
    : options_(std::move(options)), sink_(std::move(sink)), line_(line) {}

void OutputForwarder::append(std::string_view data, Clock::time_point now) {
  // Complete lines straight from `data` when nothing is buffered: no copy on the common path.
  while (!data.empty()) {
    const auto nl = data.find('\n');
    if (nl == std::string_view::npos) {
      buffer_.append(data);
      break;
    }
    if (buffer_.empty()) {
      emit(data.substr(0, nl + 1), true);
    } else {
      buffer_.append(data.substr(0, nl + 1));
      emit(buffer_, true);
      buffer_.clear();
      held_since_.reset();
    }
    data.remove_prefix(nl + 1);
  }
  if (buffer_.empty()) return;
  if (!options_.terminate_pieces) {  // nobody else writes here: nothing to wait for
    emit(buffer_, false);
    buffer_.clear();
    return;
  }
  while (buffer_.size() >= kMaxForwardedLine) {
    emit(std::string_view(buffer_).substr(0, kMaxForwardedLine), false);
    buffer_.erase(0, kMaxForwardedLine);
    held_since_.reset();
  }
  if (!buffer_.empty() && !held_since_) held_since_ = now;
}

void OutputForwarder::flush_partial(Clock::time_point now) {
  if (!held_since_ || now < *held_since_ + kPartialLineHold) return;
  emit(buffer_, false);
  buffer_.clear();
  held_since_.reset();
}

std::optional<OutputForwarder::Clock::time_point> OutputForwarder::partial_due() const {
  if (!held_since_) return std::nullopt;
  return *held_since_ + kPartialLineHold;
}

void OutputForwarder::finish() {
  held_since_.reset();
  if (options_.terminate_pieces) {
    if (!buffer_.empty()) {
      buffer_.push_back('\n');
      emit(buffer_, true);
    } else if (line_.owner == this) {
      emit("\n", true);  // the line this stream left open
    }
  } else if (!buffer_.empty()) {
    emit(buffer_, false);
  }
  buffer_.clear();
}

void OutputForwarder::emit(std::string_view text, bool ends_line) {
  piece_.clear();
  piece_.reserve(1 + options_.prefix.size() + text.size());
  // A single untagged rank passes through byte for byte; it still marks its open line, so that
  // sempirun's own messages start on a line of their own.
  if (options_.terminate_pieces) {
    const bool continues = line_.owner == this;
    piece_.append(line_.end_for(this));
    if (!continues) piece_.append(options_.prefix);
  }
  piece_.append(text);
  line_.owner = ends_line ? nullptr : this;
  sink_(piece_);
}

std::string rank_tag(std::uint32_t rank) { return "[rank " + std::to_string(rank) + "] "; }

}  // namespace sempi::launch
