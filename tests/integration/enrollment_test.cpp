// Enrollment bookkeeping with real keys and CSRs: what a rank gets, and what it is refused.

#include "launch/enrollment.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/hex.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "pki/csr.hpp"
#include "pki/identity.hpp"
#include "pki/job_ca.hpp"
#include "pki/job_id.hpp"
#include "pki/key.hpp"

namespace sempi::launch {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::seconds kValidity = 2h;

Enrollment make_enrollment(std::uint32_t size) {
  return Enrollment(pki::JobCa::create(pki::JobId::random(), kValidity),
                    policy::PolicyDocument::default_policy(), size, kValidity);
}

nlohmann::json enroll_message(const pki::PrivateKey& key, const std::string& endpoint) {
  return {{"type", "enroll"},
          {"csr", pki::Csr::create(key).to_pem()},
          {"endpoint", endpoint},
          {"pid", 1234}};
}

std::string endpoint_of(std::uint32_t rank) { return "127.0.0.1:" + std::to_string(1000 + rank); }

// Enrolls `rank` with a fresh key; returns the refusal, if any.
std::optional<std::string> enroll(Enrollment& e, std::uint32_t rank) {
  return e.enroll(rank, enroll_message(pki::PrivateKey::generate(), endpoint_of(rank)));
}

void expect_refusal(const std::optional<std::string>& refusal, const std::string& needle) {
  ASSERT_TRUE(refusal.has_value()) << "expected a refusal containing: " << needle;
  EXPECT_NE(refusal->find(needle), std::string::npos) << *refusal;
}

TEST(Enrollment, IssuesCertificateNamingRankJobAndPolicy) {
  auto e = make_enrollment(3);
  const auto key = pki::PrivateKey::generate();
  ASSERT_EQ(e.enroll(2, enroll_message(key, endpoint_of(2))), std::nullopt);
  EXPECT_TRUE(e.is_enrolled(2));
  EXPECT_FALSE(e.is_enrolled(0));
  EXPECT_TRUE(e.any_enrolled());
  EXPECT_FALSE(e.all_enrolled());

  const auto& cert = e.certificate(2);
  ASSERT_TRUE(cert.has_value());
  std::string why;
  const auto identity = pki::parse_identity(cert->get(), why);
  ASSERT_TRUE(identity) << why;
  EXPECT_EQ(identity->rank, 2u);
  EXPECT_EQ(identity->job, e.ca().job());
  EXPECT_EQ(identity->policy_digest, e.policy().digest);
  EXPECT_TRUE(pki::has_rank_key_usage(cert->get()));
  EXPECT_EQ(X509_check_private_key(cert->get(), key.get()), 1) << "issued for the CSR's key";

  // Validity follows the job's, not a default.
  const auto lifetime = cert->not_after() - std::chrono::system_clock::now();
  EXPECT_GT(lifetime, kValidity - 5min);
  EXPECT_LT(lifetime, kValidity + 5min);
}

TEST(Enrollment, WelcomeOnceEveryRankEnrolled) {
  auto e = make_enrollment(3);
  for (std::uint32_t r : {2u, 0u, 1u}) ASSERT_EQ(enroll(e, r), std::nullopt);
  ASSERT_TRUE(e.all_enrolled());

  for (std::uint32_t r = 0; r < 3; ++r) {
    const auto w = e.welcome(r);
    EXPECT_EQ(w["type"], "welcome");
    EXPECT_EQ(w["rank"], r);
    EXPECT_EQ(w["size"], 3);
    EXPECT_EQ(w["job"], e.ca().job().hex());
    EXPECT_EQ(w["certificate"], e.certificate(r)->to_pem());
    EXPECT_EQ(w["ca"], e.ca().certificate().to_pem());
    EXPECT_EQ(w["policy"], e.policy().canonical);
    EXPECT_EQ(w["policy_digest"], to_hex(e.policy().digest));
    ASSERT_EQ(w["endpoints"].size(), 3u);
    for (std::uint32_t p = 0; p < 3; ++p) EXPECT_EQ(w["endpoints"][p], endpoint_of(p));
  }
}

TEST(Enrollment, WelcomeBeforeEveryoneEnrolledIsALogicError) {
  auto e = make_enrollment(2);
  ASSERT_EQ(enroll(e, 0), std::nullopt);
  EXPECT_THROW((void)e.welcome(0), Error);
}

TEST(Enrollment, DuplicateEnrollmentRefused) {
  auto e = make_enrollment(2);
  ASSERT_EQ(enroll(e, 0), std::nullopt);
  const auto first = e.certificate(0)->fingerprint_sha256();
  expect_refusal(e.enroll(0, enroll_message(pki::PrivateKey::generate(), "127.0.0.1:5000")),
                 "already enrolled");
  EXPECT_EQ(e.certificate(0)->fingerprint_sha256(), first) << "the first certificate stands";
  EXPECT_FALSE(e.all_enrolled());
}

TEST(Enrollment, BadCsrRefused) {
  auto e = make_enrollment(1);
  auto garbage = enroll_message(pki::PrivateKey::generate(), endpoint_of(0));
  garbage["csr"] = "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
  expect_refusal(e.enroll(0, garbage), "bad CSR");

  // A well-formed CSR whose signature does not match: flip a byte inside the signature.
  auto tampered = enroll_message(pki::PrivateKey::generate(), endpoint_of(0));
  auto pem = tampered["csr"].get<std::string>();
  const auto end = pem.find("-----END");
  const auto pos = end - 8;  // inside the last base64 line, i.e. the signature
  pem[pos] = pem[pos] == 'A' ? 'B' : 'A';
  tampered["csr"] = pem;
  expect_refusal(e.enroll(0, tampered), "bad CSR");

  auto not_pem = enroll_message(pki::PrivateKey::generate(), endpoint_of(0));
  not_pem["csr"] = "hello";
  expect_refusal(e.enroll(0, not_pem), "bad CSR");

  EXPECT_FALSE(e.any_enrolled());
  EXPECT_EQ(enroll(e, 0), std::nullopt) << "a refused attempt records nothing";
}

TEST(Enrollment, MalformedMessagesRefused) {
  auto e = make_enrollment(2);
  const auto key = pki::PrivateKey::generate();
  auto m = enroll_message(key, endpoint_of(0));
  m.erase("csr");
  expect_refusal(e.enroll(0, m), "csr");
  m = enroll_message(key, endpoint_of(0));
  m["csr"] = 42;
  expect_refusal(e.enroll(0, m), "csr");
  m = enroll_message(key, endpoint_of(0));
  m.erase("endpoint");
  expect_refusal(e.enroll(0, m), "endpoint");
  m = enroll_message(key, endpoint_of(0));
  m["pid"] = "12";
  expect_refusal(e.enroll(0, m), "pid");
  m["pid"] = -1;
  expect_refusal(e.enroll(0, m), "pid");
  expect_refusal(e.enroll(0, nlohmann::json::array()), "not a JSON object");
  m = enroll_message(key, endpoint_of(0));
  m.erase("pid");
  EXPECT_EQ(e.enroll(0, m), std::nullopt) << "pid is optional";
  expect_refusal(e.enroll(5, enroll_message(key, endpoint_of(5))), "not part of this job");
}

TEST(Enrollment, BadEndpointsRefused) {
  auto e = make_enrollment(2);
  const auto key = pki::PrivateKey::generate();
  expect_refusal(e.enroll(0, enroll_message(key, "nonsense")), "invalid endpoint");
  expect_refusal(e.enroll(0, enroll_message(key, "127.0.0.1:99999")), "invalid endpoint");
  expect_refusal(e.enroll(0, enroll_message(key, "127.0.0.1:0")), "port 0");
  expect_refusal(e.enroll(0, enroll_message(key, "0.0.0.0:1000")), "not an address");
  expect_refusal(e.enroll(0, enroll_message(key, std::string(500, '1'))), "too long");
  ASSERT_EQ(e.enroll(0, enroll_message(key, "127.0.0.1:1000")), std::nullopt);
  expect_refusal(e.enroll(1, enroll_message(pki::PrivateKey::generate(), "127.0.0.1:1000")),
                 "already used by rank 0");
}

// Unix sockets for peers on one host (transport/listener.hpp): passed on per rank, null where
// a rank offered none; only sockets in the job's own directory, named as ranks name theirs.
constexpr const char* kSocketDir = "/tmp/sempi-AbC123";

Enrollment make_enrollment_with_sockets(std::uint32_t size) {
  return Enrollment(pki::JobCa::create(pki::JobId::random(), kValidity),
                    policy::PolicyDocument::default_policy(), size, kValidity, kSocketDir);
}

nlohmann::json with_local(std::uint32_t rank, nlohmann::json local) {
  auto message = enroll_message(pki::PrivateKey::generate(), endpoint_of(rank));
  message["local"] = std::move(local);
  return message;
}

nlohmann::json socket_of(const std::string& file) {
  return {{"host", "boot/net:[1]"}, {"path", std::string(kSocketDir) + "/" + file}};
}

TEST(Enrollment, LocalEndpointsArePassedOnPerRank) {
  auto e = make_enrollment_with_sockets(3);
  ASSERT_EQ(e.enroll(0, with_local(0, socket_of("rank-100.sock"))), std::nullopt);
  ASSERT_EQ(enroll(e, 1), std::nullopt);
  ASSERT_EQ(e.enroll(2, with_local(2, socket_of("rank-102.sock"))), std::nullopt);
  const auto table = e.welcome(1)["local_endpoints"];
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0], socket_of("rank-100.sock"));
  EXPECT_TRUE(table[1].is_null());
  EXPECT_EQ(table[2], socket_of("rank-102.sock"));
}

TEST(Enrollment, BadLocalEndpointsRefused) {
  auto e = make_enrollment_with_sockets(2);
  const std::string dir = kSocketDir;
  const auto bad = [&](nlohmann::json local, const std::string& needle) {
    expect_refusal(e.enroll(0, with_local(0, std::move(local))), needle);
  };
  bad("/tmp/x", "not {\"host\"");
  bad({{"host", "h"}}, "not {\"host\"");
  bad({{"host", 7}, {"path", dir + "/rank-1.sock"}}, "not {\"host\"");
  bad({{"host", ""}, {"path", dir + "/rank-1.sock"}}, "host identity is empty");
  // Control characters would grow six-fold when every rank's welcome escapes them.
  bad({{"host", std::string(40, '\x01')}, {"path", dir + "/rank-1.sock"}},
      "other than printable ASCII");
  bad({{"host", "boot id"}, {"path", dir + "/rank-1.sock"}}, "other than printable ASCII");
  // Anything but the job's directory and a rank's socket name: peers would dial it.
  for (const std::string& path :
       {std::string("/run/user/0/ssh-agent.sock"), dir + "/../x/rank-1.sock",
        dir + "//rank-1.sock", dir + "/rank-.sock", dir + "/rank-1x.sock", dir + "/rank-1.sock\n",
        dir + "/rank-12345678901.sock", std::string("relative/rank-1.sock")}) {
    bad({{"host", "h"}, {"path", path}}, "is not /tmp/sempi-AbC123/rank-N.sock");
  }
  ASSERT_EQ(e.enroll(0, with_local(0, socket_of("rank-7.sock"))), std::nullopt);
  // A second rank claiming the same socket is confused or hostile.
  expect_refusal(e.enroll(1, with_local(1, socket_of("rank-7.sock"))),
                 "local endpoint /tmp/sempi-AbC123/rank-7.sock is already used by rank 0");
}

// The rank's side: it dials only the sockets of ranks on its own host.
TEST(Enrollment, RankReadsTheSocketsOfItsOwnHostFromTheWelcome) {
  auto e = make_enrollment_with_sockets(3);
  nlohmann::json other_host = socket_of("rank-102.sock");
  other_host["host"] = "other-boot/net:[1]";
  ASSERT_EQ(e.enroll(0, with_local(0, socket_of("rank-100.sock"))), std::nullopt);
  ASSERT_EQ(enroll(e, 1), std::nullopt);
  ASSERT_EQ(e.enroll(2, with_local(2, other_host)), std::nullopt);
  const auto welcome = e.welcome(1);
  const std::string dir = kSocketDir;
  EXPECT_EQ(welcome_local_paths(welcome, 3, "boot/net:[1]"),
            (std::vector<std::string>{dir + "/rank-100.sock", "", ""}));
  EXPECT_EQ(welcome_local_paths(welcome, 3, "other-boot/net:[1]"),
            (std::vector<std::string>{"", "", dir + "/rank-102.sock"}));
  // A rank that could not tell its host identity dials nobody locally.
  EXPECT_EQ(welcome_local_paths(welcome, 3, ""), std::vector<std::string>(3));
  // A job without a socket directory: every entry is null.
  auto plain = make_enrollment(1);
  ASSERT_EQ(enroll(plain, 0), std::nullopt);
  EXPECT_EQ(welcome_local_paths(plain.welcome(0), 1, "boot/net:[1]"), std::vector<std::string>(1));
  // No table at all (an older launcher): no local sockets.
  EXPECT_EQ(welcome_local_paths({{"type", "welcome"}}, 2, "h"), std::vector<std::string>(2));
}

TEST(Enrollment, RankRefusesAMalformedLocalEndpointTable) {
  const nlohmann::json good = {{"host", "h"}, {"path", "/tmp/d/rank-1.sock"}};
  for (const nlohmann::json& table :
       {nlohmann::json("x"), nlohmann::json::array({good}),  // wrong type; too short for 2 ranks
        nlohmann::json::array({good, good, good}),             // too long
        nlohmann::json::array({good, 5}),                      // an entry neither null nor object
        nlohmann::json::array({good, {{"host", "h"}}}),        // no path
        nlohmann::json::array({good, {{"path", "/tmp/d/rank-1.sock"}}}),   // no host
        nlohmann::json::array({good, {{"host", 1}, {"path", "/tmp/d/rank-1.sock"}}}),
        nlohmann::json::array({good, {{"host", "h"}, {"path", nullptr}}}),
        nlohmann::json::array({good, {{"host", "h"}, {"path", ""}}}),
        nlohmann::json::array({good, {{"host", "h"}, {"path", "rank-1.sock"}}})}) {
    const nlohmann::json welcome = {{"type", "welcome"}, {"local_endpoints", table}};
    try {
      (void)welcome_local_paths(welcome, 2, "h");
      ADD_FAILURE() << "accepted " << table.dump();
    } catch (const Error& error) {
      EXPECT_EQ(error.error_class(), ErrorClass::io) << table.dump();
      EXPECT_NE(std::string(error.what()).find("malformed 'local_endpoints'"), std::string::npos)
          << error.what();
    }
  }
  const nlohmann::json welcome = {{"type", "welcome"},
                                  {"local_endpoints", nlohmann::json::array({good, nullptr})}};
  EXPECT_EQ(welcome_local_paths(welcome, 2, "h"),
            (std::vector<std::string>{"/tmp/d/rank-1.sock", ""}));
  EXPECT_THROW((void)welcome_local_paths(welcome, -1, "h"), Error);
}

TEST(Enrollment, LocalEndpointRefusedWhenTheJobHasNoSocketDirectory) {
  auto e = make_enrollment(1);
  expect_refusal(e.enroll(0, with_local(0, socket_of("rank-1.sock"))), "this job has none");
}

TEST(Enrollment, FinalizeFence) {
  auto e = make_enrollment(2);
  ASSERT_EQ(enroll(e, 0), std::nullopt);
  expect_refusal(e.finalize(0), "before the job started");
  ASSERT_EQ(enroll(e, 1), std::nullopt);
  EXPECT_EQ(e.finalize(1), std::nullopt);
  EXPECT_TRUE(e.is_finalized(1));
  EXPECT_FALSE(e.all_finalized());
  expect_refusal(e.finalize(1), "twice");
  EXPECT_EQ(e.finalize(0), std::nullopt);
  EXPECT_TRUE(e.all_finalized());
  expect_refusal(e.finalize(2), "not part of this job");
}

}  // namespace
}  // namespace sempi::launch
