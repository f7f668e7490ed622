// hedge/model/unicode.hpp: what the byte-level BPE pre-tokenizers ask of a code point (its
// category group and whether it is white space), and UTF-8 read and written as llama.cpp's
// unicode.cpp does, since the tokenizer must see the same code points llama.cpp sees:
//
//   - a lead byte's length comes from its high bits alone, the next bytes must be
//     continuation bytes (10xxxxxx) and present, and overlong forms are accepted (C0 80 is
//     U+0000); anything else is one byte of U+FFFD, the decoder moving on by one byte;
//   - a 4-byte form above U+10FFFF (leads F5..F7) is U+FFFD for its lead byte too: llama.cpp
//     decodes it and then aborts re-encoding it ("invalid codepoint"), so hedge cannot match
//     it and takes the nearest defined reading.
//
// Categories (\p{L}, \p{N}, ...) are Unicode 15.1's, as llama.cpp's tables; white space is
// the White_Space property (PropList.txt), 25 code points.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hedge/model/unicode_data.hpp"

namespace hedge::model::unicode {

/// A code point's general category group, one bit each (unicode_data.hpp's runs hold these).
enum category : std::uint8_t {
  undefined = 0x01,    ///< Cn, and anything past U+10FFFF
  number = 0x02,       ///< \p{N}
  letter = 0x04,       ///< \p{L}
  separator = 0x08,    ///< \p{Z}
  mark = 0x10,         ///< \p{M}
  punctuation = 0x20,  ///< \p{P}
  symbol = 0x40,       ///< \p{S}
  control = 0x80,      ///< \p{C}
};

inline constexpr std::uint32_t max_code_point = 0x10FFFF;
inline constexpr std::uint32_t replacement_character = 0xFFFD;

/// The category of `cpt`, by binary search over the runs.
constexpr category category_of(std::uint32_t cpt) noexcept {
  if (cpt > max_code_point) return undefined;
  std::size_t lo = 0, hi = sizeof category_runs / sizeof category_runs[0];
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if ((category_runs[mid] >> 8) <= cpt)
      lo = mid;
    else
      hi = mid;
  }
  return static_cast<category>(category_runs[lo] & 0xFF);
}

/// White_Space: U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
/// U+2029, U+202F, U+205F, U+3000.
constexpr bool is_whitespace(std::uint32_t cpt) noexcept {
  if (cpt < 0x80) return cpt == 0x20 || (cpt >= 0x09 && cpt <= 0x0D);
  return cpt == 0x85 || cpt == 0xA0 || cpt == 0x1680 || (cpt >= 0x2000 && cpt <= 0x200A) || cpt == 0x2028 ||
         cpt == 0x2029 || cpt == 0x202F || cpt == 0x205F || cpt == 0x3000;
}

/// What the pre-tokenizers test: the category bits and white space; all clear for a position
/// outside the text (llama.cpp's empty flags), so `any()` tells the two apart.
struct code_point_flags {
  std::uint8_t bits = 0;
  bool whitespace = false;

  [[nodiscard]] constexpr bool any() const noexcept { return bits != 0 || whitespace; }
  [[nodiscard]] constexpr bool is_letter() const noexcept { return (bits & letter) != 0; }
  [[nodiscard]] constexpr bool is_number() const noexcept { return (bits & number) != 0; }
};

namespace detail {

/// The flags of U+0000..U+007F, computed once at compile time (ASCII is most text).
struct ascii_flags_table {
  code_point_flags flags[128] = {};
  constexpr ascii_flags_table() noexcept {
    for (std::uint32_t c = 0; c < 128; ++c) flags[c] = {static_cast<std::uint8_t>(category_of(c)), is_whitespace(c)};
  }
};
inline constexpr ascii_flags_table ascii_flags{};

}  // namespace detail

constexpr code_point_flags flags_of(std::uint32_t cpt) noexcept {
  if (cpt < 128) return detail::ascii_flags.flags[cpt];
  return {static_cast<std::uint8_t>(category_of(cpt)), is_whitespace(cpt)};
}

/// One decoded code point and the bytes it took.
struct decoded {
  std::uint32_t cpt;
  std::uint32_t length;
};

/// Decodes the code point at `p` (`available` >= 1 bytes), as llama.cpp's
/// unicode_cpt_from_utf8 with its U+FFFD fallback (see the header comment).
constexpr decoded decode_utf8(const char* p, std::size_t available) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])); };
  const auto continuation = [&](std::size_t i) { return i < available && (byte(i) & 0xC0) == 0x80; };
  const std::uint32_t b0 = byte(0);
  if ((b0 & 0x80) == 0) return {b0, 1};
  if ((b0 & 0x40) == 0) return {replacement_character, 1};
  if ((b0 & 0x20) == 0) {
    if (!continuation(1)) return {replacement_character, 1};
    return {((b0 & 0x1F) << 6) | (byte(1) & 0x3F), 2};
  }
  if ((b0 & 0x10) == 0) {
    if (!continuation(1) || !continuation(2)) return {replacement_character, 1};
    return {((b0 & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F), 3};
  }
  if ((b0 & 0x08) == 0) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return {replacement_character, 1};
    const std::uint32_t cpt = ((b0 & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
    if (cpt > max_code_point) return {replacement_character, 1};
    return {cpt, 4};
  }
  return {replacement_character, 1};
}

/// Writes `cpt` (at most U+10FFFF) as UTF-8 into `out` (4 bytes of room); returns the length.
constexpr std::size_t encode_utf8(std::uint32_t cpt, char* out) noexcept {
  if (cpt < 0x80) {
    out[0] = static_cast<char>(cpt);
    return 1;
  }
  if (cpt < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cpt >> 6));
    out[1] = static_cast<char>(0x80 | (cpt & 0x3F));
    return 2;
  }
  if (cpt < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cpt >> 12));
    out[1] = static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cpt & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cpt >> 18));
  out[1] = static_cast<char>(0x80 | ((cpt >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cpt & 0x3F));
  return 4;
}

}  // namespace hedge::model::unicode
