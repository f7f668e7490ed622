// hedge/model/pre_tokenizer.hpp: the pre-tokenizers of byte-level BPE vocabularies: text (as
// code points) cut into the words that merges stay within, chosen by tokenizer.ggml.pre.
//
// Each one is the regular expression of the model's tokenizer.json as llama.cpp runs it: not
// a regex engine but llama.cpp's hand-written matchers (unicode.cpp's
// unicode_regex_split_custom_*), whose few departures from the regex the ids depend on:
//
//   gpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2   llama3's with \p{N} for \p{N}{1,3}
//   smollm  \p{N} first (every digit a word of its own), then gpt2 within what is left
//
// The names llama.cpp gives each (llama_vocab::load): "llama-bpe", "llama3", "llama-v3" are
// llama3 (which also sets ignore_merges and add_bos); "qwen2", "deepseek-r1-qwen" qwen2;
// "gpt-2", "phi-2" gpt2; "smollm" smollm. Any other name is refused, by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hedge/model/unicode.hpp"

namespace hedge::model {

enum class pre_tokenizer : std::uint8_t { gpt2, llama3, qwen2, smollm };

constexpr std::string_view to_string(pre_tokenizer p) noexcept {
  switch (p) {
    case pre_tokenizer::gpt2: return "gpt2";
    case pre_tokenizer::llama3: return "llama3";
    case pre_tokenizer::qwen2: return "qwen2";
    case pre_tokenizer::smollm: return "smollm";
  }
  return "gpt2";
}

/// The pre-tokenizer a tokenizer.ggml.pre name selects; false where hedge has none for it.
constexpr bool pre_tokenizer_named(std::string_view name, pre_tokenizer& out) noexcept {
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return out = pre_tokenizer::llama3, true;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return out = pre_tokenizer::qwen2, true;
  if (name == "gpt-2" || name == "phi-2") return out = pre_tokenizer::gpt2, true;
  if (name == "smollm") return out = pre_tokenizer::smollm, true;
  return false;
}

/// The names pre_tokenizer_named accepts, for error messages.
inline constexpr std::string_view pre_tokenizer_names = "llama-bpe, llama3, llama-v3, qwen2, deepseek-r1-qwen, gpt-2, phi-2, smollm";

namespace detail {

/// One matcher run over cpts[begin, end): positions outside read as "no code point".
class word_splitter {
 public:
  static constexpr std::uint32_t out_of_range = 0xFFFFFFFFu;

  word_splitter(const std::uint32_t* cpts, std::size_t begin, std::size_t end) noexcept : cpts_(cpts), begin_(begin), end_(end) {}

  [[nodiscard]] std::uint32_t cpt(std::size_t pos) const noexcept { return pos >= begin_ && pos < end_ ? cpts_[pos] : out_of_range; }
  [[nodiscard]] unicode::code_point_flags flags(std::size_t pos) const noexcept {
    return pos >= begin_ && pos < end_ ? unicode::flags_of(cpts_[pos]) : unicode::code_point_flags{};
  }

  /// 's 't 're 've 'm 'll 'd at pos (ASCII case folded when `fold`); the length matched, or 0.
  [[nodiscard]] std::size_t contraction(std::size_t pos, bool fold) const noexcept {
    if (cpt(pos) != '\'' || pos + 1 >= end_) return 0;
    const auto lower = [fold](std::uint32_t c) { return fold && c >= 'A' && c <= 'Z' ? c + 32 : c; };
    const std::uint32_t next = lower(cpt(pos + 1));
    if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
    if (pos + 2 >= end_) return 0;
    const std::uint32_t after = lower(cpt(pos + 2));
    if ((next == 'r' && after == 'e') || (next == 'v' && after == 'e') || (next == 'l' && after == 'l')) return 3;
    return 0;
  }

  /// gpt2's matcher; `emit(begin, end)` gets each word.
  template <class Emit>
  void gpt2(Emit& emit) const {
    std::size_t pos = begin_;
    const auto add = [&](std::size_t end) {
      if (end > pos) emit(pos, end);
      pos = end;
    };
    while (pos < end_) {
      const std::uint32_t c = cpt(pos);
      if (const std::size_t n = contraction(pos, false)) {
        add(pos + n);
        continue;
      }
      std::size_t at = pos;
      unicode::code_point_flags f = c == ' ' ? flags(pos + 1) : flags(pos);
      if (f.is_letter() || f.is_number()) {
        const bool letter = f.is_letter();
        at += c == ' ';
        while (letter ? f.is_letter() : f.is_number()) f = flags(++at);
        add(at);
        continue;
      }
      if (!f.whitespace && f.any()) {
        at += c == ' ';
        while (!(f.whitespace || f.is_letter() || f.is_number()) && f.any()) f = flags(++at);
        add(at);
        continue;
      }
      add(pos + whitespace_run(pos));
    }
  }

  /// llama3's matcher (`digit_group` 3), or qwen2's (1).
  template <class Emit>
  void llama3(std::size_t digit_group, Emit& emit) const {
    std::size_t pos = begin_;
    const auto add = [&](std::size_t end) {
      if (end > pos) emit(pos, end);
      pos = end;
    };
    while (pos < end_) {
      const std::uint32_t c = cpt(pos);
      const unicode::code_point_flags f = flags(pos);
      if (const std::size_t n = contraction(pos, true)) {
        add(pos + n);
        continue;
      }
      // [^\r\n\p{L}\p{N}]?\p{L}+
      if (!(c == '\r' || c == '\n' || f.is_number()) && (f.is_letter() || flags(pos + 1).is_letter())) {
        std::size_t at = pos + 1;
        while (flags(at).is_letter()) ++at;
        add(at);
        continue;
      }
      // \p{N}{1,digit_group}
      if (f.is_number()) {
        std::size_t at = pos;
        while (flags(at).is_number()) {
          ++at;
          if (at - pos >= digit_group) add(at);
        }
        add(at);
        continue;
      }
      // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (llama.cpp tests the first code point's own flags for "any")
      unicode::code_point_flags f2 = c == ' ' ? flags(pos + 1) : f;
      if (!(f2.whitespace || f2.is_letter() || f2.is_number()) && f.any()) {
        std::size_t at = pos + (c == ' ');
        while (!(f2.whitespace || f2.is_letter() || f2.is_number()) && f2.any()) f2 = flags(++at);
        while (cpt(at) == '\r' || cpt(at) == '\n') ++at;
        add(at);
        continue;
      }
      // \s*[\r\n]+ : white space up to its last \r or \n
      std::size_t spaces = 0, last_newline_end = 0;
      while (flags(pos + spaces).whitespace) {
        const std::uint32_t w = cpt(pos + spaces);
        if (w == '\r' || w == '\n') last_newline_end = pos + spaces + 1;
        ++spaces;
      }
      if (last_newline_end > 0) {
        add(last_newline_end);
        continue;
      }
      add(pos + whitespace_run(pos));
    }
  }

 private:
  /// \s+(?!\S) | \s+ | one code point: the length of the word starting at pos.
  [[nodiscard]] std::size_t whitespace_run(std::size_t pos) const noexcept {
    std::size_t spaces = 0;
    while (flags(pos + spaces).whitespace) ++spaces;
    if (spaces > 1 && cpt(pos + spaces) != out_of_range) return spaces - 1;
    return spaces > 0 ? spaces : 1;
  }

  const std::uint32_t* cpts_;
  std::size_t begin_, end_;
};

}  // namespace detail

/// Cuts cpts[0, n) into words, in order: `emit(begin, end)` for each, as code point indices.
template <class Emit>
void split_words(pre_tokenizer kind, const std::uint32_t* cpts, std::size_t n, Emit&& emit) {
  switch (kind) {
    case pre_tokenizer::gpt2: detail::word_splitter(cpts, 0, n).gpt2(emit); return;
    case pre_tokenizer::llama3: detail::word_splitter(cpts, 0, n).llama3(3, emit); return;
    case pre_tokenizer::qwen2: detail::word_splitter(cpts, 0, n).llama3(1, emit); return;
    case pre_tokenizer::smollm:
      // \p{N} isolates each number code point; gpt2 runs within each piece.
      for (std::size_t begin = 0; begin < n;) {
        std::size_t end = begin + 1;
        if (!unicode::flags_of(cpts[begin]).is_number())
          while (end < n && !unicode::flags_of(cpts[end]).is_number()) ++end;
        detail::word_splitter(cpts, begin, end).gpt2(emit);
        begin = end;
      }
      return;
  }
}

}  // namespace hedge::model
