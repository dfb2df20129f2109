#include "common/printable.hpp"

#include <cstdio>

#include "common/utf8.hpp"

namespace sempi {
namespace {

// The code point of the well-formed UTF-8 character text[at, at + length).
char32_t decode(std::string_view text, std::size_t at, std::size_t length) {
  static constexpr unsigned char kLeadBits[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  char32_t c = static_cast<unsigned char>(text[at]) & kLeadBits[length];
  for (std::size_t k = 1; k < length; ++k) {
    c = (c << 6) | (static_cast<unsigned char>(text[at + k]) & 0x3f);
  }
  return c;
}

// Characters that print as nothing, or reorder what follows them on the line (the bidi
// controls of "Trojan Source", CVE-2021-42574): text that shows as "world" must be "world".
bool is_invisible_or_bidi(char32_t c) {
  return c == 0x061c || c == 0x180e || (c >= 0x200b && c <= 0x200f) ||
         (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x2064) ||
         (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto escape = [&out](unsigned char byte) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", byte);
    out += buf;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      escape(c);
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (std::size_t length = 0; utf8_valid_prefix(text, i, length) == length) {
      const auto second = static_cast<unsigned char>(text[i + 1]);
      if (c == 0xc2 && second <= 0x9f) {  // U+0080..U+009F: C1 controls
        escape(c);
        escape(second);
      } else if (const char32_t cp = decode(text, i, length); is_invisible_or_bidi(cp)) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        out += buf;
      } else {
        out.append(text.substr(i, length));
      }
      i += length - 1;
    } else if (c <= 0x9f) {
      // A stray byte 0x80..0x9f, in no UTF-8 character: a terminal in an 8-bit mode reads it
      // as a C1 control (0x9b: CSI).
      escape(c);
    } else {
      out += static_cast<char>(c);  // not UTF-8, but no control in ISO 8859 either
    }
  }
  return out;
}

std::string in_quotes(std::string_view text) {
  std::string out = "\"";
  for (const char c : printable(text)) {
    if (c == '"') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

std::string printable_lines(std::string_view text) {
  std::string out;
  for (std::size_t start = 0;;) {
    const auto end = text.find('\n', start);
    out += printable(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    out += '\n';
    start = end + 1;
  }
}

}  // namespace sempi
