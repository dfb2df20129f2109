#include "pki/csr.hpp"

#include <openssl/pem.h>

#include "pki/detail.hpp"

namespace sempi::pki {

namespace {

// X509_REQ_verify returns 1 only for a good signature (0 bad, -1 error).
void verify_self_signature(X509_REQ* req) {
  OsslErrorScope scope;
  EVP_PKEY* pub = X509_REQ_get0_pubkey(req);
  if (pub == nullptr) throw_openssl_error("CSR has no usable public key");
  if (X509_REQ_verify(req, pub) != 1) {
    throw_openssl_error("CSR signature does not verify (the requester does not hold the key)");
  }
}

}  // namespace

Csr Csr::create(const PrivateKey& key) {
  OsslErrorScope scope;
  X509ReqPtr req{X509_REQ_new()};
  if (!req) throw_openssl_error("X509_REQ_new failed");
  if (X509_REQ_set_version(req.get(), X509_REQ_VERSION_1) != 1 ||
      X509_REQ_set_pubkey(req.get(), key.get()) != 1) {
    throw_openssl_error("cannot fill the CSR");
  }
  // Informational only: JobCa::issue names the identity itself.
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  const std::string cn = "sempi rank key";
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    throw_openssl_error("cannot set the CSR subject");
  }
  if (X509_REQ_sign(req.get(), key.get(), detail::signature_digest(key.get())) <= 0) {
    throw_openssl_error("cannot sign the CSR");
  }
  return Csr(std::move(req));
}

Csr Csr::from_pem(std::string_view pem) {
  BioPtr bio = detail::read_bio(pem);
  OsslErrorScope scope;
  X509ReqPtr req{PEM_read_bio_X509_REQ(bio.get(), nullptr, detail::refuse_password, nullptr)};
  if (!req) throw_openssl_error("cannot parse the PEM certificate signing request");
  verify_self_signature(req.get());
  return Csr(std::move(req));
}

std::string Csr::to_pem() const {
  BioPtr bio = detail::write_bio();
  OsslErrorScope scope;
  if (PEM_write_bio_X509_REQ(bio.get(), req_.get()) != 1) {
    throw_openssl_error("cannot encode the CSR");
  }
  return detail::bio_contents(bio.get());
}

}  // namespace sempi::pki
