#include "pki/secure_heap.hpp"

#include <cstdlib>
#include <cstring>

#include <openssl/crypto.h>

namespace sempi::pki {
namespace {

// Smallest block the heap hands out: an ECDSA P-256 scalar is 32 bytes.
constexpr std::size_t kSecureHeapMinBlock = 32;

SecureHeap set_up() noexcept {
  if (const char* setting = std::getenv("SEMPI_SECURE_HEAP");
      setting != nullptr && std::strcmp(setting, "0") == 0) {
    return SecureHeap::disabled;
  }
  if (CRYPTO_secure_malloc_initialized() == 1) return SecureHeap::external;
  switch (CRYPTO_secure_malloc_init(kSecureHeapBytes, kSecureHeapMinBlock)) {
    case 1:
      return SecureHeap::locked;
    case 2:
      return SecureHeap::unprotected;
    default:
      return SecureHeap::unavailable;
  }
}

}  // namespace

SecureHeap ensure_secure_heap() noexcept {
  // A function-local static: initialised once, and other threads wait for it.
  static const SecureHeap state = set_up();
  return state;
}

const char* secure_heap_name(SecureHeap state) noexcept {
  switch (state) {
    case SecureHeap::locked:
      return "locked";
    case SecureHeap::unprotected:
      return "unprotected";
    case SecureHeap::external:
      return "external";
    case SecureHeap::disabled:
      return "disabled";
    case SecureHeap::unavailable:
      return "unavailable";
  }
  return "unknown";
}

}  // namespace sempi::pki
