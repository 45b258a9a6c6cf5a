// UTF-8 (internal): which bytes of a string are well-formed characters. Names, paths and annotations are
// bytes; the tools' escaping of each output kind (tools/output.hpp) and the HDF5 layout's string
// attributes (base/h5.cpp) decide with this one decoder which bytes are text.
#ifndef CKPT_BASE_UTF8_HPP
#define CKPT_BASE_UTF8_HPP

#include <cstddef>
#include <string_view>

namespace ckpt::detail {

/// The length (1 to 4) of the well-formed UTF-8 character that starts at s[i], its code point in `cp`;
/// 0 when the bytes there are not one (Unicode, table 3-7: no overlong form, no surrogate, nothing above
/// U+10FFFF, no truncated sequence). `i` < s.size().
inline std::size_t utf8_char(std::string_view s, std::size_t i, char32_t& cp) noexcept {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = at(i);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;  // overlong
    if (b0 == 0xed) hi = 0x9f;  // surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;  // overlong
    if (b0 == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  char32_t c = b0 & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const unsigned char b = at(i + k);
    if ((b & 0xc0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3f);
  }
  cp = c;
  return n;
}

/// Whether every byte of `s` belongs to a well-formed UTF-8 character.
inline bool is_utf8(std::string_view s) noexcept {
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_char(s, i, cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace ckpt::detail

#endif  // CKPT_BASE_UTF8_HPP
