#pragma once
// Well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, nothing past U+10FFFF), for the
// writers that must tell it from arbitrary bytes: terminal output and JSON escaping.

#include <cstddef>
#include <string_view>

namespace sempi {

/// How many bytes of a well-formed UTF-8 sequence start at text[at], the lead byte counted:
/// `length` (what the lead byte announces) if the sequence is complete, else its valid prefix,
/// 0 for a byte that cannot lead (ASCII included; `length` is then 1).
std::size_t utf8_valid_prefix(std::string_view text, std::size_t at, std::size_t& length);

/// True if all of `text` is well-formed UTF-8 (what JSON text, and so nlohmann::json::dump,
/// requires of a string).
bool is_utf8(std::string_view text);

}  // namespace sempi
