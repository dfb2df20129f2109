#pragma once
// Certificate signing requests: a rank proves possession of its in-memory key to the launcher.

#include <string>
#include <string_view>

#include "pki/key.hpp"

namespace sempi::pki {

class Csr {
 public:
  /// A CSR signed by `key`. The subject is informational; the issuer ignores it and names the
  /// identity itself. Throws sempi::Error(security).
  static Csr create(const PrivateKey& key);
  /// Parses PEM and checks the CSR's self-signature. Throws sempi::Error(security) if invalid.
  static Csr from_pem(std::string_view pem);

  [[nodiscard]] std::string to_pem() const;
  [[nodiscard]] X509_REQ* get() const noexcept { return req_.get(); }

 private:
  explicit Csr(X509ReqPtr req) : req_(std::move(req)) {}
  X509ReqPtr req_;
};

}  // namespace sempi::pki
