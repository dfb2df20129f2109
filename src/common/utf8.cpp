#include "common/utf8.hpp"

namespace sempi {

std::size_t utf8_valid_prefix(std::string_view text, std::size_t at, std::size_t& length) {
  const auto byte = [&text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  unsigned char second_min = 0x80;  // the second byte's range narrows for some lead bytes
  unsigned char second_max = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) second_min = 0xa0;  // no overlong forms
    if (lead == 0xed) second_max = 0x9f;  // no surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) second_min = 0x90;
    if (lead == 0xf4) second_max = 0x8f;  // nothing past U+10FFFF
  } else {
    length = 1;
    return 0;
  }
  std::size_t n = 1;
  while (n < length && at + n < text.size()) {
    const unsigned char b = byte(at + n);
    const bool fits = n == 1 ? b >= second_min && b <= second_max : b >= 0x80 && b <= 0xbf;
    if (!fits) break;
    ++n;
  }
  return n;
}

bool is_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    if (utf8_valid_prefix(text, i, length) != length || length == 0) return false;
    i += length;
  }
  return true;
}

}  // namespace sempi
