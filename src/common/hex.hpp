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

/// True if every character is 0-9 or a-f: hex exactly as to_hex writes it (true for "").
bool is_lower_hex(std::string_view text) noexcept;

/// Decodes hex (either case). Returns nullopt on odd length or a non-hex character.
std::optional<std::vector<std::uint8_t>> from_hex(std::string_view text);

}  // namespace sempi
