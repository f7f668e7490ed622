// hedge/model/llama2c_tokenizer.hpp: llama2.c's tokenizer.bin (karpathy/llama2.c:
// tokenizer.py's export writes it, run.c's build_tokenizer reads it), as a vocabulary.
//
//   uint32 max_token_length
//   per token id, in order: float32 score | int32 length | length bytes (no terminator)
//
// Little-endian. The file does not store the vocabulary size (run.c takes it from the
// checkpoint): pass it, or 0 to take every entry up to the end of the file. Nor does it
// store piece types; they follow the export: id 0 is <unk> (unknown), ids 1 and 2 are BOS
// and EOS (control, written as "\n<s>\n" and "\n</s>\n"), pieces "<0xHH>" are byte
// fallbacks, the rest normal. The export wrote SentencePiece's ▁ back as a space, so the
// vocabulary does not escape spaces; its encode otherwise follows llama.cpp (which, on
// valid UTF-8, gives run.c's ids).
//
// The pieces are views of the buffer, which must outlive the vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "hedge/core/result.hpp"
#include "hedge/model/vocabulary.hpp"

namespace hedge::model {

namespace detail {

inline std::uint32_t load_u32_le(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

inline bool is_byte_piece(std::string_view s) noexcept {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return s.size() == 6 && s.substr(0, 3) == "<0x" && hex(s[3]) && hex(s[4]) && s[5] == '>';
}

}  // namespace detail

/// Reads a tokenizer.bin of `vocab_size` tokens (0: as many as the file holds).
inline result<vocabulary> read_llama2c_tokenizer(std::span<const std::byte> file, std::size_t vocab_size = 0) noexcept {
  if (file.size() < 4)
    return error{errc::parse_error} << "tokenizer.bin: " << file.size() << " bytes, too short for its 4-byte header";
  // One pass to validate every entry and count them; the build pass then reads without checks.
  std::size_t count = 0;
  std::size_t at = 4;
  while (at < file.size() && (vocab_size == 0 || count < vocab_size)) {
    if (file.size() - at < 8)
      return error{errc::parse_error} << "tokenizer.bin: token " << count << " at byte " << at << " is truncated (" << file.size() - at
                                      << " bytes left, its header needs 8)";
    const auto length = static_cast<std::int32_t>(detail::load_u32_le(file.data() + at + 4));
    if (length < 0)
      return error{errc::parse_error} << "tokenizer.bin: token " << count << " at byte " << at << " has length " << length;
    if (static_cast<std::size_t>(length) > file.size() - at - 8)
      return error{errc::parse_error} << "tokenizer.bin: token " << count << " at byte " << at << " has length " << length << ", past the end ("
                                      << file.size() - at - 8 << " bytes left)";
    at += 8 + static_cast<std::size_t>(length);
    ++count;
  }
  if (vocab_size != 0 && count < vocab_size)
    return error{errc::parse_error} << "tokenizer.bin: " << count << " tokens, the model's vocabulary has " << vocab_size;
  if (count == 0) return error{errc::parse_error} << "tokenizer.bin: no tokens after the header";

  vocabulary_settings settings;
  settings.escape_whitespace = false;
  std::size_t cursor = 4;
  return vocabulary::build(
      count,
      [&](std::size_t id) -> result<token_record> {
        token_record r;
        const std::uint32_t bits = detail::load_u32_le(file.data() + cursor);
        std::memcpy(&r.score, &bits, sizeof(float));
        const std::size_t length = detail::load_u32_le(file.data() + cursor + 4);
        r.piece = {reinterpret_cast<const char*>(file.data() + cursor + 8), length};
        cursor += 8 + length;
        r.type = id == 0                  ? token_type::unknown
                 : id == 1 || id == 2     ? token_type::control
                 : detail::is_byte_piece(r.piece) ? token_type::byte
                                                  : token_type::normal;
        return r;
      },
      settings);
}

}  // namespace hedge::model
