#include "common/printable.hpp"

#include <cstdio>
#include <utility>

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

// Characters that print as nothing (Unicode's Default_Ignorable_Code_Point: zero-width
// spaces and joiners, variation selectors, tag characters, fillers), or that reorder or break
// the line (bidi controls, CVE-2021-42574; the line and paragraph separators): text that shows
// as "world" must be "world".
bool is_invisible_or_bidi(char32_t c) {
  static constexpr std::pair<char32_t, char32_t> kRanges[] = {
      {0x00ad, 0x00ad},   {0x034f, 0x034f}, {0x061c, 0x061c},   {0x115f, 0x1160},
      {0x17b4, 0x17b5},   {0x180b, 0x180f}, {0x200b, 0x200f},   {0x2028, 0x202e},
      {0x2060, 0x206f},   {0x3164, 0x3164}, {0xfe00, 0xfe0f},   {0xfeff, 0xfeff},
      {0xffa0, 0xffa0},   {0xfff0, 0xfff8}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a},
      {0xe0000, 0xe0fff},
  };
  for (const auto& [first, last] : kRanges) {
    if (c >= first && c <= last) return true;
  }
  return false;
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
        char buf[16];
        std::snprintf(buf, sizeof buf, cp > 0xffff ? "\\U%08x" : "\\u%04x",
                      static_cast<unsigned>(cp));
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

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\n') {
      out += "\xe2\x90\x8a";  // U+240A SYMBOL FOR LINE FEED
    } else {
      out += c;
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
