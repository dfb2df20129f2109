#pragma once
// A job's policy as a document: its canonical JSON text and the SHA-256 digest of that text,
// which is bound into every rank certificate. The rules it contains are interpreted by the
// policy engine (policy/); this file only loads, canonicalises and digests.

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "pki/identity.hpp"

namespace sempi::policy {

struct PolicyDocument {
  nlohmann::json json;
  /// Canonical form: compact, object keys sorted (nlohmann orders them), UTF-8.
  std::string canonical;
  pki::PolicyDigest digest{};
  /// True for the built-in default (no --policy given).
  bool is_default = false;

  /// The documented default: every rank, every operation, every communicator.
  static PolicyDocument default_policy();
  /// Parses JSON text. Throws sempi::Error(config) naming the line/column of a syntax error.
  static PolicyDocument parse(const std::string& text, const std::string& origin);
  /// Reads and parses a file. Throws sempi::Error(config) naming the path.
  static PolicyDocument load(const std::filesystem::path& path);
};

}  // namespace sempi::policy
