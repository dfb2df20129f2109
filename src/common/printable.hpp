#pragma once
// Text from untrusted files (audit logs) made safe to print on a terminal.

#include <string>
#include <string_view>

namespace sempi {

/// `text` with every control character (C0, DEL, and C1: as UTF-8, or as a byte 0x80-0x9F
/// outside any UTF-8 character, which a terminal in an 8-bit mode reads as one) written as \xNN
/// and every backslash doubled: what a log record says cannot move the cursor, recolour or
/// clear the terminal, or forge extra lines of output. Well-formed UTF-8 is kept, except the
/// characters that print as nothing or reorder the line (bidi controls, zero-width spaces,
/// tag characters: Unicode's default-ignorable set): those are written as \uNNNN or
/// \UNNNNNNNN.
std::string printable(std::string_view text);

/// printable(text) in double quotes, each quote inside escaped as \": for a name among other
/// fields on one line, which must not pass for more fields (a communicator named
/// `x op p2p tag 1`) or run into the next.
std::string in_quotes(std::string_view text);

/// As printable(), but line breaks stay: for multi-line messages (errors listing problems one
/// per line) that quote untrusted text.
std::string printable_lines(std::string_view text);

/// `text` with each line feed written as the symbol U+240A (␊), and nothing else changed: for
/// untrusted text put into a message that printable_lines() prints, which keeps line feeds
/// (and would double the backslash of an escape made earlier).
std::string one_line(std::string_view text);

}  // namespace sempi
