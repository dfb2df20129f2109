#pragma once
// Text from untrusted files (audit logs) made safe to print on a terminal.

#include <string>
#include <string_view>

namespace sempi {

/// `text` with every control character (C0, DEL, and C1: as UTF-8, or as a byte 0x80-0x9F
/// outside any UTF-8 character, which a terminal in an 8-bit mode reads as one) written as \xNN
/// and every backslash doubled: what a log record says cannot move the cursor, recolour or
/// clear the terminal, or forge extra lines of output. Well-formed UTF-8 is kept.
std::string printable(std::string_view text);

/// As printable(), but line breaks stay: for multi-line messages (errors listing problems one
/// per line) that quote untrusted text.
std::string printable_lines(std::string_view text);

}  // namespace sempi
