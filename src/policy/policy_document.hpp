#pragma once
// A job's policy as a document: its canonical JSON text and the SHA-256 digest of that text,
// which is bound into every rank certificate. The rules it contains are interpreted by the
// policy engine (policy/); this file only loads, canonicalises and digests.

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pki/identity.hpp"

namespace sempi::policy {

/// Most bytes of a policy file, and of its canonical form: the canonical text travels in every
/// rank's welcome message, which also holds the job's address table (at most 1 MiB in all).
inline constexpr std::size_t kMaxPolicyFileBytes = 1024 * 1024;
inline constexpr std::size_t kMaxPolicyBytes = 256 * 1024;
/// Deepest nesting of arrays and objects a policy may use; the schema needs 4.
inline constexpr std::size_t kMaxPolicyDepth = 16;

/// Parses policy JSON strictly. Besides syntax errors (with line and column), a key repeated
/// in one object (which a reviewer reads one way and the parser another: the last would win),
/// nesting deeper than kMaxPolicyDepth and text longer than kMaxPolicyFileBytes are errors:
/// sempi::Error(config) naming `origin` and, for a key, its JSON path.
nlohmann::json parse_policy_json(const std::string& text, const std::string& origin);

/// Reads a policy file for parse_policy_json: a regular file, a pipe or a character device (a
/// device such as /dev/zero never ends: the read is bounded), at most kMaxPolicyFileBytes + 1
/// bytes, one more than parse_policy_json accepts. Throws sempi::Error(config) naming the path.
std::string read_policy_file(const std::filesystem::path& path);

/// `key` as one JSON pointer (RFC 6901) component: '~' as "~0", '/' as "~1".
std::string escape_pointer(std::string_view key);

struct PolicyDocument {
  nlohmann::json json;
  /// Canonical form: compact, object keys sorted (nlohmann orders them), UTF-8.
  std::string canonical;
  pki::PolicyDigest digest{};
  /// True for the built-in default (no --policy given).
  bool is_default = false;

  /// The documented default: every rank, every operation, every communicator.
  static PolicyDocument default_policy();
  /// Parses JSON text (parse_policy_json). Throws sempi::Error(config); also for a canonical
  /// form longer than kMaxPolicyBytes.
  static PolicyDocument parse(const std::string& text, const std::string& origin);
  /// Reads and parses a file. Throws sempi::Error(config) naming the path.
  static PolicyDocument load(const std::filesystem::path& path);
};

}  // namespace sempi::policy
