#include "pki/certificate.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <cstdio>

#include "pki/detail.hpp"

namespace sempi::pki {

namespace {

X509Ptr read_one(BIO* bio) {
  return X509Ptr{PEM_read_bio_X509(bio, nullptr, detail::refuse_password, nullptr)};
}

}  // namespace

Certificate::Certificate(X509Ptr cert) : cert_(std::move(cert)) {
  if (!cert_) throw Error(ErrorClass::arg, "Certificate: null X509");
}

Certificate Certificate::share(X509* cert) {
  if (cert == nullptr) throw Error(ErrorClass::arg, "Certificate::share: null X509");
  OsslErrorScope scope;
  if (X509_up_ref(cert) != 1) throw_openssl_error("X509_up_ref failed", ErrorClass::intern);
  return Certificate(X509Ptr{cert});
}

Certificate Certificate::from_pem(std::string_view pem) {
  BioPtr bio = detail::read_bio(pem);
  OsslErrorScope scope;
  X509Ptr cert = read_one(bio.get());
  if (!cert) throw_openssl_error("cannot parse the PEM certificate", ErrorClass::config);
  return Certificate(std::move(cert));
}

std::vector<Certificate> Certificate::bundle_from_pem(std::string_view pem) {
  BioPtr bio = detail::read_bio(pem);
  std::vector<Certificate> out;
  OsslErrorScope scope;
  while (X509Ptr cert = read_one(bio.get())) out.emplace_back(std::move(cert));
  // The loop ends on "no start line" at the end of the input; anything else is a real error.
  const unsigned long last = ERR_peek_last_error();
  if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE &&
      !out.empty()) {
    ERR_clear_error();
  } else if (last != 0 || out.empty()) {
    throw_openssl_error("cannot parse the PEM certificate bundle (certificate " +
                            std::to_string(out.size() + 1) + ")",
                        ErrorClass::config);
  }
  return out;
}

Certificate::Certificate(const Certificate& other) : cert_(share(other.get()).cert_.release()) {}

Certificate& Certificate::operator=(const Certificate& other) {
  if (this != &other) cert_ = std::move(share(other.get()).cert_);
  return *this;
}

std::string Certificate::to_pem() const {
  BioPtr bio = detail::write_bio();
  OsslErrorScope scope;
  if (PEM_write_bio_X509(bio.get(), cert_.get()) != 1) {
    throw_openssl_error("cannot encode the certificate");
  }
  return detail::bio_contents(bio.get());
}

std::vector<std::uint8_t> Certificate::to_der() const {
  OsslErrorScope scope;
  const int len = i2d_X509(cert_.get(), nullptr);
  if (len <= 0) throw_openssl_error("cannot DER-encode the certificate");
  std::vector<std::uint8_t> der(static_cast<std::size_t>(len));
  unsigned char* p = der.data();
  if (i2d_X509(cert_.get(), &p) != len) throw_openssl_error("cannot DER-encode the certificate");
  return der;
}

std::array<std::uint8_t, 32> Certificate::fingerprint_sha256() const {
  std::array<std::uint8_t, 32> md{};
  unsigned int len = 0;
  OsslErrorScope scope;
  if (X509_digest(cert_.get(), EVP_sha256(), md.data(), &len) != 1 || len != md.size()) {
    throw_openssl_error("cannot compute the certificate fingerprint");
  }
  return md;
}

SystemTime Certificate::not_before() const {
  const auto t = detail::from_asn1_time(X509_get0_notBefore(cert_.get()));
  if (!t) throw Error(ErrorClass::security, "certificate has a malformed notBefore");
  return *t;
}

SystemTime Certificate::not_after() const {
  const auto t = detail::from_asn1_time(X509_get0_notAfter(cert_.get()));
  if (!t) throw Error(ErrorClass::security, "certificate has a malformed notAfter");
  return *t;
}

std::string Certificate::subject() const {
  BioPtr bio = detail::write_bio();
  OsslErrorScope scope;
  // XN_FLAG_RFC2253 escapes special and non-ASCII characters, so the result is one safe line.
  if (X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert_.get()), 0, XN_FLAG_RFC2253) < 0) {
    throw_openssl_error("cannot print the certificate subject");
  }
  return detail::bio_contents(bio.get());
}

std::string format_utc(SystemTime t) {
  using namespace std::chrono;
  const auto secs = floor<seconds>(t);
  const auto day = floor<days>(secs);
  const year_month_day ymd{day};
  const hh_mm_ss hms{secs - day};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02lldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<long long>(hms.seconds().count()));
  return buf;
}

namespace detail {

std::optional<SystemTime> from_asn1_time(const ASN1_TIME* t) {
  if (t == nullptr) return std::nullopt;
  std::tm tm{};
  OsslErrorScope scope;
  if (ASN1_TIME_to_tm(t, &tm) != 1) {
    ERR_clear_error();
    return std::nullopt;
  }
  using namespace std::chrono;
  const year_month_day ymd{year{tm.tm_year + 1900}, month{static_cast<unsigned>(tm.tm_mon + 1)},
                           day{static_cast<unsigned>(tm.tm_mday)}};
  if (!ymd.ok()) return std::nullopt;
  return SystemTime{sys_days{ymd} + hours{tm.tm_hour} + minutes{tm.tm_min} + seconds{tm.tm_sec}};
}

void set_asn1_time(ASN1_TIME* field, SystemTime t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t).time_since_epoch().count();
  OsslErrorScope scope;
  // ASN1_TIME_set picks UTCTime up to 2049 and GeneralizedTime after, as RFC 5280 requires.
  if (ASN1_TIME_set(field, static_cast<time_t>(secs)) == nullptr) {
    throw_openssl_error("cannot set a certificate time", ErrorClass::arg);
  }
}

}  // namespace detail
}  // namespace sempi::pki
