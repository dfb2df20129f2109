#include "pki/job_id.hpp"

#include <openssl/rand.h>

#include <algorithm>

#include "common/hex.hpp"
#include "pki/ossl.hpp"

namespace sempi::pki {

JobId JobId::random() {
  std::array<std::uint8_t, kBytes> bytes{};
  OsslErrorScope scope;
  // An all-zero id is reserved as "no job"; 2^-128 odds, but the loop makes it impossible.
  do {
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
      throw_openssl_error("cannot generate a job id (RAND_bytes failed)");
    }
  } while (std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b == 0; }));
  return JobId(bytes);
}

std::optional<JobId> JobId::parse(std::string_view hex) {
  if (hex.size() != 2 * kBytes) return std::nullopt;
  const auto decoded = from_hex(hex);
  if (!decoded) return std::nullopt;
  std::array<std::uint8_t, kBytes> bytes{};
  std::copy(decoded->begin(), decoded->end(), bytes.begin());
  return JobId(bytes);
}

std::string JobId::hex() const { return to_hex(bytes_); }

bool JobId::is_zero() const {
  return std::all_of(bytes_.begin(), bytes_.end(), [](std::uint8_t b) { return b == 0; });
}

}  // namespace sempi::pki
