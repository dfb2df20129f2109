// A rank that speaks the bootstrap protocol directly (no sempi runtime), for launcher tests.
//
//   enroll_probe [--mode MODE] [--only-rank R]
//
// MODE (applied to every rank, or only to rank R with --only-rank; the others behave):
//   ok                   enroll, check the welcome, finalize, wait for finalize_ok, exit 0
//   no-finalize          enroll, check the welcome, exit 0 without finalizing
//   garbage-csr          enroll with a CSR that is not one; expect an "error" reply
//   duplicate-enroll     enroll twice; expect an "error" reply
//   abort                enroll, check the welcome, send abort (code 7), wait to be torn down
//   exit-before-enroll   exit 0 at once, without enrolling
//   unknown-message      send a message of an unknown type; expect an "error" reply
//   early-audit-head     enroll, send an audit_head before finalize; expect an "error" reply
//   early-peer-lost      report a lost peer before enrolling; expect an "error" reply
//   stall                enroll, then never read the bootstrap channel again (until killed)
//   stall-first          rank 0 as stall, every other rank as abort
//   late-head            finalize, wait for finalize_ok; then rank 0 waits for the launcher's
//                        abort notice and only then reports its audit head, while every other
//                        rank exits 1 (a failure after finalize, which starts the teardown)
//
// Prints "rank R ok policy_digest=HEX" on success. Exit codes: 0 success, 3 refused by the
// launcher as expected, 4 the launcher aborted the job, 10 a check failed (stderr says which).

#include <openssl/evp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/hex.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "pki/certificate.hpp"
#include "pki/csr.hpp"
#include "pki/identity.hpp"
#include "pki/key.hpp"
#include "pki/ossl.hpp"

namespace {

using sempi::launch::BootstrapReader;
using Clock = std::chrono::steady_clock;

constexpr int kExitRefused = 3;
constexpr int kExitAborted = 4;
constexpr int kExitCheckFailed = 10;
// Generous: the launcher may be starting many ranks on a loaded machine.
constexpr std::chrono::seconds kReadTimeout{60};

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "enroll_probe rank %d: %s\n", g_rank, what.c_str());
  std::exit(kExitCheckFailed);
}

void check(bool ok, const std::string& what) {
  if (!ok) fail("check failed: " + what);
}

long env_number(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) fail(std::string(name) + " is not set");
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (end == value || *end != '\0') fail(std::string(name) + " is not a number");
  return n;
}

void send(int fd, const nlohmann::json& message) {
  if (auto ec = sempi::launch::write_bootstrap_message(fd, message, Clock::now() + kReadTimeout)) {
    fail("cannot send " + message.value("type", std::string("?")) + ": " + ec.message());
  }
}

// Reads the next message; an abort or error from the launcher ends the probe with its code.
nlohmann::json receive(int fd, BootstrapReader& reader, bool error_expected) {
  nlohmann::json message;
  if (auto ec =
          sempi::launch::read_bootstrap_message(fd, reader, message, Clock::now() + kReadTimeout)) {
    fail("cannot read from the launcher: " + ec.message());
  }
  const std::string type = message["type"];
  if (type == "abort") {
    std::fprintf(stderr, "enroll_probe rank %d: job aborted: %s\n", g_rank,
                 message.value("reason", std::string()).c_str());
    std::exit(kExitAborted);
  }
  if (type == "error") {
    std::fprintf(stderr, "enroll_probe rank %d: refused: %s\n", g_rank,
                 message.value("reason", std::string()).c_str());
    std::exit(error_expected ? kExitRefused : kExitCheckFailed);
  }
  return message;
}

std::string sha256_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    fail("SHA-256 failed");
  }
  return sempi::to_hex({digest, len});
}

// The issued certificate chains to the CA from the welcome, and names this rank and job.
void check_welcome(const nlohmann::json& welcome, const sempi::pki::PrivateKey& key, long rank,
                   long size, const std::string& job, const std::string& endpoint) {
  using namespace sempi::pki;
  check(welcome["type"] == "welcome", "first reply is a welcome");
  check(welcome["rank"] == rank, "welcome rank");
  check(welcome["size"] == size, "welcome size");
  check(welcome["job"] == job, "welcome job matches SEMPI_JOB_ID");

  const auto leaf = Certificate::from_pem(welcome["certificate"].get<std::string>());
  const auto ca = Certificate::from_pem(welcome["ca"].get<std::string>());
  X509StorePtr store{X509_STORE_new()};
  X509StoreCtxPtr ctx{X509_STORE_CTX_new()};
  check(store && ctx && X509_STORE_add_cert(store.get(), ca.get()) == 1 &&
            X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr) == 1,
        "set up chain verification");
  check(X509_verify_cert(ctx.get()) == 1,
        std::string("certificate chains to the job CA: ") +
            X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
  check(X509_check_private_key(leaf.get(), key.get()) == 1, "certificate is for our key");

  std::string why;
  const auto identity = parse_identity(leaf.get(), why);
  check(identity.has_value(), "identity: " + why);
  check(identity->rank == static_cast<std::uint32_t>(rank), "certificate names our rank");
  check(identity->job.hex() == job, "certificate names our job");
  const auto ca_job = parse_ca_job(ca.get(), why);
  check(ca_job && ca_job->hex() == job, "CA names our job");

  const std::string policy = welcome["policy"];
  const std::string digest = welcome["policy_digest"];
  check(sha256_hex(policy) == digest, "policy_digest is the SHA-256 of the policy text");
  check(sempi::to_hex(identity->policy_digest) == digest, "certificate binds the policy digest");

  const auto& endpoints = welcome["endpoints"];
  check(endpoints.is_array() && endpoints.size() == static_cast<std::size_t>(size),
        "endpoints table has one entry per rank");
  check(endpoints[static_cast<std::size_t>(rank)] == endpoint, "our endpoint is in the table");
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "ok";
  std::optional<long> only_rank;
  std::string marker;  // lost-then-abort: the file rank 0 creates once it asked for the abort
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--mode" && i + 1 < argc) {
      mode = argv[++i];
    } else if (arg == "--marker" && i + 1 < argc) {
      marker = argv[++i];
    } else if (arg == "--only-rank" && i + 1 < argc) {
      only_rank = std::strtol(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "enroll_probe: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }

  const long rank = env_number("SEMPI_RANK");
  g_rank = static_cast<int>(rank);
  const long size = env_number("SEMPI_SIZE");
  const int fd = static_cast<int>(env_number("SEMPI_BOOTSTRAP_FD"));
  const char* job_env = std::getenv("SEMPI_JOB_ID");
  if (job_env == nullptr) fail("SEMPI_JOB_ID is not set");
  const std::string job = job_env;
  if (only_rank && *only_rank != rank) mode = "ok";

  if (mode == "exit-before-enroll") return 0;
  if (mode == "early-peer-lost") {
    BootstrapReader reader;
    send(fd, {{"type", "peer_lost"}, {"peer", (rank + 1) % size}, {"reason", "probe"}});
    for (;;) receive(fd, reader, true);
  }
  if (mode == "unknown-message") {
    BootstrapReader reader;
    send(fd, {{"type", "hello"}});
    for (;;) receive(fd, reader, true);
  }

  try {
    const auto key = sempi::pki::PrivateKey::generate();
    const std::string csr = mode == "garbage-csr"
                                ? std::string(
                                      "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n"
                                      "-----END CERTIFICATE REQUEST-----\n")
                                : sempi::pki::Csr::create(key).to_pem();
    const std::string endpoint = "127.0.0.1:" + std::to_string(rank + 1000);
    const nlohmann::json enroll = {{"type", "enroll"},
                                   {"csr", csr},
                                   {"endpoint", endpoint},
                                   {"pid", static_cast<std::uint64_t>(::getpid())}};
    BootstrapReader reader;
    send(fd, enroll);
    if (mode == "stall" || (mode == "stall-first" && rank == 0)) {
      for (;;) ::pause();
    }
    if (mode == "stall-first") mode = "abort";
    if (mode == "duplicate-enroll") {
      send(fd, enroll);
      // With one rank the first enroll completes the job (welcome), then comes the refusal.
      for (;;) receive(fd, reader, true);
    }
    const auto welcome = receive(fd, reader, mode == "garbage-csr");
    if (mode == "garbage-csr") fail("a garbage CSR was accepted");
    check_welcome(welcome, key, rank, size, job, endpoint);

    if (mode == "no-finalize") return 0;
    if (mode == "blame-next") {
      // As a rank whose connection to the next rank broke: it reports that peer lost, then
      // fails (status 5 + rank). With every rank doing so, each blames another.
      send(fd, {{"type", "peer_lost"}, {"peer", (rank + 1) % size}, {"reason", "probe"}});
      return 5 + static_cast<int>(rank);
    }
    if (mode == "lost-then-abort") {
      // Rank 0 loses rank 1 and aborts, as MPI's default error handler does on a failed
      // receive; rank 1, the cause, exits with status 9 only after that abort was asked for.
      if (rank == 0) {
        send(fd, {{"type", "peer_lost"}, {"peer", 1}, {"reason", "probe"}});
        send(fd, {{"type", "abort"}, {"code", 43}, {"reason", "receive failed"}});
        std::FILE* f = std::fopen(marker.c_str(), "w");
        check(f != nullptr && std::fclose(f) == 0, "the marker file can be created");
        for (;;) receive(fd, reader, false);  // until the launcher's abort notice
      }
      const auto give_up = Clock::now() + kReadTimeout;
      while (::access(marker.c_str(), F_OK) != 0 && Clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polled, bounded
      }
      return 9;
    }
    if (mode == "early-audit-head") {
      // A chain head is reported only after finalize: before it, the launcher refuses it.
      send(fd, {{"type", "audit_head"}, {"audit_head", {{"seq", -1}, {"hash", std::string(64, '0')}}}});
      for (;;) receive(fd, reader, true);
    }
    if (mode == "abort") {
      send(fd, {{"type", "abort"}, {"code", 7}, {"reason", "probe requested abort"}});
      for (;;) receive(fd, reader, false);  // until the launcher's abort notice
    }
    send(fd, {{"type", "finalize"}});
    const auto ok = receive(fd, reader, false);
    check(ok["type"] == "finalize_ok", "finalize_ok after finalize");
    if (mode == "late-head") {
      if (rank != 0) return 1;
      nlohmann::json notice;
      if (auto ec = sempi::launch::read_bootstrap_message(fd, reader, notice,
                                                          Clock::now() + kReadTimeout)) {
        fail("no abort notice: " + ec.message());
      }
      check(notice["type"] == "abort", "the teardown's abort notice");
      send(fd, {{"type", "audit_head"}, {"audit_head", {{"seq", -1}, {"hash", std::string(64, 'a')}}}});
      return 0;
    }
    std::printf("rank %ld ok policy_digest=%s\n", rank,
                welcome["policy_digest"].get<std::string>().c_str());
    return 0;
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
}
