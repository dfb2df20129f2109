#include "common/printable.hpp"

#include <cstdio>

namespace sempi {

namespace {

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong form, surrogate or code
// point past U+10FFFF) that starts at text[at], or 0 if none does.
std::size_t utf8_sequence_length(std::string_view text, std::size_t at) {
  const auto byte = [&text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  std::size_t length = 0;
  unsigned char second_min = 0x80;  // the second byte's range narrows for some lead bytes
  unsigned char second_max = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) second_min = 0xa0;
    if (lead == 0xed) second_max = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) second_min = 0x90;
    if (lead == 0xf4) second_max = 0x8f;
  } else {
    return 0;
  }
  if (text.size() - at < length) return 0;
  if (byte(at + 1) < second_min || byte(at + 1) > second_max) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xbf) return 0;
  }
  return length;
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
    } else if (const std::size_t length = utf8_sequence_length(text, i); length > 0) {
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
