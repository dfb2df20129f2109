#include "policy/policy_document.hpp"

#include <fstream>
#include <sstream>

#include <openssl/evp.h>

#include "sempi/error.hpp"

namespace sempi::policy {
namespace {

// The documented default (config/README.md, config/examples/allow-all.json): every rank may
// talk to every rank, every operation on every communicator, no size limit, no message audit.
constexpr const char* kDefaultPolicy = R"({
  "version": 1,
  "mode": "enforce",
  "on_violation": "drop",
  "groups": { "all": "*" },
  "segmentation": [ { "between": ["all", "all"] } ],
  "communicators": [
    { "name": "*", "members": "*", "collectives": "*", "p2p_tags": "*" }
  ],
  "limits": {},
  "audit": { "messages": "off" }
})";

PolicyDocument from_json(nlohmann::json json, bool is_default) {
  PolicyDocument doc;
  doc.canonical = json.dump();
  doc.json = std::move(json);
  doc.is_default = is_default;
  unsigned int len = 0;
  if (EVP_Digest(doc.canonical.data(), doc.canonical.size(), doc.digest.data(), &len,
                 EVP_sha256(), nullptr) != 1 ||
      len != doc.digest.size()) {
    throw Error(ErrorClass::intern, "SHA-256 of the policy failed");
  }
  return doc;
}

}  // namespace

PolicyDocument PolicyDocument::default_policy() {
  return from_json(nlohmann::json::parse(kDefaultPolicy), true);
}

PolicyDocument PolicyDocument::parse(const std::string& text, const std::string& origin) {
  try {
    auto json = nlohmann::json::parse(text);
    if (!json.is_object()) {
      throw Error(ErrorClass::config, origin + ": a policy must be a JSON object");
    }
    return from_json(std::move(json), false);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, but also out_of_range for a number no double holds (1e400).
    throw Error(ErrorClass::config, origin + ": invalid JSON: " + e.what());
  }
}

PolicyDocument PolicyDocument::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorClass::config, "cannot read policy file " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    throw Error(ErrorClass::config, "error reading policy file " + path.string());
  }
  return parse(text.str(), path.string());
}

}  // namespace sempi::policy
