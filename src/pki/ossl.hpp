#pragma once
// RAII for OpenSSL 3 objects and error-queue handling.
//
// Every OpenSSL object sempi creates is wrapped on the line that creates it:
//   pki::EvpPkeyPtr key{EVP_PKEY_new()};
// and every fallible OpenSSL call is preceded by ERR_clear_error() (see OsslErrorScope) so the
// error text we report belongs to that call.

#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "sempi/error.hpp"

namespace sempi::pki {

template <class T, auto Free>
struct OsslDeleter {
  void operator()(T* p) const noexcept { Free(p); }
};
template <class T, auto Free>
using ossl_ptr = std::unique_ptr<T, OsslDeleter<T, Free>>;

using BioPtr = ossl_ptr<BIO, BIO_free_all>;
using BignumPtr = ossl_ptr<BIGNUM, BN_free>;
using EvpPkeyPtr = ossl_ptr<EVP_PKEY, EVP_PKEY_free>;
using EvpPkeyCtxPtr = ossl_ptr<EVP_PKEY_CTX, EVP_PKEY_CTX_free>;
using EvpMdCtxPtr = ossl_ptr<EVP_MD_CTX, EVP_MD_CTX_free>;
using X509Ptr = ossl_ptr<X509, X509_free>;
using X509ReqPtr = ossl_ptr<X509_REQ, X509_REQ_free>;
using X509StorePtr = ossl_ptr<X509_STORE, X509_STORE_free>;
using X509StoreCtxPtr = ossl_ptr<X509_STORE_CTX, X509_STORE_CTX_free>;
using X509ExtensionPtr = ossl_ptr<X509_EXTENSION, X509_EXTENSION_free>;
using GeneralNamesPtr = ossl_ptr<GENERAL_NAMES, GENERAL_NAMES_free>;
using Asn1IntegerPtr = ossl_ptr<ASN1_INTEGER, ASN1_INTEGER_free>;
using Asn1TimePtr = ossl_ptr<ASN1_TIME, ASN1_TIME_free>;
using SslCtxPtr = ossl_ptr<SSL_CTX, SSL_CTX_free>;
using SslPtr = ossl_ptr<SSL, SSL_free>;

/// Drains OpenSSL's thread-local error queue into one string ("a; b; c"); empty if none.
std::string drain_openssl_errors();

/// Throws sempi::Error(cls, what + ": " + drained OpenSSL errors).
[[noreturn]] void throw_openssl_error(const std::string& what,
                                      ErrorClass cls = ErrorClass::security);

/// Clears the error queue on entry, so errors drained later belong to this operation.
class OsslErrorScope {
 public:
  OsslErrorScope() noexcept { ERR_clear_error(); }
  ~OsslErrorScope() = default;
  OsslErrorScope(const OsslErrorScope&) = delete;
  OsslErrorScope& operator=(const OsslErrorScope&) = delete;
};

}  // namespace sempi::pki
