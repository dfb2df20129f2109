#include "pki/identity.hpp"

#include <openssl/err.h>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "common/hex.hpp"

namespace sempi::pki {

namespace {

constexpr std::string_view kJobPrefix = "sempi://job/";
constexpr std::string_view kRankPart = "/rank/";
constexpr std::string_view kPolicyPart = "/policy/";

// Certificate text is attacker-controlled: quote it printable and bounded in messages.
std::string quote(std::string_view s) {
  constexpr std::size_t kMax = 160;
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kMax) out += "...";
  return out + "'";
}

bool has_sempi_scheme(std::string_view uri) {
  // Schemes are case-insensitive (RFC 3986 3.1): "SEMPI:" must not slip past as a foreign URI.
  constexpr std::string_view kScheme = "sempi:";
  if (uri.size() < kScheme.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    char c = uri[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return false;
  }
  return true;
}

// Returns the sempi URIs of the subjectAltName, or nullopt with `why`.
std::optional<std::vector<std::string>> sempi_uris(X509* cert, std::string& why) {
  if (cert == nullptr) {
    why = "no certificate";
    return std::nullopt;
  }
  int crit = 0;
  ERR_clear_error();
  GeneralNamesPtr names{
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, &crit, nullptr))};
  ERR_clear_error();  // parse failures are reported through `why`, not the queue
  if (!names) {
    if (crit == -1) {
      why = "certificate has no subjectAltName extension";
    } else if (crit == -2) {
      why = "certificate has more than one subjectAltName extension";
    } else {
      why = "certificate's subjectAltName extension is malformed";
    }
    return std::nullopt;
  }
  std::vector<std::string> out;
  const int n = sk_GENERAL_NAME_num(names.get());
  for (int i = 0; i < n; ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names.get(), i);
    if (gn == nullptr || gn->type != GEN_URI) continue;
    const ASN1_IA5STRING* s = gn->d.uniformResourceIdentifier;
    const int len = ASN1_STRING_length(s);
    if (len < 0) continue;
    const std::string_view uri(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                               static_cast<std::size_t>(len));
    if (uri.find('\0') != std::string_view::npos) {
      why = "a subjectAltName URI contains a NUL byte: " + quote(uri);
      return std::nullopt;
    }
    if (has_sempi_scheme(uri)) out.emplace_back(uri);
  }
  return out;
}

enum class UriKind { ca, rank, policy };

struct SempiUri {
  UriKind kind = UriKind::ca;
  JobId job;
  std::string_view value;  // rank digits or policy hex; views into the URI
};

// Parses one sempi URI strictly; nullopt with `why` for anything but the three exact forms.
std::optional<SempiUri> parse_uri(std::string_view uri, std::string& why) {
  if (uri.substr(0, kJobPrefix.size()) != kJobPrefix) {
    why = "unrecognized sempi URI " + quote(uri);
    return std::nullopt;
  }
  const std::string_view rest = uri.substr(kJobPrefix.size());
  const std::size_t slash = rest.find('/');
  const std::string_view job_hex = rest.substr(0, slash);
  if (job_hex.size() != 2 * JobId::kBytes || !is_lower_hex(job_hex)) {
    why = "malformed job id in " + quote(uri) + " (expected 32 lower-case hex digits)";
    return std::nullopt;
  }
  SempiUri out;
  out.job = *JobId::parse(job_hex);
  if (out.job.is_zero()) {
    why = "all-zero job id in " + quote(uri);
    return std::nullopt;
  }
  if (slash == std::string_view::npos) return out;
  const std::string_view tail = rest.substr(slash);
  if (tail.substr(0, kRankPart.size()) == kRankPart) {
    out.kind = UriKind::rank;
    out.value = tail.substr(kRankPart.size());
  } else if (tail.substr(0, kPolicyPart.size()) == kPolicyPart) {
    out.kind = UriKind::policy;
    out.value = tail.substr(kPolicyPart.size());
  } else {
    why = "unrecognized sempi URI " + quote(uri);
    return std::nullopt;
  }
  return out;
}

// Canonical decimal only: no sign, no leading zeros, no whitespace, at most kMaxRank. One
// spelling per rank keeps string comparisons of identities sound.
std::optional<std::uint32_t> parse_rank(std::string_view s) {
  if (s.empty() || s.size() > 8) return std::nullopt;  // kMaxRank has 8 digits
  if (s.size() > 1 && s[0] == '0') return std::nullopt;
  std::uint32_t value = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (value > kMaxRank) return std::nullopt;
  return value;
}

}  // namespace

std::string ca_uri(const JobId& job) { return std::string(kJobPrefix) + job.hex(); }

std::string rank_uri(const JobId& job, std::uint32_t rank) {
  return ca_uri(job) + std::string(kRankPart) + std::to_string(rank);
}

std::string policy_uri(const JobId& job, const PolicyDigest& digest) {
  return ca_uri(job) + std::string(kPolicyPart) + to_hex(digest);
}

std::optional<PolicyDigest> parse_policy_digest(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  const auto bytes = from_hex(hex);
  if (!bytes) return std::nullopt;
  PolicyDigest out{};
  std::copy(bytes->begin(), bytes->end(), out.begin());
  return out;
}

std::optional<Identity> parse_identity(X509* cert, std::string& why) {
  const auto uris = sempi_uris(cert, why);
  if (!uris) return std::nullopt;
  std::optional<SempiUri> rank;
  std::optional<SempiUri> policy;
  std::string rank_text;
  for (const std::string& uri : *uris) {
    auto parsed = parse_uri(uri, why);
    if (!parsed) return std::nullopt;
    switch (parsed->kind) {
      case UriKind::ca:
        why = "unexpected job CA URI " + quote(uri) + " in a rank certificate";
        return std::nullopt;
      case UriKind::rank:
        if (rank) {
          why = "certificate has more than one sempi rank URI";
          return std::nullopt;
        }
        rank = parsed;
        rank_text = uri;
        break;
      case UriKind::policy:
        if (policy) {
          why = "certificate has more than one sempi policy URI";
          return std::nullopt;
        }
        policy = parsed;
        break;
    }
  }
  if (!rank) {
    why = "certificate has no sempi rank URI (sempi://job/<id>/rank/<n>)";
    return std::nullopt;
  }
  if (!policy) {
    why = "certificate has no sempi policy URI (sempi://job/<id>/policy/<digest>)";
    return std::nullopt;
  }
  if (rank->job != policy->job) {
    why = "the rank URI and the policy URI name different jobs (" + rank->job.hex() + " vs " +
          policy->job.hex() + ")";
    return std::nullopt;
  }
  Identity id;
  id.job = rank->job;
  const auto r = parse_rank(rank->value);
  if (!r) {
    why = "rank in " + quote(rank_text) + " is not a canonical decimal in [0, " +
          std::to_string(kMaxRank) + "]";
    return std::nullopt;
  }
  id.rank = *r;
  const auto digest = policy->value.size() == 64 && is_lower_hex(policy->value)
                          ? parse_policy_digest(policy->value)
                          : std::nullopt;
  if (!digest) {
    why =
        "malformed policy digest " + quote(policy->value) + " (expected 64 lower-case hex digits)";
    return std::nullopt;
  }
  id.policy_digest = *digest;
  return id;
}

std::optional<JobId> parse_ca_job(X509* cert, std::string& why) {
  const auto uris = sempi_uris(cert, why);
  if (!uris) return std::nullopt;
  if (uris->empty()) {
    why = "certificate has no sempi://job/<id> URI in its subjectAltName";
    return std::nullopt;
  }
  if (uris->size() > 1) {
    why = "certificate has " + std::to_string(uris->size()) +
          " sempi URIs; a job CA has exactly one (sempi://job/<id>)";
    return std::nullopt;
  }
  const auto parsed = parse_uri(uris->front(), why);
  if (!parsed) return std::nullopt;
  if (parsed->kind != UriKind::ca) {
    why = "sempi URI " + quote(uris->front()) + " names a rank, not a job CA";
    return std::nullopt;
  }
  return parsed->job;
}

bool has_rank_key_usage(X509* cert) {
  if (cert == nullptr) return false;
  const std::uint32_t flags = X509_get_extension_flags(cert);
  // Without the extension X509_get_extended_key_usage reports "any"; sempi requires it present.
  if ((flags & EXFLAG_INVALID) != 0 || (flags & EXFLAG_XKUSAGE) == 0) return false;
  constexpr std::uint32_t kBoth = XKU_SSL_SERVER | XKU_SSL_CLIENT;
  return (X509_get_extended_key_usage(cert) & kBoth) == kBoth;
}

}  // namespace sempi::pki
