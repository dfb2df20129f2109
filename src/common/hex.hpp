#pragma once
// Lower-case hexadecimal encoding for identifiers, digests and fingerprints.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sempi {

std::string to_hex(std::span<const std::uint8_t> bytes);

/// Decodes hex (either case). Returns nullopt on odd length or a non-hex character.
std::optional<std::vector<std::uint8_t>> from_hex(std::string_view text);

}  // namespace sempi
