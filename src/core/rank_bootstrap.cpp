#include "core/rank_bootstrap.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/hex.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "pki/csr.hpp"
#include "pki/identity.hpp"
#include "policy/policy_document.hpp"
#include "sempi/error.hpp"
#include "transport/listener.hpp"

namespace sempi::detail {
namespace {

using transport::Channel;
using transport::ChannelError;

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::uint64_t env_bytes(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const auto parsed = std::strtoull(value, &end, 10);
  if (end == value || *end != '\0') {
    throw Error(ErrorClass::config, std::string(name) + "='" + value + "' is not a byte count");
  }
  return parsed;
}

int bootstrap_fd_from_env() {
  const char* text = std::getenv(launch::kBootstrapFdVariable);
  char* end = nullptr;
  const long fd = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || fd < 0 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0) {
    throw Error(ErrorClass::config, std::string(launch::kBootstrapFdVariable) + "='" + text +
                                        "' is not an open file descriptor; start ranks with "
                                        "sempirun");
  }
  return static_cast<int>(fd);
}

nlohmann::json exchange(int fd, const nlohmann::json& request,
                        std::chrono::steady_clock::time_point deadline) {
  if (auto ec = launch::write_bootstrap_message(fd, request, deadline); ec) {
    throw Error(ErrorClass::io, "cannot reach the launcher: " + ec.message());
  }
  launch::BootstrapReader reader;
  nlohmann::json reply;
  if (auto ec = launch::read_bootstrap_message(fd, reader, reply, deadline); ec) {
    throw Error(ec == errc::timeout ? ErrorClass::timeout : ErrorClass::io,
                "no answer from the launcher: " + ec.message());
  }
  const auto type = reply.value("type", std::string());
  if (type == "error" || type == "abort") {
    throw Error(type == "error" ? ErrorClass::security : ErrorClass::peer_failed,
                "the launcher refused to start this rank: " + reply.value("reason", type));
  }
  if (type != "welcome") throw Error(ErrorClass::io, "unexpected launcher message '" + type + "'");
  return reply;
}

template <class T>
T field(const nlohmann::json& message, const char* name) {
  if (!message.contains(name)) {
    throw Error(ErrorClass::io, std::string("launcher welcome lacks '") + name + "'");
  }
  try {
    return message.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorClass::io, std::string("launcher welcome has a malformed '") + name + "'");
  }
}

}  // namespace

bool launched_by_sempirun() { return std::getenv(launch::kBootstrapFdVariable) != nullptr; }

JoinedJob singleton_job() {
  JoinedJob job;
  job.job = pki::JobId::random();
  job.policy_text = policy::PolicyDocument::default_policy().canonical;
  return job;
}

JoinedJob join_job(std::chrono::steady_clock::time_point deadline) {
  JoinedJob joined;
  joined.bootstrap.reset(bootstrap_fd_from_env());
  const int fd = joined.bootstrap.get();
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // the application's children must not inherit it
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  // The key never leaves this process; only the CSR does.
  auto key = std::make_shared<const pki::PrivateKey>(pki::PrivateKey::generate());
  const auto csr = pki::Csr::create(*key);
  transport::Listener listener(
      transport::Endpoint(asio::ip::make_address(env_or("SEMPI_BIND_ADDRESS", "127.0.0.1")), 0));

  const nlohmann::json welcome =
      exchange(fd,
               {{"type", "enroll"},
                {"csr", csr.to_pem()},
                {"endpoint", transport::format_endpoint(listener.endpoint())},
                {"pid", static_cast<long>(::getpid())}},
               deadline);

  joined.rank = field<int>(welcome, "rank");
  joined.size = field<int>(welcome, "size");
  const auto endpoints = field<std::vector<std::string>>(welcome, "endpoints");
  if (joined.size < 1 || joined.rank < 0 || joined.rank >= joined.size ||
      endpoints.size() != static_cast<std::size_t>(joined.size)) {
    throw Error(ErrorClass::io, "launcher welcome is inconsistent (rank/size/endpoints)");
  }
  const auto job = pki::JobId::parse(field<std::string>(welcome, "job"));
  if (!job) throw Error(ErrorClass::io, "launcher welcome has a malformed job id");
  joined.job = *job;
  const auto certificate = pki::Certificate::from_pem(field<std::string>(welcome, "certificate"));
  const auto ca = pki::Certificate::from_pem(field<std::string>(welcome, "ca"));
  joined.policy_text = field<std::string>(welcome, "policy");
  const auto policy = policy::PolicyDocument::parse(joined.policy_text, "launcher policy");
  if (to_hex(policy.digest) != field<std::string>(welcome, "policy_digest")) {
    throw Error(ErrorClass::security, "policy digest from the launcher does not match its policy");
  }

  // Trust nothing the launcher said without checking it against the certificate itself.
  std::string why;
  const auto identity = pki::parse_identity(certificate.get(), why);
  if (!identity || identity->job != joined.job ||
      identity->rank != static_cast<std::uint32_t>(joined.rank) ||
      identity->policy_digest != policy.digest) {
    throw Error(ErrorClass::security, "issued certificate does not match this rank: " +
                                          (identity ? std::string("identity mismatch") : why));
  }

  transport::LocalEndpoint local;
  local.tls = transport::TlsContext::create(transport::TlsConfig{ca, certificate, key});
  local.hello.job = joined.job;
  local.hello.rank = static_cast<std::uint32_t>(joined.rank);
  local.hello.world_size = static_cast<std::uint32_t>(joined.size);
  local.hello.policy_digest = policy.digest;
  local.hello.limits.max_unexpected_bytes =
      env_bytes("SEMPI_MAX_UNEXPECTED_BYTES", local.hello.limits.max_unexpected_bytes);

  joined.channels.resize(static_cast<std::size_t>(joined.size));
  const int higher = joined.size - 1 - joined.rank;

  // Accept the higher ranks on a second thread while this one dials the lower ranks.
  auto accepted = std::async(std::launch::async, [&]() -> std::string {
    std::vector<bool> connected(static_cast<std::size_t>(joined.size), false);
    int remaining = higher;
    while (remaining > 0) {
      std::error_code ec;
      auto socket = listener.accept(deadline, ec);
      if (!socket.valid()) return "waiting for higher ranks to connect: " + ec.message();
      ChannelError error;
      auto claim = [&](std::uint32_t rank) {
        const auto r = static_cast<std::size_t>(rank);
        if (static_cast<int>(rank) <= joined.rank || connected[r]) return false;
        connected[r] = true;
        return true;
      };
      const auto handshake_deadline =
          std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(30));
      auto channel = Channel::accept(local, std::move(socket), claim, handshake_deadline, error);
      if (!channel) {
        // A refused peer is not fatal: the genuine rank may still connect.
        spdlog::warn("sempi[rank {}]: refused a connection: {}", joined.rank, error.message());
        continue;
      }
      joined.channels[channel->peer().rank] = std::move(channel);
      --remaining;
    }
    return {};
  });

  std::string dial_error;
  for (int peer = 0; peer < joined.rank && dial_error.empty(); ++peer) {
    ChannelError error;
    auto channel = Channel::connect(local, transport::parse_endpoint(endpoints[static_cast<std::size_t>(peer)]),
                                    static_cast<std::uint32_t>(peer), deadline, error);
    if (!channel) {
      dial_error = "cannot connect to rank " + std::to_string(peer) + ": " + error.message();
      break;
    }
    joined.channels[static_cast<std::size_t>(peer)] = std::move(channel);
  }
  // On a failed dial, wake the accepting thread now rather than at the deadline.
  if (!dial_error.empty()) ::shutdown(listener.native_handle(), SHUT_RDWR);
  const std::string accept_error = accepted.get();
  if (!dial_error.empty()) throw Error(ErrorClass::security, dial_error);
  if (!accept_error.empty()) throw Error(ErrorClass::timeout, accept_error);
  return joined;
}

}  // namespace sempi::detail
