#include "common/printable.hpp"

#include <cstdio>

#include "common/utf8.hpp"

namespace sempi {

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
