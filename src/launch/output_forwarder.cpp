#include "launch/output_forwarder.hpp"

#include <utility>

namespace sempi::launch {

OutputForwarder::OutputForwarder(ForwarderOptions options, Sink sink)
    : options_(std::move(options)), sink_(std::move(sink)) {}

void OutputForwarder::append(std::string_view data) {
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
    }
    data.remove_prefix(nl + 1);
  }
  while (buffer_.size() >= kMaxForwardedLine) {
    emit(std::string_view(buffer_).substr(0, kMaxForwardedLine), false);
    buffer_.erase(0, kMaxForwardedLine);
  }
}

void OutputForwarder::finish() {
  if (buffer_.empty()) return;
  emit(buffer_, false);
  buffer_.clear();
}

void OutputForwarder::emit(std::string_view line, bool terminated) {
  piece_.clear();
  piece_.reserve(options_.prefix.size() + line.size() + 1);
  piece_.append(options_.prefix);
  piece_.append(line);
  if (!terminated && options_.terminate_pieces) piece_.push_back('\n');
  sink_(piece_);
}

std::string rank_tag(std::uint32_t rank) { return "[rank " + std::to_string(rank) + "] "; }

}  // namespace sempi::launch
