#include "pki/job_ca.hpp"

#include <openssl/rand.h>

#include <algorithm>

#include "pki/detail.hpp"

namespace sempi::pki {

namespace {

using Clock = std::chrono::system_clock;

// RFC 5280 4.1.2.2: positive, at most 20 octets. 128 random bits (top bit cleared so the DER
// INTEGER stays positive in 16 octets) make serials unpredictable and unique per CA.
void set_random_serial(X509* cert) {
  std::array<unsigned char, 16> bytes{};
  OsslErrorScope scope;
  bool zero = true;
  while (zero) {
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
      throw_openssl_error("cannot generate a serial number (RAND_bytes failed)");
    }
    bytes[0] &= 0x7f;
    for (const unsigned char b : bytes) zero = zero && b == 0;
  }
  BignumPtr bn{BN_bin2bn(bytes.data(), static_cast<int>(bytes.size()), nullptr)};
  if (!bn) throw_openssl_error("BN_bin2bn failed");
  Asn1IntegerPtr serial{BN_to_ASN1_INTEGER(bn.get(), nullptr)};
  if (!serial) throw_openssl_error("BN_to_ASN1_INTEGER failed");
  if (X509_set_serialNumber(cert, serial.get()) != 1) {
    throw_openssl_error("cannot set the serial number");
  }
}

// Adds one extension given in openssl.cnf syntax. `issuer` supplies authorityKeyIdentifier.
void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx{};
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  OsslErrorScope scope;
  X509ExtensionPtr ext{X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str())};
  if (!ext) throw_openssl_error(std::string("cannot build extension ") + OBJ_nid2sn(nid));
  if (X509_add_ext(cert, ext.get(), -1) != 1) {
    throw_openssl_error(std::string("cannot add extension ") + OBJ_nid2sn(nid));
  }
}

void set_common_name(X509* cert, const std::string& cn) {
  OsslErrorScope scope;
  if (X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    throw_openssl_error("cannot set the subject common name");
  }
}

X509Ptr new_v3_cert() {
  OsslErrorScope scope;
  X509Ptr cert{X509_new()};
  if (!cert) throw_openssl_error("X509_new failed");
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    throw_openssl_error("cannot set the certificate version");
  }
  set_random_serial(cert.get());
  return cert;
}

void sign(X509* cert, EVP_PKEY* key) {
  OsslErrorScope scope;
  if (X509_sign(cert, key, detail::signature_digest(key)) <= 0) {
    throw_openssl_error("cannot sign the certificate");
  }
}

}  // namespace

JobCa JobCa::create(const JobId& job, std::chrono::seconds validity, KeyType key_type) {
  if (job.is_zero()) throw Error(ErrorClass::arg, "JobCa::create: the job id is all zero");
  if (validity <= std::chrono::seconds::zero()) {
    throw Error(ErrorClass::arg, "JobCa::create: validity must be positive");
  }
  PrivateKey key = PrivateKey::generate(key_type);
  X509Ptr cert = new_v3_cert();
  X509* x = cert.get();
  {
    OsslErrorScope scope;
    if (X509_set_pubkey(x, key.get()) != 1) throw_openssl_error("cannot set the CA public key");
  }
  set_common_name(x, "sempi job CA " + job.hex());
  {
    OsslErrorScope scope;
    if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) {
      throw_openssl_error("cannot set the CA issuer name");
    }
  }
  const auto now = Clock::now();
  detail::set_asn1_time(X509_getm_notBefore(x), now - kClockSkew);
  detail::set_asn1_time(X509_getm_notAfter(x), now + validity + kClockSkew);
  // pathlen:0: the job CA signs rank leaves only, never another CA.
  add_extension(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_extension(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(x, x, NID_subject_key_identifier, "hash");
  add_extension(x, x, NID_authority_key_identifier, "keyid:always");
  // The job id in a SAN URI lets load() recover it without parsing the subject.
  add_extension(x, x, NID_subject_alt_name, "URI:" + ca_uri(job));
  sign(x, key.get());
  return JobCa(job, Certificate(std::move(cert)), std::move(key));
}

JobCa JobCa::load(std::string_view cert_pem, std::string_view key_pem) {
  Certificate cert = Certificate::from_pem(cert_pem);
  PrivateKey key = PrivateKey::from_pem(key_pem);
  {
    OsslErrorScope scope;
    if (X509_check_private_key(cert.get(), key.get()) != 1) {
      throw Error(ErrorClass::config,
                  "the CA key does not match the CA certificate's public key (" +
                      drain_openssl_errors() + ")");
    }
  }
  const std::uint32_t flags = X509_get_extension_flags(cert.get());
  if ((flags & EXFLAG_INVALID) != 0) {
    throw Error(ErrorClass::config, "the CA certificate has invalid or duplicate extensions");
  }
  if ((flags & EXFLAG_CA) == 0) {
    throw Error(ErrorClass::config,
                "the certificate is not a CA (no basicConstraints CA:TRUE); pass the job CA's "
                "certificate, not a rank certificate");
  }
  if ((flags & EXFLAG_KUSAGE) != 0 && (X509_get_key_usage(cert.get()) & KU_KEY_CERT_SIGN) == 0) {
    throw Error(ErrorClass::config, "the CA certificate's keyUsage lacks keyCertSign");
  }
  std::string why;
  const auto job = parse_ca_job(cert.get(), why);
  if (!job) throw Error(ErrorClass::config, "not a sempi job CA: " + why);
  return JobCa(*job, std::move(cert), std::move(key));
}

Certificate JobCa::issue(const Csr& csr, const IssueOptions& options) const {
  if (options.rank > kMaxRank) {
    throw Error(ErrorClass::arg, "rank " + std::to_string(options.rank) +
                                     " is out of range (maximum " + std::to_string(kMaxRank) + ")");
  }
  const JobId job = options.job_override.value_or(job_);
  if (job.is_zero()) throw Error(ErrorClass::arg, "cannot issue for the all-zero job id");
  EVP_PKEY* pub = nullptr;
  {
    OsslErrorScope scope;
    pub = X509_REQ_get0_pubkey(csr.get());
    if (pub == nullptr) throw_openssl_error("CSR has no usable public key");
    // Proof of possession: the CSR must be signed by the key it asks us to certify.
    if (X509_REQ_verify(csr.get(), pub) != 1) {
      throw_openssl_error("CSR signature does not verify (the requester does not hold the key)");
    }
  }
  // Only the key types sempi generates; RSA and odd curves are refused.
  if (!detail::key_type_of(pub)) {
    throw Error(ErrorClass::security, std::string("refusing to certify a ") +
                                          EVP_PKEY_get0_type_name(pub) +
                                          " key: rank keys must be ECDSA P-256 or Ed25519");
  }

  const auto now = Clock::now();
  const SystemTime not_before = options.not_before.value_or(now - kClockSkew);
  SystemTime not_after = now + options.validity;
  if (options.not_after) {
    not_after = *options.not_after;
  } else {
    if (cert_.not_after() <= now) {
      throw Error(ErrorClass::config, "the job CA expired at " + format_utc(cert_.not_after()) +
                                          "; create a new CA for the job");
    }
    // A leaf outliving its CA would only fail later, less clearly.
    not_after = std::min(not_after, cert_.not_after());
  }
  if (not_after <= not_before) {
    throw Error(ErrorClass::arg, "empty validity window: notAfter " + format_utc(not_after) +
                                     " is not after notBefore " + format_utc(not_before));
  }

  X509Ptr cert = new_v3_cert();
  X509* x = cert.get();
  {
    OsslErrorScope scope;
    if (X509_set_pubkey(x, pub) != 1) throw_openssl_error("cannot set the rank public key");
    if (X509_set_issuer_name(x, X509_get_subject_name(cert_.get())) != 1) {
      throw_openssl_error("cannot set the issuer name");
    }
  }
  set_common_name(x, "sempi rank " + std::to_string(options.rank) + " job " + job.hex());
  detail::set_asn1_time(X509_getm_notBefore(x), not_before);
  detail::set_asn1_time(X509_getm_notAfter(x), not_after);
  X509* ca = cert_.get();
  add_extension(x, ca, NID_basic_constraints, "critical,CA:FALSE");
  // TLS 1.3 authenticates with signatures only (ephemeral key exchange), so digitalSignature
  // is all a rank key needs.
  add_extension(x, ca, NID_key_usage, "critical,digitalSignature");
  // Every rank both dials and accepts connections.
  add_extension(x, ca, NID_ext_key_usage, "serverAuth,clientAuth");
  add_extension(x, ca, NID_subject_key_identifier, "hash");
  add_extension(x, ca, NID_authority_key_identifier, "keyid:always");
  add_extension(
      x, ca, NID_subject_alt_name,
      "URI:" + rank_uri(job, options.rank) + ",URI:" + policy_uri(job, options.policy_digest));
  sign(x, key_.get());
  return Certificate(std::move(cert));
}

}  // namespace sempi::pki
