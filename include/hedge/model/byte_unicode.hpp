// hedge/model/byte_unicode.hpp: GPT-2's byte-to-unicode map (openai/gpt-2 encoder.py's
// bytes_to_unicode, as llama.cpp's unicode_byte_to_utf8): byte-level BPE vocabularies spell
// every byte as one printable code point, so that merges never see control bytes or spaces.
// The printable bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves;
// the other 68 bytes, in byte order, become U+0100, U+0101, ... U+0143 (space is U+0120 'Ġ',
// newline U+010A 'Ċ'). Every image is one or two UTF-8 bytes.
#pragma once

#include <cstdint>

namespace hedge::model::byte_unicode {

namespace detail {

constexpr bool stands_for_itself(unsigned b) noexcept {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/// Both directions, built at compile time.
struct tables {
  std::uint16_t to_code_point[256] = {};
  std::int16_t to_byte[0x144] = {};  ///< -1 where a code point is no byte's image

  constexpr tables() noexcept {
    for (auto& b : to_byte) b = -1;
    unsigned next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      const unsigned cpt = stands_for_itself(b) ? b : next++;
      to_code_point[b] = static_cast<std::uint16_t>(cpt);
      to_byte[cpt] = static_cast<std::int16_t>(b);
    }
  }
};

inline constexpr tables map{};

}  // namespace detail

/// The code point that spells byte `b`.
constexpr std::uint32_t code_point(unsigned char b) noexcept { return detail::map.to_code_point[b]; }

/// The byte that code point `cpt` spells, or -1 when it spells none.
constexpr int byte_of(std::uint32_t cpt) noexcept {
  return cpt < sizeof detail::map.to_byte / sizeof detail::map.to_byte[0] ? detail::map.to_byte[cpt] : -1;
}

/// Writes byte `b`'s code point as UTF-8 (1 or 2 bytes) into `out`; returns the length.
constexpr unsigned encode(unsigned char b, char* out) noexcept {
  const std::uint32_t cpt = code_point(b);
  if (cpt < 0x80) {
    out[0] = static_cast<char>(cpt);
    return 1;
  }
  out[0] = static_cast<char>(0xC0 | (cpt >> 6));
  out[1] = static_cast<char>(0x80 | (cpt & 0x3F));
  return 2;
}

}  // namespace hedge::model::byte_unicode
