#include "launch/bootstrap_protocol.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/env_number.hpp"
#include "sempi/error.hpp"
#include "transport/little_endian.hpp"
#include "transport/socket.hpp"

namespace sempi::launch {

std::chrono::seconds start_timeout(const char* value) {
  const long seconds = parse_env_long(kStartTimeoutVariable, value, kDefaultStartTimeout.count(), kMaxEnvSeconds);
  if (seconds == 0) {
    throw Error(ErrorClass::config, std::string(kStartTimeoutVariable) +
                                        "='0': the start-up needs at least 1 second");
  }
  return std::chrono::seconds(seconds);
}

std::chrono::seconds welcome_timeout(std::chrono::seconds start_timeout) {
  return 2 * start_timeout + kWelcomeGrace;
}

std::string bootstrap_message_text(const nlohmann::json& message) {
  // Free text from an application (an abort reason, a communicator name) may be any bytes:
  // replaced where not UTF-8 rather than thrown out of a rank's abort or failure path.
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::error_code append_bootstrap_message(const nlohmann::json& message, std::string& wire) {
  const std::string body = bootstrap_message_text(message);
  if (body.size() > kMaxBootstrapMessage) return errc::frame_too_large;
  const std::size_t at = wire.size();
  wire.resize(at + 4);
  transport::store_le<std::uint32_t>(reinterpret_cast<std::uint8_t*>(wire.data() + at),
                                     static_cast<std::uint32_t>(body.size()));
  wire += body;
  return {};
}

std::error_code write_bootstrap_message(int fd, const nlohmann::json& message,
                                        std::chrono::steady_clock::time_point deadline) {
  std::string wire;
  if (auto ec = append_bootstrap_message(message, wire); ec) return ec;
  std::size_t off = 0;
  while (off < wire.size()) {
    const ssize_t n = ::send(fd, wire.data() + off, wire.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto ec = transport::wait_fd(fd, transport::WaitFor::write, deadline); ec) return ec;
      continue;
    }
    if (n < 0 && errno == EPIPE) return errc::connection_closed;
    return {errno, std::system_category()};
  }
  return {};
}

std::error_code BootstrapReader::feed(int fd) {
  // Messages next() consumed leave the buffer here, once a feed, not one erase per message:
  // a rank sending a megabyte of tiny messages would otherwise cost gigabytes of moves.
  buffer_.erase(0, start_);
  start_ = 0;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      buffer_.append(buf, static_cast<std::size_t>(n));
      if (buffer_.size() > kMaxBootstrapMessage + 4 + sizeof buf) return {};  // next() rejects
      continue;
    }
    if (n == 0) return errc::connection_closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {};
    if (errno == ECONNRESET) return errc::connection_closed;
    return {errno, std::system_category()};
  }
}

bool BootstrapReader::next(nlohmann::json& out, std::error_code& error) {
  error.clear();
  const std::size_t available = buffer_.size() - start_;
  if (available < 4) return false;
  const char* at = buffer_.data() + start_;
  const auto length = transport::load_le<std::uint32_t>(reinterpret_cast<const std::uint8_t*>(at));
  if (length > kMaxBootstrapMessage) {
    error = errc::frame_too_large;
    return false;
  }
  if (available < 4 + static_cast<std::size_t>(length)) return false;
  out = nlohmann::json::parse(at + 4, at + 4 + length, nullptr, false);
  start_ += 4 + static_cast<std::size_t>(length);
  if (out.is_discarded() || !out.is_object() || !out.contains("type") ||
      !out["type"].is_string()) {
    error = errc::frame_unexpected;
    return false;
  }
  return true;
}

std::error_code read_bootstrap_message(int fd, BootstrapReader& reader, nlohmann::json& out,
                                       std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    std::error_code error;
    if (reader.next(out, error)) return {};
    if (error) return error;
    // A message may arrive together with EOF: deliver it before reporting the close.
    const auto fed = reader.feed(fd);
    if (reader.next(out, error)) return {};
    if (error) return error;
    if (fed) return fed;
    if (auto ec = transport::wait_fd(fd, transport::WaitFor::read, deadline); ec) return ec;
  }
}

std::vector<std::string> welcome_local_paths(const nlohmann::json& welcome, int size,
                                             const std::string& host) {
  const auto malformed = [] {
    return Error(ErrorClass::io, "launcher welcome has a malformed 'local_endpoints'");
  };
  if (size < 0) throw malformed();
  std::vector<std::string> paths(static_cast<std::size_t>(size));
  if (!welcome.contains("local_endpoints")) return paths;
  const auto& table = welcome.at("local_endpoints");
  if (!table.is_array() || table.size() != paths.size()) throw malformed();
  for (std::size_t r = 0; r < paths.size(); ++r) {
    const auto& entry = table[r];
    if (entry.is_null()) continue;
    if (!entry.is_object() || !entry.contains("host") || !entry.contains("path") ||
        !entry.at("host").is_string() || !entry.at("path").is_string()) {
      throw malformed();
    }
    auto path = entry.at("path").get<std::string>();
    if (path.empty() || path.front() != '/') throw malformed();
    if (!host.empty() && entry.at("host").get<std::string>() == host) paths[r] = std::move(path);
  }
  return paths;
}

}  // namespace sempi::launch
