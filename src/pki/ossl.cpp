#include "pki/ossl.hpp"

#include <openssl/err.h>

#include <climits>

#include "pki/detail.hpp"

namespace sempi::pki {

std::string drain_openssl_errors() {
  std::string out;
  const char* data = nullptr;
  int flags = 0;
  // ERR_get_error_all pops the oldest entry; the loop empties the thread's queue.
  while (const unsigned long code = ERR_get_error_all(nullptr, nullptr, nullptr, &data, &flags)) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
    if (data != nullptr && (flags & ERR_TXT_STRING) != 0 && *data != '\0') {
      out += " (";
      out += data;
      out += ')';
    }
  }
  return out;
}

void throw_openssl_error(const std::string& what, ErrorClass cls) {
  std::string errors = drain_openssl_errors();
  if (errors.empty()) errors = "no OpenSSL error reported";
  throw Error(cls, what + ": " + errors);
}

namespace detail {

BioPtr read_bio(std::string_view data) {
  if (data.size() > static_cast<std::size_t>(INT_MAX)) {
    throw Error(ErrorClass::arg, "input too large for a memory BIO");
  }
  OsslErrorScope scope;
  BioPtr bio{BIO_new_mem_buf(data.data(), static_cast<int>(data.size()))};
  if (!bio) throw_openssl_error("BIO_new_mem_buf failed", ErrorClass::intern);
  return bio;
}

BioPtr write_bio() {
  OsslErrorScope scope;
  BioPtr bio{BIO_new(BIO_s_mem())};
  if (!bio) throw_openssl_error("BIO_new failed", ErrorClass::intern);
  return bio;
}

std::string bio_contents(BIO* bio) {
  char* data = nullptr;
  // BIO_get_mem_data is a macro with a C cast; BIO_ctrl is what it expands to.
  const long len = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);
  if (len <= 0 || data == nullptr) return {};
  return {data, static_cast<std::size_t>(len)};
}

int refuse_password(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) { return -1; }

const EVP_MD* signature_digest(EVP_PKEY* key) {
  if (EVP_PKEY_is_a(key, "ED25519") == 1 || EVP_PKEY_is_a(key, "ED448") == 1) return nullptr;
  return EVP_sha256();
}

}  // namespace detail
}  // namespace sempi::pki
