// `sempi pki`: create a job CA, issue rank certificates, inspect certificates.

#include <unistd.h>

#include <openssl/crypto.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/hex.hpp"
#include "pki/certificate.hpp"
#include "pki/csr.hpp"
#include "pki/identity.hpp"
#include "pki/job_ca.hpp"
#include "pki/job_id.hpp"
#include "pki/key.hpp"
#include "pki/pem_files.hpp"
#include "pki/secure_heap.hpp"
#include "sempi/cli_args.hpp"
#include "sempi/command.hpp"
#include "sempi/error.hpp"

namespace sempi::tool {

namespace {

namespace fs = std::filesystem;
// ordered_json keeps the documented key order in the output.
using Json = nlohmann::ordered_json;

constexpr long long kMaxDays = 3650;

constexpr const char* kPkiUsage =
    "usage: sempi pki <subcommand> [options]\n"
    "\n"
    "subcommands:\n"
    "  ca        create a job CA (certificate and key) in a directory\n"
    "  issue     issue a rank certificate and key from a job CA directory\n"
    "  inspect   print the sempi identity and validity of a certificate\n"
    "\n"
    "Run 'sempi pki <subcommand> --help' for its options.\n";

constexpr const char* kCaUsage =
    "usage: sempi pki ca --job ID|random --out DIR [--days N] [--key-type TYPE] [--force]\n"
    "\n"
    "Creates a self-signed job CA (CA:TRUE, pathlen:0) for the job and writes\n"
    "DIR/ca.pem (mode 0644) and DIR/ca.key (mode 0600, unencrypted); DIR is created 0700.\n"
    "\n"
    "  --job ID|random   32 hex digit job id, or 'random' for a fresh one\n"
    "  --out DIR         output directory\n"
    "  --days N          validity in days, 1..3650 (default 30)\n"
    "  --key-type TYPE   ecdsa-p256 (default) or ed25519\n"
    "  --force           overwrite an existing ca.pem / ca.key\n"
    "\n"
    "Prints the job id and the CA's SHA-256 fingerprint.\n";

constexpr const char* kIssueUsage =
    "usage: sempi pki issue --ca DIR --rank R --out DIR2 [--policy-digest HEX64] [--days N]\n"
    "                       [--key-type TYPE] [--force]\n"
    "\n"
    "Loads DIR/ca.pem and DIR/ca.key, generates a rank key in memory and issues a rank\n"
    "certificate for it. Writes DIR2/rank.pem (0644) and DIR2/rank.key (0600); DIR2 is\n"
    "created 0700.\n"
    "\n"
    "  --ca DIR              job CA directory written by 'sempi pki ca'\n"
    "  --rank R              rank number, 0..16777215\n"
    "  --out DIR2            output directory\n"
    "  --policy-digest HEX64 SHA-256 digest of the job policy, 64 hex digits.\n"
    "                        Default: 64 zeros, a placeholder that matches only peers\n"
    "                        issued with the same placeholder; pass the real digest for\n"
    "                        production jobs\n"
    "  --days N              validity in days, 1..3650 (default 1; never beyond the CA's)\n"
    "  --key-type TYPE       ecdsa-p256 (default) or ed25519\n"
    "  --force               overwrite an existing rank.pem / rank.key\n";

constexpr const char* kInspectUsage =
    "usage: sempi pki inspect CERT [--json]\n"
    "\n"
    "Prints the job, rank (or CA), policy digest, validity (UTC), SHA-256 fingerprint and\n"
    "subject of a PEM certificate. With --json prints one JSON object with the keys job,\n"
    "rank, policy_digest, not_before, not_after, fingerprint_sha256, is_ca, subject\n"
    "(and identity_error when the certificate carries no valid sempi identity).\n"
    "\n"
    "Exit status: 0 a valid sempi identity, 1 a certificate without one, 2 an error.\n";

[[noreturn]] void usage_error(const std::string& message) {
  throw Error(ErrorClass::config, message);
}

void no_positionals(const CliArgs& cli) {
  if (!cli.positional().empty()) {
    usage_error("unexpected argument '" + cli.positional().front() + "'");
  }
}

std::chrono::seconds days_option(const CliArgs& cli, long long fallback) {
  long long days = fallback;
  if (const auto v = cli.value("--days")) days = parse_integer(*v, 1, kMaxDays, "--days");
  return std::chrono::hours(24 * days);
}

pki::KeyType key_type_option(const CliArgs& cli) {
  const auto v = cli.value("--key-type");
  return v ? pki::parse_key_type(*v) : pki::KeyType::ecdsa_p256;
}

// Refuses to replace existing output unless --force: a silently overwritten CA key would
// orphan every certificate it issued.
void check_overwrite(const std::vector<fs::path>& paths, bool force) {
  if (force) return;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::symlink_status(p, ec).type() != fs::file_type::not_found) {
      usage_error(p.string() + " already exists; remove it, choose another --out or pass --force");
    }
  }
}

// Wipes a private key's text when it goes out of scope, however the scope is left.
struct WipeOnExit {
  explicit WipeOnExit(std::string& secret) : text(secret) {}
  std::string& text;
  WipeOnExit(const WipeOnExit&) = delete;
  WipeOnExit& operator=(const WipeOnExit&) = delete;
  ~WipeOnExit() { OPENSSL_cleanse(text.data(), text.size()); }
};

// Writes a key (0600) and then its certificate (0644). Without --force, neither may exist,
// checked by the writes themselves: of two runs racing for one directory, one wins whole, and
// a loser that already wrote its key removes it. With --force, the new certificate is written
// aside first, so that a failure (no space) leaves the old pair as it was, not a new key with
// the old certificate. The key's text is wiped from memory after.
void write_key_and_certificate(const fs::path& key_path, std::string key_pem,
                               const fs::path& cert_path, const std::string& cert_pem,
                               bool force) {
  const WipeOnExit wipe(key_pem);
  if (force) {
    // What rename() cannot replace (a directory, say) is refused before anything changes.
    std::error_code ec;
    const auto status = fs::symlink_status(cert_path, ec);
    if (!ec && fs::exists(status) && !fs::is_regular_file(status) && !fs::is_symlink(status)) {
      throw Error(ErrorClass::config,
                  "cannot replace " + cert_path.string() + ": not a regular file");
    }
    const fs::path aside = cert_path.string() + ".new-" + std::to_string(::getpid());
    ::unlink(aside.c_str());  // left by a run killed here under the same pid (a container's 1)
    pki::write_new_file(aside, cert_pem, 0644);
    try {
      pki::write_file(key_path, key_pem, 0600, pki::Existing::replace);
    } catch (...) {
      ::unlink(aside.c_str());
      throw;
    }
    if (::rename(aside.c_str(), cert_path.c_str()) != 0) {
      const int err = errno;
      ::unlink(aside.c_str());
      throw Error(ErrorClass::io, "cannot replace " + cert_path.string() + ": " +
                                      std::strerror(err) + " (its key was replaced: run again)");
    }
    return;
  }
  // Key first: a certificate without its key is useless, a key without one is just retried.
  pki::write_file(key_path, key_pem, 0600, pki::Existing::refuse);
  try {
    pki::write_file(cert_path, cert_pem, 0644, pki::Existing::refuse);
  } catch (...) {
    ::unlink(key_path.c_str());
    throw;
  }
}

std::string fingerprint_hex(const pki::Certificate& cert) {
  return to_hex(cert.fingerprint_sha256());
}

int run_ca(const std::vector<std::string>& args) {
  const CliSpec spec{{"--job", "--days", "--key-type", "--out"}, {"--force"}};
  if (wants_help(args, spec)) {
    std::fputs(kCaUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  no_positionals(cli);
  const std::string job_text = cli.required("--job");
  const fs::path out = cli.required("--out");
  const auto validity = days_option(cli, 30);
  const pki::KeyType key_type = key_type_option(cli);

  // Before the first random bytes: OpenSSL then keeps its generators' state there too.
  pki::ensure_secure_heap();
  pki::JobId job;
  if (job_text == "random") {
    job = pki::JobId::random();
  } else {
    const auto parsed = pki::JobId::parse(job_text);
    if (!parsed || parsed->is_zero()) {
      usage_error("invalid --job '" + job_text +
                  "': expected 32 hex digits (not all zero) or 'random'");
    }
    job = *parsed;
  }

  const fs::path cert_path = out / "ca.pem";
  const fs::path key_path = out / "ca.key";
  check_overwrite({cert_path, key_path}, cli.flag("--force"));
  const pki::JobCa ca = pki::JobCa::create(job, validity, key_type);
  const fs::path dir = pki::make_private_dir(out);
  write_key_and_certificate(dir / key_path.filename(), ca.key().to_pem(),
                            dir / cert_path.filename(), ca.certificate().to_pem(),
                            cli.flag("--force"));

  std::printf("job: %s\n", job.hex().c_str());
  std::printf("key type: %s\n", pki::key_type_name(key_type));
  std::printf("not after: %s\n", pki::format_utc(ca.certificate().not_after()).c_str());
  std::printf("fingerprint sha256: %s\n", fingerprint_hex(ca.certificate()).c_str());
  std::printf("wrote %s and %s\n", cert_path.c_str(), key_path.c_str());
  return kExitOk;
}

int run_issue(const std::vector<std::string>& args) {
  const CliSpec spec{{"--ca", "--rank", "--policy-digest", "--days", "--key-type", "--out"},
                     {"--force"}};
  if (wants_help(args, spec)) {
    std::fputs(kIssueUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  no_positionals(cli);
  const fs::path ca_dir = cli.required("--ca");
  const auto rank =
      static_cast<std::uint32_t>(parse_integer(cli.required("--rank"), 0, pki::kMaxRank, "--rank"));
  const fs::path out = cli.required("--out");
  const auto validity = days_option(cli, 1);
  const pki::KeyType key_type = key_type_option(cli);
  pki::PolicyDigest digest{};  // placeholder: 64 zeros (see --help)
  if (const auto v = cli.value("--policy-digest")) {
    const auto parsed = pki::parse_policy_digest(*v);
    if (!parsed) usage_error("invalid --policy-digest '" + *v + "': expected 64 hex digits");
    digest = *parsed;
  }

  // Sequenced reads, so a missing CA directory is reported as its ca.pem, deterministically.
  const std::string ca_pem = pki::read_file(ca_dir / "ca.pem");
  std::string ca_key = pki::read_file(ca_dir / "ca.key");
  const WipeOnExit wipe(ca_key);
  const pki::JobCa ca = pki::JobCa::load(ca_pem, ca_key);
  const fs::path cert_path = out / "rank.pem";
  const fs::path key_path = out / "rank.key";
  check_overwrite({cert_path, key_path}, cli.flag("--force"));

  // Same flow as a launcher: the key stays with its owner, only the CSR reaches the CA.
  const pki::PrivateKey key = pki::PrivateKey::generate(key_type);
  const pki::Csr csr = pki::Csr::create(key);
  pki::IssueOptions options;
  options.rank = rank;
  options.policy_digest = digest;
  options.validity = validity;
  const pki::Certificate cert = ca.issue(csr, options);

  const fs::path dir = pki::make_private_dir(out);
  write_key_and_certificate(dir / key_path.filename(), key.to_pem(), dir / cert_path.filename(),
                            cert.to_pem(), cli.flag("--force"));

  std::printf("job: %s\n", ca.job().hex().c_str());
  std::printf("rank: %u\n", rank);
  std::printf("policy digest: %s\n", to_hex(digest).c_str());
  std::printf("not after: %s\n", pki::format_utc(cert.not_after()).c_str());
  std::printf("fingerprint sha256: %s\n", fingerprint_hex(cert).c_str());
  std::printf("wrote %s and %s\n", cert_path.c_str(), key_path.c_str());
  return kExitOk;
}

int run_inspect(const std::vector<std::string>& args) {
  const CliSpec spec{{}, {"--json"}};
  if (wants_help(args, spec)) {
    std::fputs(kInspectUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  if (cli.positional().size() != 1) usage_error("inspect takes exactly one certificate file");
  const fs::path path = cli.positional().front();
  const std::string pem = pki::read_file(path);
  pki::Certificate cert = [&] {
    try {
      return pki::Certificate::from_pem(pem);
    } catch (const Error& e) {
      throw Error(ErrorClass::config, path.string() + ": " + e.what());
    }
  }();

  const bool is_ca = (X509_get_extension_flags(cert.get()) & EXFLAG_CA) != 0;
  std::string why;
  std::optional<pki::JobId> job;
  std::optional<pki::Identity> identity;
  if (is_ca) {
    job = pki::parse_ca_job(cert.get(), why);
  } else {
    identity = pki::parse_identity(cert.get(), why);
    if (identity) job = identity->job;
  }
  const bool valid = job.has_value();

  Json j;
  j["job"] = job ? Json(job->hex()) : Json(nullptr);
  j["rank"] = identity ? Json(identity->rank) : Json(nullptr);
  j["policy_digest"] = identity ? Json(to_hex(identity->policy_digest)) : Json(nullptr);
  j["not_before"] = pki::format_utc(cert.not_before());
  j["not_after"] = pki::format_utc(cert.not_after());
  j["fingerprint_sha256"] = fingerprint_hex(cert);
  j["is_ca"] = is_ca;
  j["subject"] = cert.subject();
  if (!valid) j["identity_error"] = why;

  if (cli.flag("--json")) {
    // error_handler::replace: a hostile subject with invalid UTF-8 must not abort the dump.
    std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
  } else {
    const auto text = [&](const char* key) {
      return j[key].is_null() ? std::string("-") : j[key].get<std::string>();
    };
    std::cout << "subject: " << j["subject"].get<std::string>() << '\n'
              << "job: " << text("job") << '\n'
              << "rank: "
              << (is_ca      ? std::string("CA")
                  : identity ? std::to_string(identity->rank)
                             : std::string("-"))
              << '\n'
              << "policy digest: " << text("policy_digest") << '\n'
              << "not before: " << text("not_before") << '\n'
              << "not after: " << text("not_after") << '\n'
              << "fingerprint sha256: " << text("fingerprint_sha256") << '\n'
              << "is ca: " << (is_ca ? "yes" : "no") << '\n';
    if (!valid) std::cout << "identity error: " << why << '\n';
  }
  std::cout.flush();
  if (!valid)
    std::fprintf(stderr, "sempi pki: %s: no valid sempi identity: %s\n", path.c_str(), why.c_str());
  return valid ? kExitOk : kExitFinding;
}

}  // namespace

int run_pki(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kPkiUsage, stderr);
    return kExitUsage;
  }
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kPkiUsage, stdout);
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "ca") return run_ca(rest);
  if (sub == "issue") return run_issue(rest);
  if (sub == "inspect") return run_inspect(rest);
  std::fprintf(stderr, "sempi pki: error: unknown subcommand '%s'\n\n%s", sub.c_str(), kPkiUsage);
  return kExitUsage;
}

}  // namespace sempi::tool
