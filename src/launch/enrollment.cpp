#include "launch/enrollment.hpp"

#include <algorithm>
#include <utility>

#include "common/hex.hpp"
#include "pki/csr.hpp"
#include "sempi/error.hpp"
#include "transport/socket.hpp"

namespace sempi::launch {
namespace {

// A P-256 or Ed25519 CSR is well under 1 KiB; the bound keeps parsing cheap.
constexpr std::size_t kMaxCsrPem = 16 * 1024;
constexpr std::size_t kMaxEndpointText = 128;
constexpr std::size_t kMaxHostIdentity = 128;

const std::string* string_field(const nlohmann::json& object, const char* key) {
  if (!object.contains(key)) return nullptr;
  const auto& value = object.at(key);
  return value.is_string() ? &value.get_ref<const std::string&>() : nullptr;
}

}  // namespace

Enrollment::Enrollment(pki::JobCa ca, policy::PolicyDocument policy, std::uint32_t size,
                       std::chrono::seconds validity, std::filesystem::path local_dir)
    : ca_(std::move(ca)),
      policy_(std::move(policy)),
      size_(size),
      validity_(validity),
      local_dir_(std::move(local_dir)),
      ca_pem_(ca_.certificate().to_pem()),
      policy_digest_hex_(to_hex(policy_.digest)),
      ranks_(size) {}

bool Enrollment::is_rank_socket_path(const std::string& path) const {
  const std::string prefix = (local_dir_ / "rank-").string();
  sockaddr_un address;  // the length check peers' connects make
  if (!transport::unix_address(path, address) || path.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  const std::string_view rest = std::string_view(path).substr(prefix.size());
  const std::string_view suffix = ".sock";
  if (rest.size() <= suffix.size() || rest.size() > suffix.size() + 10 ||
      rest.substr(rest.size() - suffix.size()) != suffix) {
    return false;
  }
  const auto digits = rest.substr(0, rest.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string_view::npos;
}

std::optional<std::string> Enrollment::enroll(std::uint32_t rank, const nlohmann::json& message) {
  if (rank >= size_) return "rank " + std::to_string(rank) + " is not part of this job";
  RankState& state = ranks_[rank];
  if (state.cert) return "rank " + std::to_string(rank) + " is already enrolled";

  if (!message.is_object()) return "enroll is not a JSON object";
  const std::string* csr_field = string_field(message, "csr");
  if (csr_field == nullptr) return "enroll without a \"csr\" string";
  const std::string* endpoint_field = string_field(message, "endpoint");
  if (endpoint_field == nullptr) return "enroll without an \"endpoint\" string";
  if (message.contains("pid")) {
    // Informational only: the enrolling process may be a child of the one sempirun started.
    const auto& pid = message.at("pid");
    if (!pid.is_number_integer() || pid.get<std::int64_t>() <= 0) {
      return "enroll with an invalid \"pid\"";
    }
  }
  std::optional<LocalEndpoint> local;
  if (message.contains("local")) {
    const auto& field = message.at("local");
    const std::string* host = field.is_object() ? string_field(field, "host") : nullptr;
    const std::string* path = field.is_object() ? string_field(field, "path") : nullptr;
    if (host == nullptr || path == nullptr) {
      return "enroll with a \"local\" endpoint that is not {\"host\": string, \"path\": string}";
    }
    if (host->empty() || host->size() > kMaxHostIdentity) {
      return "local host identity is empty or longer than " + std::to_string(kMaxHostIdentity) +
             " bytes";
    }
    // It goes into every rank's welcome: printable ASCII, so that escaping cannot blow it up.
    if (!std::all_of(host->begin(), host->end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
      return "local host identity has characters other than printable ASCII";
    }
    // Peers will dial this path: only a socket in the job's own directory, named as ranks
    // name theirs, so that a hostile rank cannot point them at any other socket.
    if (local_dir_.empty()) return "enroll with a \"local\" endpoint, but this job has none";
    if (!is_rank_socket_path(*path)) {
      return "local endpoint path is not " + (local_dir_ / "rank-N.sock").string();
    }
    local = LocalEndpoint{*host, *path};
  }
  const std::string& csr_pem = *csr_field;
  const std::string& endpoint_text = *endpoint_field;
  if (csr_pem.size() > kMaxCsrPem) return "CSR too large";
  if (endpoint_text.size() > kMaxEndpointText) return "endpoint too long";

  std::string endpoint;
  try {
    const auto parsed = transport::parse_endpoint(endpoint_text);
    if (parsed.port() == 0) return "endpoint '" + endpoint_text + "' has port 0";
    if (parsed.address().is_unspecified()) {
      return "endpoint '" + endpoint_text + "' is not an address peers can dial";
    }
    endpoint = transport::format_endpoint(parsed);
  } catch (const Error& e) {
    return std::string("invalid endpoint: ") + e.what();
  }
  // Two ranks cannot listen on one address; a second claim is a confused or hostile rank.
  for (std::uint32_t other = 0; other < size_; ++other) {
    if (ranks_[other].cert && ranks_[other].endpoint == endpoint) {
      return "endpoint " + endpoint + " is already used by rank " + std::to_string(other);
    }
    if (local && ranks_[other].cert && ranks_[other].local == local) {
      return "local endpoint " + local->path + " is already used by rank " + std::to_string(other);
    }
  }

  try {
    const auto csr = pki::Csr::from_pem(csr_pem);  // verifies the self-signature
    pki::IssueOptions options;
    options.rank = rank;
    options.policy_digest = policy_.digest;
    options.validity = validity_;
    state.cert = ca_.issue(csr, options);
  } catch (const Error& e) {
    return std::string("bad CSR: ") + e.what();
  }
  state.endpoint = std::move(endpoint);
  state.local = std::move(local);
  if (++enrolled_ == size_) {
    endpoints_ = nlohmann::json::array();
    local_endpoints_ = nlohmann::json::array();
    for (const auto& r : ranks_) {
      endpoints_.push_back(r.endpoint);
      local_endpoints_.push_back(r.local ? nlohmann::json{{"host", r.local->host},
                                                          {"path", r.local->path}}
                                         : nlohmann::json());
    }
  }
  return std::nullopt;
}

std::optional<std::string> Enrollment::finalize(std::uint32_t rank) {
  if (rank >= size_) return "rank " + std::to_string(rank) + " is not part of this job";
  if (!all_enrolled()) return "finalize before the job started (no welcome yet)";
  RankState& state = ranks_[rank];
  if (state.finalized) return "finalize sent twice";
  state.finalized = true;
  ++finalized_;
  return std::nullopt;
}

nlohmann::json Enrollment::welcome(std::uint32_t rank) const {
  const RankState& state = ranks_.at(rank);
  if (!state.cert || !all_enrolled()) {
    throw Error(ErrorClass::intern, "welcome requested before every rank enrolled");
  }
  return {{"type", "welcome"},
          {"rank", rank},
          {"size", size_},
          {"job", ca_.job().hex()},
          {"certificate", state.cert->to_pem()},
          {"ca", ca_pem_},
          {"policy", policy_.canonical},
          {"policy_digest", policy_digest_hex_},
          {"endpoints", endpoints_},
          {"local_endpoints", local_endpoints_}};
}

}  // namespace sempi::launch
