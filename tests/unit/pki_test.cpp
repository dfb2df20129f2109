// Tests of the job PKI against real OpenSSL: no mocks. Bad certificates are built here with
// OpenSSL directly, so each negative case states exactly what is wrong with it.

#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/hex.hpp"
#include "pki/certificate.hpp"
#include "pki/csr.hpp"
#include "pki/identity.hpp"
#include "pki/job_ca.hpp"
#include "pki/job_id.hpp"
#include "pki/key.hpp"
#include "pki/ossl.hpp"
#include "pki/pem_files.hpp"
#include "pki/secure_heap.hpp"

namespace sempi::pki {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;

// --- helpers -------------------------------------------------------------------------------

JobId test_job(std::uint8_t fill = 0xab) {
  std::array<std::uint8_t, JobId::kBytes> bytes{};
  bytes.fill(fill);
  return JobId(bytes);
}

PolicyDigest test_digest(std::uint8_t fill = 0x5c) {
  PolicyDigest d{};
  d.fill(fill);
  return d;
}

// Runs the RFC 5280 path validation OpenSSL does in a TLS handshake, with only `ca` trusted.
int verify_chain(const Certificate& ca, const Certificate& leaf,
                 int purpose = X509_PURPOSE_SSL_CLIENT) {
  X509StorePtr store{X509_STORE_new()};
  EXPECT_TRUE(store);
  EXPECT_EQ(X509_STORE_add_cert(store.get(), ca.get()), 1);
  X509StoreCtxPtr ctx{X509_STORE_CTX_new()};
  EXPECT_TRUE(ctx);
  EXPECT_EQ(X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr), 1);
  X509_STORE_CTX_set_flags(ctx.get(), X509_V_FLAG_X509_STRICT);
  EXPECT_EQ(X509_STORE_CTX_set_purpose(ctx.get(), purpose), 1);
  const int ok = X509_verify_cert(ctx.get());
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  return ok == 1 ? X509_V_OK : (err == X509_V_OK ? X509_V_ERR_UNSPECIFIED : err);
}

Certificate issue_rank(const JobCa& ca, std::uint32_t rank, KeyType type = KeyType::ecdsa_p256) {
  const PrivateKey key = PrivateKey::generate(type);
  IssueOptions options;
  options.rank = rank;
  options.policy_digest = test_digest();
  return ca.issue(Csr::create(key), options);
}

std::vector<std::string> san_uris(X509* cert) {
  std::vector<std::string> out;
  GeneralNamesPtr names{
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))};
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names.get(), i);
    if (gn->type != GEN_URI) continue;
    const ASN1_IA5STRING* s = gn->d.uniformResourceIdentifier;
    out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<std::size_t>(ASN1_STRING_length(s)));
  }
  return out;
}

bool extension_critical(X509* cert, int nid) {
  const int idx = X509_get_ext_by_NID(cert, nid, -1);
  EXPECT_GE(idx, 0) << OBJ_nid2sn(nid);
  return idx >= 0 && X509_EXTENSION_get_critical(X509_get_ext(cert, idx)) == 1;
}

std::string serial_hex(X509* cert) {
  BignumPtr bn{ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)};
  char* hex = BN_bn2hex(bn.get());
  std::string out = hex;
  OPENSSL_free(hex);
  return out;
}

// One SAN entry for hand-built certificates.
struct San {
  int type = GEN_URI;
  std::string value;
};

void add_san(X509* cert, const std::vector<San>& sans) {
  GeneralNamesPtr names{GENERAL_NAMES_new()};
  ASSERT_TRUE(names);
  for (const San& san : sans) {
    ossl_ptr<GENERAL_NAME, GENERAL_NAME_free> gn{GENERAL_NAME_new()};
    ossl_ptr<ASN1_IA5STRING, ASN1_IA5STRING_free> str{ASN1_IA5STRING_new()};
    ASSERT_TRUE(gn && str);
    ASSERT_EQ(ASN1_STRING_set(str.get(), san.value.data(), static_cast<int>(san.value.size())), 1);
    GENERAL_NAME_set0_value(gn.get(), san.type, str.release());
    ASSERT_GT(sk_GENERAL_NAME_push(names.get(), gn.get()), 0);
    gn.release();  // now owned by the stack
  }
  ASSERT_EQ(X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_APPEND), 1);
}

// A self-signed v3 certificate with the given SAN entries (no SAN extension if `with_san` is
// false) and a valid ECDSA signature; identity parsing must judge it by its names alone.
X509Ptr make_cert(const std::vector<San>& sans, bool with_san = true) {
  const PrivateKey key = PrivateKey::generate();
  X509Ptr cert{X509_new()};
  EXPECT_TRUE(cert);
  X509_set_version(cert.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 42);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("hand-built"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key.get());
  if (with_san) add_san(cert.get(), sans);
  EXPECT_GT(X509_sign(cert.get(), key.get(), EVP_sha256()), 0);
  return cert;
}

const std::string kJob = std::string(32, 'a');
const std::string kJob2 = std::string(32, 'b');
const std::string kPolicy = "/policy/" + std::string(64, 'c');

std::string rank_u(const std::string& job, const std::string& rank) {
  return "sempi://job/" + job + "/rank/" + rank;
}
std::string policy_u(const std::string& job) { return "sempi://job/" + job + kPolicy; }

// Parses the identity of a hand-built certificate; returns `why` ("" on success).
std::string identity_error(const std::vector<San>& sans, bool with_san = true) {
  X509Ptr cert = make_cert(sans, with_san);
  std::string why;
  const auto id = parse_identity(cert.get(), why);
  if (id) return "";
  EXPECT_FALSE(why.empty());
  return why;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sempi-pki-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

unsigned file_mode(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return static_cast<unsigned>(st.st_mode) & 07777u;
}

template <class F>
ErrorClass error_class_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.error_class();
  }
  return ErrorClass::success;
}

// --- JobId ---------------------------------------------------------------------------------

TEST(JobId, RandomIsNonZeroAndUnique) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) {
    const JobId id = JobId::random();
    EXPECT_FALSE(id.is_zero());
    EXPECT_TRUE(seen.insert(id.hex()).second);
  }
  EXPECT_TRUE(JobId().is_zero());
}

TEST(JobId, ParseAndHexRoundTrip) {
  const std::string hex = "00112233445566778899aabbccddeeff";
  const auto id = JobId::parse(hex);
  ASSERT_TRUE(id);
  EXPECT_EQ(id->hex(), hex);
  EXPECT_EQ(id->bytes()[0], 0x00);
  EXPECT_EQ(id->bytes()[15], 0xff);
  // Upper case is accepted on input; output is always lower case.
  EXPECT_EQ(JobId::parse("00112233445566778899AABBCCDDEEFF")->hex(), hex);
  EXPECT_EQ(JobId::parse(JobId::random().hex())->hex().size(), 32u);
}

TEST(JobId, ParseRejectsMalformed) {
  EXPECT_FALSE(JobId::parse(""));
  EXPECT_FALSE(JobId::parse(std::string(31, 'a')));
  EXPECT_FALSE(JobId::parse(std::string(33, 'a')));
  EXPECT_FALSE(JobId::parse(std::string(31, 'a') + "g"));
  EXPECT_FALSE(JobId::parse(" " + std::string(31, 'a')));
  EXPECT_FALSE(JobId::parse("0x" + std::string(30, 'a')));
}

// --- keys ----------------------------------------------------------------------------------

TEST(PrivateKey, TypesAndPemRoundTrip) {
  for (const KeyType type : {KeyType::ecdsa_p256, KeyType::ed25519}) {
    const PrivateKey key = PrivateKey::generate(type);
    EXPECT_EQ(key.type(), type);
    const std::string pem = key.to_pem();
    EXPECT_NE(pem.find("-----BEGIN PRIVATE KEY-----"), std::string::npos);
    const PrivateKey back = PrivateKey::from_pem(pem);
    EXPECT_EQ(back.type(), type);
    EXPECT_EQ(EVP_PKEY_eq(key.get(), back.get()), 1);
    EXPECT_NE(key.public_pem().find("BEGIN PUBLIC KEY"), std::string::npos);
  }
  EXPECT_EQ(parse_key_type("ecdsa-p256"), KeyType::ecdsa_p256);
  EXPECT_EQ(parse_key_type("ed25519"), KeyType::ed25519);
  EXPECT_STREQ(key_type_name(KeyType::ed25519), "ed25519");
  EXPECT_EQ(error_class_of([] { (void)parse_key_type("rsa"); }), ErrorClass::config);
}

TEST(PrivateKey, FromPemRejectsGarbageAndForeignKeys) {
  EXPECT_EQ(error_class_of([] { (void)PrivateKey::from_pem("not a key"); }), ErrorClass::config);
  // An RSA key is valid PEM but not a key type sempi uses.
  EvpPkeyCtxPtr ctx{EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr)};
  ASSERT_EQ(EVP_PKEY_keygen_init(ctx.get()), 1);
  EVP_PKEY* raw = nullptr;
  ASSERT_EQ(EVP_PKEY_generate(ctx.get(), &raw), 1);
  EvpPkeyPtr rsa{raw};
  BioPtr bio{BIO_new(BIO_s_mem())};
  ASSERT_EQ(PEM_write_bio_PrivateKey(bio.get(), rsa.get(), nullptr, nullptr, 0, nullptr, nullptr),
            1);
  char* data = nullptr;
  const long len = BIO_ctrl(bio.get(), BIO_CTRL_INFO, 0, &data);
  const std::string pem(data, static_cast<std::size_t>(len));
  try {
    (void)PrivateKey::from_pem(pem);
    FAIL() << "RSA key accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("RSA"), std::string::npos) << e.what();
  }
}

// --- the secure heap -----------------------------------------------------------------------

// One mapping of this process, from /proc/self/smaps.
struct Mapping {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  std::string permissions;       // "rw-p", "---p", ...
  std::set<std::string> flags;   // VmFlags: "rd", "wr", "lo" (locked), "dd" (not dumped), ...
};

std::vector<Mapping> own_mappings() {
  std::vector<Mapping> mappings;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  while (std::getline(smaps, line)) {
    if (line.rfind("VmFlags:", 0) == 0) {
      if (mappings.empty()) continue;
      std::istringstream words(line.substr(8));
      for (std::string flag; words >> flag;) mappings.back().flags.insert(flag);
      continue;
    }
    // A mapping's first line: "start-end perms offset dev inode [path]", addresses in hex.
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash == std::string::npos || space == std::string::npos || dash > space) continue;
    if (!std::all_of(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(dash),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
      continue;  // a "Name: value" line
    }
    Mapping m;
    m.start = std::stoull(line.substr(0, dash), nullptr, 16);
    m.end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
    m.permissions = line.substr(space + 1, 4);
    mappings.push_back(std::move(m));
  }
  return mappings;
}

bool usable(SecureHeap state) {
  return state == SecureHeap::locked || state == SecureHeap::unprotected;
}

// Bytes in the secure heap (signed, so a rise shows as negative rather than as a huge number).
long long secure_bytes() { return static_cast<long long>(CRYPTO_secure_used()); }

TEST(SecureHeap, KeysAreGeneratedAndLoadedIntoIt) {
  const SecureHeap state = ensure_secure_heap();
  ASSERT_TRUE(usable(state)) << secure_heap_name(state);
  std::printf("secure heap: %s\n", secure_heap_name(state));  // "unprotected": not locked here
  for (const KeyType type : {KeyType::ecdsa_p256, KeyType::ed25519}) {
    // Measured by what the heap gets back when a key goes: the first key made in this thread
    // also puts its random generators there, and those stay.
    std::optional<PrivateKey> key = PrivateKey::generate(type);
    const long long with_key = secure_bytes();
    std::optional<PrivateKey> loaded = PrivateKey::from_pem(key->to_pem());
    const long long with_both = secure_bytes();
    loaded.reset();
    EXPECT_GE(with_both - secure_bytes(), 32)
        << key_type_name(type) << ": a key loaded from PEM was not in the heap";
    key.reset();
    EXPECT_GE(with_key - secure_bytes(), 32)
        << key_type_name(type) << ": a generated key was not in the heap";
  }
}

TEST(SecureHeap, IsFencedByGuardPagesAndLeftOutOfCoreDumps) {
  const SecureHeap state = ensure_secure_heap();
  ASSERT_TRUE(usable(state)) << secure_heap_name(state);
  EXPECT_EQ(ensure_secure_heap(), state);  // set up once
  void* block = OPENSSL_secure_malloc(32);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(CRYPTO_secure_allocated(block), 1);
  const auto address = reinterpret_cast<std::uintptr_t>(block);
  const std::vector<Mapping> mappings = own_mappings();
  OPENSSL_secure_free(block);

  const auto heap = std::find_if(mappings.begin(), mappings.end(), [&](const Mapping& m) {
    return m.start <= address && address < m.end;
  });
  ASSERT_NE(heap, mappings.end()) << "no mapping holds the secure block";
  EXPECT_EQ(heap->end - heap->start, kSecureHeapBytes);
  EXPECT_EQ(heap->permissions, "rw-p");
  EXPECT_TRUE(heap->flags.count("dd") == 1) << "the heap would be written into core dumps";
  if (state == SecureHeap::locked) {
    EXPECT_TRUE(heap->flags.count("lo") == 1) << "the heap could be swapped out";
  }
  // An inaccessible page on either side: a run off the end of a neighbouring buffer faults.
  ASSERT_NE(heap, mappings.begin());
  ASSERT_NE(std::next(heap), mappings.end());
  EXPECT_EQ(std::prev(heap)->end, heap->start);
  EXPECT_EQ(std::prev(heap)->permissions, "---p");
  EXPECT_EQ(std::next(heap)->start, heap->end);
  EXPECT_EQ(std::next(heap)->permissions, "---p");
}

TEST(Ossl, ErrorsCarryTheQueueText) {
  ERR_clear_error();
  BioPtr bio{BIO_new_mem_buf("garbage", -1)};
  X509Ptr cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)};
  EXPECT_FALSE(cert);
  const std::string text = drain_openssl_errors();
  EXPECT_NE(text.find("no start line"), std::string::npos) << text;
  EXPECT_EQ(drain_openssl_errors(), "");
  try {
    (void)Certificate::from_pem("garbage");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("no start line"), std::string::npos) << e.what();
  }
}

// --- job CA --------------------------------------------------------------------------------

TEST(JobCa, CaCertificateProperties) {
  const JobId job = JobId::random();
  const auto before = Clock::now();
  const JobCa ca = JobCa::create(job, 2h);
  const auto after = Clock::now();
  X509* x = ca.certificate().get();

  EXPECT_EQ(ca.job(), job);
  EXPECT_EQ(X509_get_version(x), X509_VERSION_3);
  EXPECT_EQ(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
  EXPECT_EQ(ca.key().type(), KeyType::ecdsa_p256);
  EXPECT_EQ(ca.certificate().subject(), "CN=sempi job CA " + job.hex());
  EXPECT_EQ(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)), 0);
  // Self-signed by its own key.
  EXPECT_EQ(X509_verify(x, ca.key().get()), 1);

  const std::uint32_t flags = X509_get_extension_flags(x);
  EXPECT_EQ(flags & EXFLAG_INVALID, 0u);
  EXPECT_NE(flags & EXFLAG_CA, 0u);
  EXPECT_EQ(X509_get_pathlen(x), 0);
  EXPECT_TRUE(extension_critical(x, NID_basic_constraints));
  EXPECT_EQ(X509_get_key_usage(x), static_cast<std::uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_TRUE(extension_critical(x, NID_key_usage));
  EXPECT_NE(X509_get0_subject_key_id(x), nullptr);
  EXPECT_FALSE(has_rank_key_usage(x));
  EXPECT_EQ(san_uris(x), std::vector<std::string>{"sempi://job/" + job.hex()});
  std::string why;
  EXPECT_EQ(parse_ca_job(x, why), job) << why;
  EXPECT_FALSE(parse_identity(x, why));

  // 128-bit positive serial with the top bit cleared: at most 127 significant bits.
  BignumPtr serial{ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr)};
  EXPECT_FALSE(BN_is_negative(serial.get()));
  EXPECT_FALSE(BN_is_zero(serial.get()));
  EXPECT_LE(BN_num_bits(serial.get()), 127);

  // Validity: now - skew .. now + validity + skew (whole seconds).
  EXPECT_GE(ca.certificate().not_before(), before - kClockSkew - 1s);
  EXPECT_LE(ca.certificate().not_before(), after - kClockSkew);
  EXPECT_GE(ca.certificate().not_after(), before + 2h + kClockSkew - 1s);
  EXPECT_LE(ca.certificate().not_after(), after + 2h + kClockSkew);
}

TEST(JobCa, SerialsAreRandomAndUnique) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  std::set<std::string> serials{serial_hex(ca.certificate().get())};
  int long_serials = 0;
  for (int i = 0; i < 32; ++i) {
    const Certificate leaf = issue_rank(ca, static_cast<std::uint32_t>(i));
    EXPECT_TRUE(serials.insert(serial_hex(leaf.get())).second);
    BignumPtr bn{ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf.get()), nullptr)};
    EXPECT_LE(BN_num_bits(bn.get()), 127);
    if (BN_num_bits(bn.get()) > 100) ++long_serials;
  }
  // Each serial has > 100 bits with probability 1 - 2^-27; all 32 falling short means no RNG.
  EXPECT_GE(long_serials, 30);
}

TEST(JobCa, RejectsBadCreateArguments) {
  EXPECT_EQ(error_class_of([] { (void)JobCa::create(JobId(), 1h); }), ErrorClass::arg);
  EXPECT_EQ(error_class_of([] { (void)JobCa::create(JobId::random(), 0s); }), ErrorClass::arg);
}

TEST(JobCa, IssuedLeafVerifiesAndCarriesTheIdentity) {
  const JobCa ca = JobCa::create(JobId::random(), 24h);
  const PrivateKey key = PrivateKey::generate();
  IssueOptions options;
  options.rank = 3;
  options.policy_digest = test_digest();
  const auto before = Clock::now();
  const Certificate leaf = ca.issue(Csr::create(key), options);
  X509* x = leaf.get();

  EXPECT_EQ(verify_chain(ca.certificate(), leaf, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  EXPECT_EQ(verify_chain(ca.certificate(), leaf, X509_PURPOSE_SSL_SERVER), X509_V_OK);
  EXPECT_EQ(X509_check_private_key(x, key.get()), 1);
  EXPECT_EQ(X509_get_version(x), X509_VERSION_3);
  EXPECT_EQ(leaf.subject(), "CN=sempi rank 3 job " + ca.job().hex());
  EXPECT_EQ(X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(ca.certificate().get())),
            0);

  const std::uint32_t flags = X509_get_extension_flags(x);
  EXPECT_EQ(flags & EXFLAG_CA, 0u);
  EXPECT_NE(flags & EXFLAG_BCONS, 0u);
  EXPECT_TRUE(extension_critical(x, NID_basic_constraints));
  EXPECT_EQ(X509_get_key_usage(x), static_cast<std::uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_TRUE(extension_critical(x, NID_key_usage));
  EXPECT_TRUE(has_rank_key_usage(x));
  EXPECT_NE(X509_get0_subject_key_id(x), nullptr);
  ASSERT_NE(X509_get0_authority_key_id(x), nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x),
                                  X509_get0_subject_key_id(ca.certificate().get())),
            0);

  EXPECT_EQ(san_uris(x),
            (std::vector<std::string>{rank_uri(ca.job(), 3), policy_uri(ca.job(), test_digest())}));
  EXPECT_EQ(rank_uri(ca.job(), 3), "sempi://job/" + ca.job().hex() + "/rank/3");
  std::string fives;
  for (int i = 0; i < 32; ++i) fives += "5c";
  EXPECT_EQ(policy_uri(ca.job(), test_digest()),
            "sempi://job/" + ca.job().hex() + "/policy/" + fives);

  // notBefore backdated by the skew; notAfter = now + 24h, capped at the CA's.
  EXPECT_GE(leaf.not_before(), before - kClockSkew - 1s);
  EXPECT_LE(leaf.not_before(), Clock::now() - kClockSkew);
  EXPECT_GE(leaf.not_after(), before + 24h - 1s);
  EXPECT_LE(leaf.not_after(), ca.certificate().not_after());
}

TEST(JobCa, Ed25519CaAndLeaf) {
  const JobCa ca = JobCa::create(JobId::random(), 1h, KeyType::ed25519);
  EXPECT_EQ(ca.key().type(), KeyType::ed25519);
  EXPECT_EQ(X509_get_signature_nid(ca.certificate().get()), NID_ED25519);
  for (const KeyType leaf_type : {KeyType::ed25519, KeyType::ecdsa_p256}) {
    const Certificate leaf = issue_rank(ca, 1, leaf_type);
    EXPECT_EQ(X509_get_signature_nid(leaf.get()), NID_ED25519);
    EXPECT_EQ(verify_chain(ca.certificate(), leaf), X509_V_OK);
    std::string why;
    const auto id = parse_identity(leaf.get(), why);
    ASSERT_TRUE(id) << why;
    EXPECT_EQ(id->rank, 1u);
  }
  // An ECDSA CA issuing for an Ed25519 key signs with ECDSA.
  const JobCa ec_ca = JobCa::create(JobId::random(), 1h);
  const Certificate leaf = issue_rank(ec_ca, 0, KeyType::ed25519);
  EXPECT_EQ(X509_get_signature_nid(leaf.get()), NID_ecdsa_with_SHA256);
  EXPECT_EQ(verify_chain(ec_ca.certificate(), leaf), X509_V_OK);
}

TEST(JobCa, LeafFromAnotherCaDoesNotVerify) {
  const JobCa a = JobCa::create(JobId::random(), 1h);
  const JobCa b = JobCa::create(JobId::random(), 1h);
  const Certificate leaf = issue_rank(a, 0);
  EXPECT_EQ(verify_chain(b.certificate(), leaf), X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}

TEST(JobCa, ExpiredAndNotYetValidWindows) {
  const JobCa ca = JobCa::create(JobId::random(), 24h);
  const auto now = Clock::now();
  IssueOptions expired;
  expired.not_before = now - 2h;
  expired.not_after = now - 1h;
  const Certificate old_leaf = ca.issue(Csr::create(PrivateKey::generate()), expired);
  EXPECT_EQ(verify_chain(ca.certificate(), old_leaf), X509_V_ERR_CERT_HAS_EXPIRED);

  IssueOptions future;
  future.not_before = now + 1h;
  future.not_after = now + 2h;
  const Certificate new_leaf = ca.issue(Csr::create(PrivateKey::generate()), future);
  EXPECT_EQ(verify_chain(ca.certificate(), new_leaf), X509_V_ERR_CERT_NOT_YET_VALID);

  IssueOptions empty;
  empty.not_before = now;
  empty.not_after = now - 1s;
  EXPECT_EQ(error_class_of([&] { (void)ca.issue(Csr::create(PrivateKey::generate()), empty); }),
            ErrorClass::arg);
}

TEST(JobCa, LeafNeverOutlivesTheCaUnlessExplicit) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  IssueOptions options;
  options.validity = 48h;
  const Certificate capped = ca.issue(Csr::create(PrivateKey::generate()), options);
  EXPECT_EQ(capped.not_after(), ca.certificate().not_after());

  options.not_after = Clock::now() + 72h;
  const Certificate explicit_window = ca.issue(Csr::create(PrivateKey::generate()), options);
  EXPECT_GT(explicit_window.not_after(), ca.certificate().not_after());
}

TEST(JobCa, RankAboveMaximumRefused) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  IssueOptions options;
  options.rank = kMaxRank;
  const Certificate top = ca.issue(Csr::create(PrivateKey::generate()), options);
  std::string why;
  EXPECT_EQ(parse_identity(top.get(), why)->rank, kMaxRank) << why;
  options.rank = kMaxRank + 1;
  EXPECT_EQ(error_class_of([&] { (void)ca.issue(Csr::create(PrivateKey::generate()), options); }),
            ErrorClass::arg);
}

TEST(JobCa, JobOverrideNamesAnotherJob) {
  const JobCa ca = JobCa::create(test_job(0x11), 1h);
  IssueOptions options;
  options.rank = 2;
  options.job_override = test_job(0x22);
  const Certificate leaf = ca.issue(Csr::create(PrivateKey::generate()), options);
  // The chain is fine; only identity pinning can tell that it names the wrong job.
  EXPECT_EQ(verify_chain(ca.certificate(), leaf), X509_V_OK);
  std::string why;
  const auto id = parse_identity(leaf.get(), why);
  ASSERT_TRUE(id) << why;
  EXPECT_EQ(id->job, test_job(0x22));
  EXPECT_NE(id->job, ca.job());
}

// --- CSRs ----------------------------------------------------------------------------------

TEST(Csr, PemRoundTrip) {
  const PrivateKey key = PrivateKey::generate(KeyType::ed25519);
  const Csr csr = Csr::create(key);
  const Csr back = Csr::from_pem(csr.to_pem());
  EXPECT_EQ(EVP_PKEY_eq(X509_REQ_get0_pubkey(back.get()), key.get()), 1);
}

TEST(Csr, TamperedSignatureRefused) {
  const Csr csr = Csr::create(PrivateKey::generate());
  // Flip a bit in the signature value (the last byte of the DER encoding).
  unsigned char* der = nullptr;
  const int len = i2d_X509_REQ(csr.get(), &der);
  ASSERT_GT(len, 0);
  std::vector<unsigned char> bytes(der, der + len);
  OPENSSL_free(der);
  bytes.back() ^= 0x01;
  const unsigned char* p = bytes.data();
  X509ReqPtr bad{d2i_X509_REQ(nullptr, &p, static_cast<long>(bytes.size()))};
  ASSERT_TRUE(bad);
  BioPtr bio{BIO_new(BIO_s_mem())};
  ASSERT_EQ(PEM_write_bio_X509_REQ(bio.get(), bad.get()), 1);
  char* data = nullptr;
  const long pem_len = BIO_ctrl(bio.get(), BIO_CTRL_INFO, 0, &data);
  const std::string pem(data, static_cast<std::size_t>(pem_len));
  EXPECT_EQ(error_class_of([&] { (void)Csr::from_pem(pem); }), ErrorClass::security);
}

TEST(Csr, SubstitutedKeyRefusedByIssue) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  const Csr csr = Csr::create(PrivateKey::generate());
  // Swap in a key the requester does not hold: the signature no longer matches.
  const PrivateKey other = PrivateKey::generate();
  ASSERT_EQ(X509_REQ_set_pubkey(csr.get(), other.get()), 1);
  try {
    (void)ca.issue(csr, IssueOptions{});
    FAIL() << "issued for a CSR with a bad signature";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::security);
    EXPECT_NE(std::string(e.what()).find("CSR signature"), std::string::npos) << e.what();
  }
}

TEST(Csr, RsaKeyRefusedByIssue) {
  EvpPkeyCtxPtr ctx{EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr)};
  ASSERT_EQ(EVP_PKEY_keygen_init(ctx.get()), 1);
  EVP_PKEY* raw = nullptr;
  ASSERT_EQ(EVP_PKEY_generate(ctx.get(), &raw), 1);
  EvpPkeyPtr rsa{raw};
  X509ReqPtr req{X509_REQ_new()};
  ASSERT_EQ(X509_REQ_set_pubkey(req.get(), rsa.get()), 1);
  ASSERT_GT(X509_REQ_sign(req.get(), rsa.get(), EVP_sha256()), 0);
  BioPtr bio{BIO_new(BIO_s_mem())};
  ASSERT_EQ(PEM_write_bio_X509_REQ(bio.get(), req.get()), 1);
  char* data = nullptr;
  const long len = BIO_ctrl(bio.get(), BIO_CTRL_INFO, 0, &data);
  const Csr csr = Csr::from_pem(std::string(data, static_cast<std::size_t>(len)));
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  EXPECT_EQ(error_class_of([&] { (void)ca.issue(csr, IssueOptions{}); }), ErrorClass::security);
}

// --- JobCa::load ---------------------------------------------------------------------------

TEST(JobCaLoad, RoundTrip) {
  const JobCa ca = JobCa::create(JobId::random(), 1h, KeyType::ed25519);
  const JobCa loaded = JobCa::load(ca.certificate().to_pem(), ca.key().to_pem());
  EXPECT_EQ(loaded.job(), ca.job());
  EXPECT_EQ(loaded.certificate().fingerprint_sha256(), ca.certificate().fingerprint_sha256());
  const Certificate leaf = issue_rank(loaded, 5);
  EXPECT_EQ(verify_chain(ca.certificate(), leaf), X509_V_OK);
}

TEST(JobCaLoad, RefusesMismatchedKey) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  const JobCa other = JobCa::create(JobId::random(), 1h);
  try {
    (void)JobCa::load(ca.certificate().to_pem(), other.key().to_pem());
    FAIL() << "mismatched key accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
  }
}

TEST(JobCaLoad, RefusesNonCaCertificates) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  // A rank certificate with its own key is not a CA.
  const PrivateKey key = PrivateKey::generate();
  const Certificate leaf = ca.issue(Csr::create(key), IssueOptions{});
  try {
    (void)JobCa::load(leaf.to_pem(), key.to_pem());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("not a CA"), std::string::npos) << e.what();
  }
  // A CA without the sempi job URI.
  const PrivateKey ca_key = PrivateKey::generate();
  X509Ptr foreign{X509_new()};
  X509_set_version(foreign.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(foreign.get()), 7);
  X509_gmtime_adj(X509_getm_notBefore(foreign.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(foreign.get()), 3600);
  X509_set_pubkey(foreign.get(), ca_key.get());
  X509V3_CTX v3{};
  X509V3_set_ctx(&v3, foreign.get(), foreign.get(), nullptr, nullptr, 0);
  X509ExtensionPtr bc{X509V3_EXT_conf_nid(nullptr, &v3, NID_basic_constraints, "critical,CA:TRUE")};
  ASSERT_TRUE(bc);
  X509_add_ext(foreign.get(), bc.get(), -1);
  ASSERT_GT(X509_sign(foreign.get(), ca_key.get(), EVP_sha256()), 0);
  const Certificate foreign_cert(std::move(foreign));
  try {
    (void)JobCa::load(foreign_cert.to_pem(), ca_key.to_pem());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("not a sempi job CA"), std::string::npos) << e.what();
  }
  EXPECT_EQ(error_class_of([] { (void)JobCa::load("garbage", "garbage"); }), ErrorClass::config);
}

// --- parse_identity ------------------------------------------------------------------------

TEST(Identity, RoundTrip) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  for (const std::uint32_t rank : {0u, 1u, 9u, 10u, 4096u, kMaxRank}) {
    IssueOptions options;
    options.rank = rank;
    options.policy_digest = test_digest(static_cast<std::uint8_t>(rank));
    const Certificate leaf = ca.issue(Csr::create(PrivateKey::generate()), options);
    std::string why;
    const auto id = parse_identity(leaf.get(), why);
    ASSERT_TRUE(id) << why;
    EXPECT_EQ(*id, (Identity{ca.job(), rank, options.policy_digest}));
  }
}

TEST(Identity, PolicyDigestParsing) {
  const std::string hex = to_hex(test_digest(0xa7));
  EXPECT_EQ(parse_policy_digest(hex), test_digest(0xa7));
  EXPECT_EQ(parse_policy_digest(std::string(64, 'A')), test_digest(0xaa));
  EXPECT_FALSE(parse_policy_digest(hex.substr(1)));
  EXPECT_FALSE(parse_policy_digest(hex + "0"));
  EXPECT_FALSE(parse_policy_digest(std::string(63, '0') + "x"));
}

TEST(Identity, HandBuiltValidCertificateParses) {
  // Foreign URIs and DNS names are ignored; only sempi URIs make the identity.
  const std::string why = identity_error({{GEN_URI, rank_u(kJob, "7")},
                                          {GEN_DNS, "example.org"},
                                          {GEN_URI, "https://example.org/x"},
                                          {GEN_URI, policy_u(kJob)}});
  EXPECT_EQ(why, "");
}

TEST(Identity, RejectsMissingOrDuplicateNames) {
  EXPECT_NE(identity_error({}, false).find("no subjectAltName"), std::string::npos);
  EXPECT_NE(identity_error({{GEN_DNS, "example.org"}}).find("no sempi rank URI"),
            std::string::npos);
  EXPECT_NE(identity_error({{GEN_URI, policy_u(kJob)}}).find("no sempi rank URI"),
            std::string::npos);
  EXPECT_NE(identity_error({{GEN_URI, rank_u(kJob, "1")}}).find("no sempi policy URI"),
            std::string::npos);
  EXPECT_NE(
      identity_error(
          {{GEN_URI, rank_u(kJob, "1")}, {GEN_URI, rank_u(kJob, "2")}, {GEN_URI, policy_u(kJob)}})
          .find("more than one sempi rank URI"),
      std::string::npos);
  // Even the same rank twice is refused: exactly one.
  EXPECT_NE(
      identity_error(
          {{GEN_URI, rank_u(kJob, "1")}, {GEN_URI, rank_u(kJob, "1")}, {GEN_URI, policy_u(kJob)}})
          .find("more than one sempi rank URI"),
      std::string::npos);
  EXPECT_NE(
      identity_error(
          {{GEN_URI, rank_u(kJob, "1")}, {GEN_URI, policy_u(kJob)}, {GEN_URI, policy_u(kJob)}})
          .find("more than one sempi policy URI"),
      std::string::npos);
}

TEST(Identity, RejectsTwoSanExtensions) {
  X509Ptr cert = make_cert({{GEN_URI, rank_u(kJob, "1")}, {GEN_URI, policy_u(kJob)}});
  add_san(cert.get(), {{GEN_URI, rank_u(kJob2, "1")}});
  std::string why;
  EXPECT_FALSE(parse_identity(cert.get(), why));
  EXPECT_NE(why.find("more than one subjectAltName"), std::string::npos) << why;
}

TEST(Identity, RejectsMalformedJobIds) {
  for (const std::string& job :
       {std::string(32, 'A'), std::string(31, 'a'), std::string(33, 'a'),
        std::string(31, 'a') + "g", std::string(30, 'a') + "%41", std::string()}) {
    const std::string why =
        identity_error({{GEN_URI, rank_u(job, "1")}, {GEN_URI, policy_u(kJob)}});
    EXPECT_NE(why.find("malformed job id"), std::string::npos) << job << ": " << why;
  }
  EXPECT_NE(identity_error({{GEN_URI, rank_u(std::string(32, '0'), "1")},
                            {GEN_URI, policy_u(std::string(32, '0'))}})
                .find("all-zero job id"),
            std::string::npos);
}

TEST(Identity, RejectsNonCanonicalRanks) {
  for (const std::string& rank :
       {std::string("03"), std::string("00"), std::string("-1"), std::string("+1"),
        std::string(" 1"), std::string("1 "), std::string(""), std::string("1a"),
        std::string("0x1"), std::to_string(kMaxRank + 1), std::string("99999999999"),
        std::string("4294967297")}) {
    const std::string why =
        identity_error({{GEN_URI, rank_u(kJob, rank)}, {GEN_URI, policy_u(kJob)}});
    EXPECT_NE(why.find("not a canonical decimal"), std::string::npos) << rank << ": " << why;
  }
  EXPECT_EQ(identity_error({{GEN_URI, rank_u(kJob, "0")}, {GEN_URI, policy_u(kJob)}}), "");
  EXPECT_EQ(identity_error(
                {{GEN_URI, rank_u(kJob, std::to_string(kMaxRank))}, {GEN_URI, policy_u(kJob)}}),
            "");
}

TEST(Identity, RejectsJobMismatchBetweenUris) {
  const std::string why =
      identity_error({{GEN_URI, rank_u(kJob, "1")}, {GEN_URI, policy_u(kJob2)}});
  EXPECT_NE(why.find("different jobs"), std::string::npos) << why;
}

TEST(Identity, RejectsOtherSempiUris) {
  const std::vector<std::string> bad = {
      "sempi://job/" + kJob + "/host/1",
      "sempi://job/" + kJob + "/rank",
      "sempi://job/" + kJob + "/",
      "sempi://other/" + kJob,
      "sempi:job/" + kJob,
      "SEMPI://job/" + kJob + "/rank/1",
      "Sempi://job/" + kJob + "/policy/" + std::string(64, 'c'),
  };
  for (const std::string& uri : bad) {
    const std::string why =
        identity_error({{GEN_URI, rank_u(kJob, "1")}, {GEN_URI, policy_u(kJob)}, {GEN_URI, uri}});
    EXPECT_NE(why.find("unrecognized sempi URI"), std::string::npos) << uri << ": " << why;
  }
  // A CA URI has no place in a rank certificate.
  EXPECT_NE(identity_error({{GEN_URI, rank_u(kJob, "1")},
                            {GEN_URI, policy_u(kJob)},
                            {GEN_URI, "sempi://job/" + kJob}})
                .find("job CA URI"),
            std::string::npos);
}

TEST(Identity, RejectsMalformedPolicyDigests) {
  for (const std::string& digest : {std::string(64, 'C'), std::string(63, 'c'),
                                    std::string(65, 'c'), std::string(63, 'c') + "z"}) {
    const std::string why = identity_error(
        {{GEN_URI, rank_u(kJob, "1")}, {GEN_URI, "sempi://job/" + kJob + "/policy/" + digest}});
    EXPECT_NE(why.find("malformed policy digest"), std::string::npos) << digest << ": " << why;
  }
}

TEST(Identity, RejectsEmbeddedNul) {
  std::string uri = rank_u(kJob, "1");
  uri.push_back('\0');
  uri += ".evil";
  const std::string why = identity_error({{GEN_URI, uri}, {GEN_URI, policy_u(kJob)}});
  EXPECT_NE(why.find("NUL"), std::string::npos) << why;
  // The reason quotes the URI without raw control bytes.
  EXPECT_EQ(why.find('\0'), std::string::npos);
}

TEST(Identity, NullCertificate) {
  std::string why;
  EXPECT_FALSE(parse_identity(nullptr, why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(has_rank_key_usage(nullptr));
}

TEST(Identity, KeyUsageRequiresBothServerAndClient) {
  for (const auto& [eku, expected] :
       std::vector<std::pair<std::string, bool>>{{"serverAuth,clientAuth", true},
                                                 {"serverAuth", false},
                                                 {"clientAuth", false},
                                                 {"", false}}) {
    X509Ptr cert = make_cert({{GEN_URI, rank_u(kJob, "1")}});
    if (!eku.empty()) {
      X509V3_CTX v3{};
      X509V3_set_ctx(&v3, cert.get(), cert.get(), nullptr, nullptr, 0);
      X509ExtensionPtr ext{X509V3_EXT_conf_nid(nullptr, &v3, NID_ext_key_usage, eku.c_str())};
      ASSERT_TRUE(ext);
      X509_add_ext(cert.get(), ext.get(), -1);
    }
    EXPECT_EQ(has_rank_key_usage(cert.get()), expected) << "'" << eku << "'";
  }
}

// --- Certificate ---------------------------------------------------------------------------

TEST(Certificate, PemDerFingerprintAndCopies) {
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  const Certificate& cert = ca.certificate();
  const Certificate back = Certificate::from_pem(cert.to_pem());
  EXPECT_EQ(X509_cmp(back.get(), cert.get()), 0);
  const auto der = cert.to_der();
  std::array<std::uint8_t, 32> md{};
  unsigned int md_len = 0;
  ASSERT_EQ(EVP_Digest(der.data(), der.size(), md.data(), &md_len, EVP_sha256(), nullptr), 1);
  EXPECT_EQ(cert.fingerprint_sha256(), md);

  Certificate copy = cert;  // shares the X509
  EXPECT_EQ(copy.get(), cert.get());
  Certificate assigned = issue_rank(ca, 1);
  assigned = copy;
  EXPECT_EQ(assigned.get(), cert.get());
  const Certificate shared = Certificate::share(cert.get());
  EXPECT_EQ(shared.get(), cert.get());

  const Certificate leaf = issue_rank(ca, 2);
  const auto bundle = Certificate::bundle_from_pem(leaf.to_pem() + cert.to_pem());
  ASSERT_EQ(bundle.size(), 2u);
  EXPECT_EQ(X509_cmp(bundle[0].get(), leaf.get()), 0);
  EXPECT_EQ(X509_cmp(bundle[1].get(), cert.get()), 0);
  EXPECT_EQ(error_class_of([] { (void)Certificate::bundle_from_pem(""); }), ErrorClass::config);
  EXPECT_EQ(error_class_of([&] {
              std::string pem = cert.to_pem();
              pem.insert(pem.size() / 2, "!!");
              (void)Certificate::bundle_from_pem(leaf.to_pem() + pem);
            }),
            ErrorClass::config);
}

TEST(Certificate, FormatUtc) {
  EXPECT_EQ(format_utc(SystemTime{}), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_utc(SystemTime{std::chrono::seconds{1796052074}}), "2026-11-30T15:21:14Z");
  EXPECT_EQ(format_utc(SystemTime{std::chrono::seconds{4102444800}}), "2100-01-01T00:00:00Z");
}

// --- pem_files -----------------------------------------------------------------------------

TEST(PemFiles, PrivateDirAndFileModes) {
  const TempDir tmp;
  const mode_t old_umask = ::umask(0);  // the modes must not depend on the caller's umask
  const fs::path dir = tmp.path() / "a" / "b";
  make_private_dir(dir);
  EXPECT_EQ(file_mode(tmp.path() / "a"), 0700u);
  EXPECT_EQ(file_mode(dir), 0700u);
  make_private_dir(dir);  // existing directory: fine

  // An existing directory others could write into, or a link to one, is refused.
  const fs::path shared = tmp.path() / "shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  EXPECT_THROW(make_private_dir(shared), Error);
  const fs::path link = tmp.path() / "link";
  fs::create_directory_symlink(dir, link);
  EXPECT_THROW(make_private_dir(link), Error);
  EXPECT_THROW(make_private_dir(link.string() + "/"), Error);  // lstat("link/") follows it
  ASSERT_EQ(::chmod(shared.c_str(), 0755), 0);
  make_private_dir(shared);  // readable by others, but only we can change it: fine

  write_file(dir / "k.key", "secret\n", 0600);
  write_file(dir / "c.pem", "public\n", 0644);
  ::umask(old_umask);
  EXPECT_EQ(file_mode(dir / "k.key"), 0600u);
  EXPECT_EQ(file_mode(dir / "c.pem"), 0644u);
  EXPECT_EQ(read_file(dir / "k.key"), "secret\n");

  // Overwrite replaces atomically and leaves no temporary files behind.
  write_file(dir / "k.key", "new secret\n", 0600);
  EXPECT_EQ(read_file(dir / "k.key"), "new secret\n");
  EXPECT_EQ(file_mode(dir / "k.key"), 0600u);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"c.pem", "k.key"}));

  // The umask still narrows nothing below what we asked for, and never widens.
  const mode_t strict = ::umask(077);
  write_file(dir / "c2.pem", "x", 0644);
  ::umask(strict);
  EXPECT_EQ(file_mode(dir / "c2.pem"), 0644u);
}

// Existing::refuse is decided by the write itself: of writers racing for one name, exactly one
// succeeds and its content stays (a check before the write cannot promise that: two runs of
// `sempi pki ca` once could both pass it and mix one's key with the other's certificate).
TEST(PemFiles, RefusingToReplaceHoldsUnderARace) {
  TempDir tmp;
  const fs::path dir = make_private_dir(tmp.path() / "out");
  write_file(dir / "k.key", "first\n", 0600, Existing::refuse);
  try {
    write_file(dir / "k.key", "second\n", 0600, Existing::refuse);
    ADD_FAILURE() << "an existing file was replaced";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(dir / "k.key"), "first\n");

  constexpr int kWriters = 8;
  for (int round = 0; round < 20; ++round) {
    const fs::path target = dir / ("race" + std::to_string(round));
    std::atomic<int> winners{0};
    std::atomic<int> winner{-1};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        try {
          write_file(target, "writer " + std::to_string(w), 0600, Existing::refuse);
          ++winners;
          winner = w;
        } catch (const Error&) {
        }
      });
    }
    for (auto& t : writers) t.join();
    ASSERT_EQ(winners.load(), 1);
    EXPECT_EQ(read_file(target), "writer " + std::to_string(winner.load()));
  }
  std::size_t files = 0;  // no temporary file left behind by the losers
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 21u);
}

// Another user who may rename entries of a directory above ours can swap ours for theirs
// after the checks (e.g. a shared ./sempi-audit made world-writable by someone else).
TEST(PemFiles, PrivateDirRefusesAncestorsOthersCanChange) {
  const TempDir tmp;
  const auto refused_because = [](const fs::path& dir, const std::string& why) {
    try {
      (void)make_private_dir(dir);
      ADD_FAILURE() << dir << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::config);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  const fs::path open = tmp.path() / "open";
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  refused_because(open / "new", "is writable by others");
  refused_because(open / "new" / "deeper", "is writable by others");
  ASSERT_EQ(::mkdir((open / "mine").c_str(), 0700), 0);  // ours and private, but replaceable
  refused_because(open / "mine", "is writable by others");
  ASSERT_EQ(::chmod(open.c_str(), 0770), 0);
  refused_because(open / "mine", "is writable by others");

  // A sticky directory (like /tmp) lets only an entry's owner rename it.
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);
  const fs::path mine = make_private_dir(open / "mine");
  EXPECT_EQ(mine, fs::canonical(open / "mine"));

  if (::geteuid() == 0) {  // only root can give a directory to another user
    // Another user's link in a sticky directory (like /tmp) is refused even where it leads
    // somewhere safe: they could replace it with one leading to another of our directories.
    const fs::path sticky = tmp.path() / "sticky";
    ASSERT_EQ(::mkdir(sticky.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
    const fs::path theirs = sticky / "theirs";
    fs::create_directory_symlink(tmp.path(), theirs);
    ASSERT_EQ(::lchown(theirs.c_str(), 65534, 65534), 0);
    refused_because(theirs / "out", "is a symbolic link that another user could replace");
    EXPECT_FALSE(fs::exists(tmp.path() / "out"));  // nothing was made through it
    // In a directory only we can write, nobody else can replace it, whoever owns it (an
    // administrator's link such as /scratch -> /lustre/...).
    const fs::path target = tmp.path() / "target";
    ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
    const fs::path admins = tmp.path() / "admins";
    fs::create_directory_symlink(target, admins);
    ASSERT_EQ(::lchown(admins.c_str(), 65534, 65534), 0);
    const fs::path made = make_private_dir(admins / "out");
    EXPECT_EQ(made, fs::canonical(target / "out"));
    ASSERT_EQ(::chmod(open.c_str(), 0755), 0);
    ASSERT_EQ(::chown(open.c_str(), 65534, 65534), 0);
    refused_because(open / "mine", "belongs to another user");
  }

  // A link on the way is fine if it leads to a safe place; callers get the resolved path.
  const fs::path real = tmp.path() / "real";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  fs::create_directory_symlink(real, tmp.path() / "via");
  const fs::path resolved = make_private_dir(tmp.path() / "via" / "out");
  EXPECT_EQ(resolved, fs::canonical(real / "out"));
}

TEST(PemFiles, PrivateDirRefusesAFile) {
  const TempDir tmp;
  write_file(tmp.path() / "f", "x", 0600);
  try {
    make_private_dir(tmp.path() / "f");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
}

TEST(PemFiles, ReadErrorsNameThePath) {
  const TempDir tmp;
  const fs::path missing = tmp.path() / "missing.pem";
  try {
    (void)read_file(missing);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    const std::string what = e.what();
    EXPECT_NE(what.find(missing.string()), std::string::npos) << what;
    EXPECT_NE(what.find("No such file"), std::string::npos) << what;
  }
  EXPECT_EQ(error_class_of([&] { (void)read_file(tmp.path()); }), ErrorClass::config);
  write_file(tmp.path() / "big", std::string((1u << 20) + 1, 'x'), 0600);
  EXPECT_EQ(error_class_of([&] { (void)read_file(tmp.path() / "big"); }), ErrorClass::config);
  write_file(tmp.path() / "max", std::string(1u << 20, 'x'), 0600);
  EXPECT_EQ(read_file(tmp.path() / "max").size(), 1u << 20);
  // Writing into a missing directory is an I/O error naming the file.
  EXPECT_EQ(error_class_of([&] { write_file(tmp.path() / "no" / "f", "x", 0600); }),
            ErrorClass::io);
}

TEST(PemFiles, CaRoundTripThroughFiles) {
  const TempDir tmp;
  const JobCa ca = JobCa::create(JobId::random(), 1h);
  make_private_dir(tmp.path() / "ca");
  write_file(tmp.path() / "ca" / "ca.key", ca.key().to_pem(), 0600);
  write_file(tmp.path() / "ca" / "ca.pem", ca.certificate().to_pem(), 0644);
  const JobCa loaded =
      JobCa::load(read_file(tmp.path() / "ca" / "ca.pem"), read_file(tmp.path() / "ca" / "ca.key"));
  EXPECT_EQ(loaded.job(), ca.job());
}

}  // namespace
}  // namespace sempi::pki
