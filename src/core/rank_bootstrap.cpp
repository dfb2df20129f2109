#include "core/rank_bootstrap.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "common/diagnostics.hpp"
#include "common/env_number.hpp"
#include "common/hex.hpp"
#include "common/printable.hpp"
#include "core/higher_rank_acceptor.hpp"
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

// How peers on this host connect (SEMPI_LOCAL_TRANSPORT): "shm" (the default: a Unix socket
// for the handshake and wake-ups, shared rings for the records), "unix" (records on the Unix
// socket) or "tcp".
enum class LocalTransport { shm, unix_socket, tcp };

LocalTransport local_transport_from_env() {
  const std::string value = env_or("SEMPI_LOCAL_TRANSPORT", "shm");
  if (value == "shm") return LocalTransport::shm;
  if (value == "unix") return LocalTransport::unix_socket;
  if (value == "tcp") return LocalTransport::tcp;
  throw Error(ErrorClass::config,
              "SEMPI_LOCAL_TRANSPORT='" + value + "' is not 'shm', 'unix' or 'tcp'");
}

// The launcher's socket, named by SEMPI_BOOTSTRAP_FD. The variable is removed once read: the
// socket is close-on-exec from here on, so a program this rank starts would find that number
// closed, or another file under it, and write its enrollment (its CSR) there.
int bootstrap_fd_from_env() {
  const std::string text = std::getenv(launch::kBootstrapFdVariable);
  ::unsetenv(launch::kBootstrapFdVariable);
  const auto refuse = [&](const char* what) {
    return Error(ErrorClass::config, std::string(launch::kBootstrapFdVariable) + "='" +
                                         printable(text) + "' " + what +
                                         "; start ranks with sempirun");
  };
  char* end = nullptr;
  const long fd = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || fd < 0 || fd > INT_MAX ||
      ::fcntl(static_cast<int>(fd), F_GETFD) < 0) {
    throw refuse("is not an open file descriptor");
  }
  const auto socket_option = [fd](int name) {
    int value = -1;
    socklen_t length = sizeof value;
    return ::getsockopt(static_cast<int>(fd), SOL_SOCKET, name, &value, &length) == 0 ? value : -1;
  };
  if (socket_option(SO_DOMAIN) != AF_UNIX || socket_option(SO_TYPE) != SOCK_STREAM) {
    throw refuse("is not the launcher's socket (a Unix stream socket)");
  }
  return static_cast<int>(fd);
}

nlohmann::json exchange(int fd, const nlohmann::json& request,
                        std::chrono::steady_clock::time_point deadline,
                        launch::BootstrapReader& reader) {
  if (auto ec = launch::write_bootstrap_message(fd, request, deadline); ec) {
    throw Error(ErrorClass::io, "cannot reach the launcher: " + ec.message());
  }
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
  const auto document = policy::PolicyDocument::default_policy();
  job.policy_text = document.canonical;
  job.policy = std::make_shared<const policy::Policy>(policy::Policy::compile(document));
  return job;
}

// Other processes of this user (a compromised rank of the same job on this host, where the
// kernel's ptrace_scope allows it) must not read this rank's key from its memory, nor take its
// bootstrap channel with pidfd_getfd: the rank is not dumpable, as sempirun is not. With
// SEMPI_DUMPABLE=1 it stays dumpable, for core files and attaching a debugger.
void protect_from_siblings() {
  const std::string value = env_or("SEMPI_DUMPABLE", "0");
  if (value == "1") return;
  if (value != "0") throw Error(ErrorClass::config, "SEMPI_DUMPABLE='" + value + "' is not 0 or 1");
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) {
    throw Error(ErrorClass::io, std::string("cannot protect this rank's key: prctl: ") +
                                    std::strerror(errno));
  }
}

// A rank holds a connection to each peer (a socket, and for shared rings a mapping and a wake-up
// socket while it is set up; an accepted local connection holds three until its HELLO: the
// socket, a duplicate watched for the peer's close, and the rings' memfd): a job of a few
// hundred ranks outgrows the usual soft limit of 1024 descriptors. Raise it toward the hard
// limit as far as the job needs, as sempirun does for itself; the application's own files keep
// what was there before.
void raise_fd_limit_for(int size) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const rlim_t needed = 3 * static_cast<rlim_t>(size) + 256;
  if (limit.rlim_cur >= needed) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

JoinedJob join_job(std::chrono::seconds start_timeout) {
  protect_from_siblings();
  JoinedJob joined;
  joined.bootstrap.reset(bootstrap_fd_from_env());
  const int fd = joined.bootstrap.get();
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // the application's children must not inherit it
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  // The key never leaves this process; only the CSR does.
  auto key = std::make_shared<const pki::PrivateKey>(pki::PrivateKey::generate());
  const auto csr = pki::Csr::create(*key);
  // The launcher's private directory for the job's Unix sockets (launch/job_socket_dir.hpp).
  const LocalTransport local_transport = local_transport_from_env();
  const std::string local_dir = local_transport != LocalTransport::tcp
                                    ? env_or(launch::kLocalDirVariable, "")
                                    : std::string();
  transport::Listener listener(
      transport::Endpoint(asio::ip::make_address(env_or("SEMPI_BIND_ADDRESS", "127.0.0.1")), 0),
      local_dir);
  const std::string my_host = local_dir.empty() ? std::string() : transport::local_host_identity();
  if (!listener.local_failure().empty()) {
    diagnostics().warn("sempi: peers on this host will reach this rank over TCP: {}",
                       listener.local_failure());
  }

  nlohmann::json enroll = {{"type", "enroll"},
                           {"csr", csr.to_pem()},
                           {"endpoint", transport::format_endpoint(listener.endpoint())},
                           {"pid", static_cast<long>(::getpid())}};
  if (!my_host.empty() && !listener.local_path().empty()) {
    enroll["local"] = {{"host", my_host}, {"path", listener.local_path()}};
  }
  const nlohmann::json welcome =
      exchange(fd, enroll, std::chrono::steady_clock::now() + launch::welcome_timeout(start_timeout),
               joined.bootstrap_reader);
  // Every rank has enrolled: the connections get their own time.
  const auto deadline = std::chrono::steady_clock::now() + start_timeout;

  joined.rank = field<int>(welcome, "rank");
  joined.size = field<int>(welcome, "size");
  // Absent from an older launcher's welcome: the same (false) for every rank of its job.
  joined.oversubscribed =
      welcome.contains("oversubscribed") && field<bool>(welcome, "oversubscribed");
  const auto endpoints = field<std::vector<std::string>>(welcome, "endpoints");
  if (joined.size < 1 || joined.rank < 0 || joined.rank >= joined.size ||
      endpoints.size() != static_cast<std::size_t>(joined.size)) {
    throw Error(ErrorClass::io, "launcher welcome is inconsistent (rank/size/endpoints)");
  }
  raise_fd_limit_for(joined.size);
  const auto local_paths = launch::welcome_local_paths(welcome, joined.size, my_host);
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
  joined.policy = std::make_shared<const policy::Policy>(policy::Policy::compile(policy));

  // Trust nothing the launcher said without checking it against the certificate itself.
  std::string why;
  const auto identity = pki::parse_identity(certificate.get(), why);
  if (!identity || identity->job != joined.job ||
      identity->rank != static_cast<std::uint32_t>(joined.rank) ||
      identity->policy_digest != policy.digest) {
    throw Error(ErrorClass::security, "issued certificate does not match this rank: " +
                                          (identity ? std::string("identity mismatch") : why));
  }

  // The audit log starts as soon as this rank knows who it is (rank, job, audit directory).
  if (welcome.contains("audit_dir")) {
    const auto dir = std::filesystem::path(field<std::string>(welcome, "audit_dir"));
    audit::AuditLog::Options options{joined.job.hex(), joined.rank};
    options.flush_each = joined.policy->audit_flush_each_record();
    joined.audit = audit::AuditLog::create(dir / audit::rank_file_name(joined.rank), options);
    joined.audit->event(
        "rank.join", true, {},
        {{"ranks", joined.size},
         {"policy_digest", to_hex(policy.digest)},
         {"policy_mode", policy::mode_name(joined.policy->mode())},
         {"message_audit", policy::message_audit_name(joined.policy->message_audit())},
         {"ca_fingerprint", to_hex(ca.fingerprint_sha256())},
         {"certificate_fingerprint", to_hex(certificate.fingerprint_sha256())},
         {"endpoint", transport::format_endpoint(listener.endpoint())},
         {"pid", static_cast<long>(::getpid())}});
  }
  // Connection events: `detail` is the failure reason, or the TLS suite of a good channel.
  const auto audit_event = [log = joined.audit](const char* action, bool success, int peer,
                                                const std::string& detail,
                                                const char* transport) {
    if (!log) return;
    if (success) {
      log->event(action, true, {},
                 {{"peer", peer}, {"tls_cipher", detail}, {"transport", transport}});
    } else {
      log->event(action, false, detail, {{"peer", peer}});
    }
  };
  const policy::Policy& rules = *joined.policy;

  transport::LocalEndpoint local;
  local.tls = transport::TlsContext::create(transport::TlsConfig{ca, certificate, key});
  local.hello.job = joined.job;
  local.hello.rank = static_cast<std::uint32_t>(joined.rank);
  local.hello.world_size = static_cast<std::uint32_t>(joined.size);
  local.hello.policy_digest = policy.digest;
  local.shared_memory = local_transport == LocalTransport::shm;
  local.hello.limits.max_unexpected_bytes =
      env_bytes("SEMPI_MAX_UNEXPECTED_BYTES", local.hello.limits.max_unexpected_bytes);

  joined.channels.resize(static_cast<std::size_t>(joined.size));
  int higher = 0;
  std::vector<int> skipped;  // never connected: the policy never lets them talk
  for (int peer = 0; peer < joined.size; ++peer) {
    if (peer == joined.rank) continue;
    if (!rules.ever_talk(joined.rank, peer)) {
      skipped.push_back(peer);
    } else if (peer > joined.rank) {
      ++higher;
    }
  }

  // Accept the higher ranks on a second thread while this one dials the lower ranks.
  HigherRankAcceptor acceptor;
  acceptor.my_rank = joined.rank;
  acceptor.expected = higher;
  acceptor.may_talk = [&](int peer) { return rules.ever_talk(joined.rank, peer); };
  acceptor.audit = audit_event;
  auto accepted = std::async(std::launch::async, [&] {
    return acceptor.run(listener, local, deadline, joined.channels);
  });

  std::string dial_error;
  for (int peer = 0; peer < joined.rank && dial_error.empty(); ++peer) {
    if (!rules.ever_talk(joined.rank, peer)) continue;
    ChannelError error;
    const auto p = static_cast<std::size_t>(peer);
    auto channel = Channel::dial(local, transport::parse_endpoint(endpoints[p]), local_paths[p],
                                 static_cast<std::uint32_t>(peer), deadline, error);
    if (!channel) {
      dial_error = "cannot connect to rank " + std::to_string(peer) + ": " + error.message();
      audit_event("tls.failure", false, peer, error.message(), nullptr);
      break;
    }
    audit_event("connection.open", true, peer, channel->cipher(), channel->transport());
    joined.channels[static_cast<std::size_t>(peer)] = std::move(channel);
  }
  // On a failed dial, wake the accepting thread now rather than at the deadline.
  if (!dial_error.empty()) listener.shutdown();
  const std::string accept_error = accepted.get();
  if (!dial_error.empty()) throw Error(ErrorClass::security, dial_error);
  if (!accept_error.empty()) throw Error(ErrorClass::timeout, accept_error);
  if (joined.audit) {
    joined.audit->event("mesh.wired", true, {},
                        {{"connected", joined.size - 1 - static_cast<int>(skipped.size())},
                         {"never_connected", skipped}});
  }
  return joined;
}

}  // namespace sempi::detail
