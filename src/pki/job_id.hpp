#pragma once
// The 128-bit random identifier of a job, printed as 32 lower-case hex digits.

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sempi::pki {

class JobId {
 public:
  static constexpr std::size_t kBytes = 16;

  JobId() = default;  // all zero; never a valid job
  explicit JobId(const std::array<std::uint8_t, kBytes>& bytes) : bytes_(bytes) {}

  /// A fresh identifier from the OpenSSL CSPRNG. Throws sempi::Error if the RNG fails.
  static JobId random();
  /// Parses exactly 32 hex digits; nullopt otherwise.
  static std::optional<JobId> parse(std::string_view hex);

  [[nodiscard]] std::string hex() const;
  [[nodiscard]] const std::array<std::uint8_t, kBytes>& bytes() const { return bytes_; }
  [[nodiscard]] bool is_zero() const;

  auto operator<=>(const JobId&) const = default;

 private:
  std::array<std::uint8_t, kBytes> bytes_{};
};

}  // namespace sempi::pki
