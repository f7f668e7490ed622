// hedge/model/vocabulary.hpp: a tokenizer's vocabulary, SentencePiece (llama "SPM") or
// byte-level BPE (GPT-2's): per token id its piece, score and type, the special ids and
// flags, the end-of-generation set, a piece -> id lookup, and (BPE) the merge ranks.
//
// The pieces are views into the bytes they were read from (a GGUF's tokenizer.ggml.tokens
// array, a llama2.c tokenizer.bin): those bytes must outlive the vocabulary. What the
// vocabulary owns it allocates once, at build time, or takes from memory the caller lends
// (then no heap): one record per token and an open-addressing hash table of 2^k slots (k
// the least with 2^k >= 2 * tokens), so a lookup in the encoder's hot loop hashes the
// candidate bytes and compares a few pieces, with no heap. Loading follows llama.cpp's llama_vocab::load (src/llama-vocab.cpp):
// when two ids share a piece, the lookup answers the higher id, and an empty piece is
// never found. Its name-based fix-ups are kept too, since ids and text depend on them:
// the known end markers (end_markers below) are end-of-generation tokens and count as
// control tokens whatever type the file gives them (so text never matches them unless
// parse_special, and decode renders them only with unparse_special); the EOS, EOT and EOM
// ids join the end-of-generation set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <string_view>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/model/bpe_merges.hpp"
#include "hedge/model/pre_tokenizer.hpp"

namespace hedge::model {

/// A token id; -1 (`no_token`) where a vocabulary has none (e.g. no unknown token).
using token_id = std::int32_t;
inline constexpr token_id no_token = -1;

/// SentencePiece's piece types, numbered as GGUF's tokenizer.ggml.token_type stores them.
enum class token_type : std::uint8_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

/// One token as a reader hands it to `vocabulary::build`.
struct token_record {
  std::string_view piece;
  float score = 0.0f;
  token_type type = token_type::normal;
};

/// tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE).
enum class tokenizer_model : std::uint8_t { spm, bpe };

/// The special ids and flags of a vocabulary; the defaults are llama.cpp's for
/// tokenizer.ggml.model "llama" when the GGUF has no key for them.
struct vocabulary_settings {
  tokenizer_model model = tokenizer_model::spm;
  /// BPE only: how text is cut into words before the merges.
  pre_tokenizer pre = pre_tokenizer::gpt2;
  /// BPE only: a word that is a token is that token, merges or not (llama3's pre-tokenizer).
  bool ignore_merges = false;
  /// BPE only: decoding a whole text tidies spaces before punctuation and contractions
  /// (Hugging Face's clean_up_tokenization_spaces, as llama.cpp's detokenize applies it):
  /// set for gpt2 and llama3 files, not for qwen2 and smollm ones.
  bool clean_spaces = false;
  token_id bos = 1;
  token_id eos = 2;
  token_id unk = 0;
  token_id eot = no_token;  ///< end of turn (tokenizer.ggml.eot_token_id)
  token_id eom = no_token;  ///< end of message (tokenizer.ggml.eom_token_id)
  bool add_bos = true;
  bool add_eos = false;
  /// Prefix a space to the text (and to the text after a user-defined token).
  bool add_space_prefix = true;
  /// White space after a special piece other than <unk>, <s> and <|endoftext|> is dropped
  /// when splitting text at special pieces: llama.cpp sets this (its RSTRIP attribute) for
  /// models named Phi-3 (general.name holding "phi-3" or "phi3"), whose chat markup it fits.
  bool strip_after_special = false;
  /// Spaces are U+2581 (▁) in the pieces: true for a GGUF SPM vocabulary; false for
  /// llama2.c's tokenizer.bin, whose export wrote them back as spaces, and for BPE.
  bool escape_whitespace = true;
};

/// The pieces llama.cpp treats as end of generation by name: llama_vocab::load's list, with
/// Qwen's fill-in-the-middle pad, repository and file separators. (llama.cpp drops <|end|>
/// again where <|return|> and <|call|> are present, and </s> where <|tool_response> is:
/// vocabularies of families hedge does not run.)
inline constexpr std::string_view end_markers[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
    "<eos>", "<turn|>", "<|tool_response>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
    "<|fim_pad|>", "<|fim_repo|>", "<|repo_name|>", "<|file_sep|>"};

namespace detail {

/// FNV-1a, 64-bit: short pieces, one pass, no tables.
constexpr std::uint64_t piece_hash(std::string_view s) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace detail

class vocabulary {
 public:
  /// The most tokens a vocabulary holds: ids fit token_id, the hash table's 2^k slots fit uint32.
  static constexpr std::size_t max_tokens = std::size_t{1} << 30;

  vocabulary() noexcept = default;

  /// Bytes a vocabulary of `count` tokens keeps (its records, hash table, special-token
  /// order and end-of-generation set, each 64-byte aligned): what `build` allocates, or
  /// needs from the caller's memory. SIZE_MAX where the count overflows it.
  static constexpr std::size_t memory_bytes(std::size_t count) noexcept {
    if (count > (SIZE_MAX / 2) / (sizeof(token_record) + 4 * sizeof(std::uint32_t))) return SIZE_MAX;
    const memory_layout m = lay_out(count);
    return m.end;
  }

  /// Builds a vocabulary of `count` tokens, `token_at(i)` giving id i's record (a
  /// result<token_record>). Special ids outside [0, count) are disabled (no_token), as
  /// llama.cpp does. Allocates memory_bytes(count), once.
  template <class TokenAt>
  static result<vocabulary> build(std::size_t count, TokenAt&& token_at, vocabulary_settings settings,
                                  bpe_merges merges = {}) noexcept {
    if (count > max_tokens) return error{errc::unsupported} << "vocabulary of " << count << " tokens exceeds " << max_tokens;
    auto owned = heap_storage<std::byte>::make(memory_bytes(count));
    if (!owned) return owned.error();
    auto v = build(count, token_at, settings, std::move(merges), owned->span());
    if (v) v->owned_ = std::move(*owned);
    return v;
  }

  /// As above, in the caller's `memory` (memory_bytes(count) bytes, 64-byte aligned), which
  /// must outlive the vocabulary: no heap (a firmware image's static array).
  template <class TokenAt>
  static result<vocabulary> build(std::size_t count, TokenAt&& token_at, vocabulary_settings settings,
                                  bpe_merges merges, std::span<std::byte> memory) noexcept {
    if (count == 0) return error{errc::parse_error} << "vocabulary has no tokens";
    if (count > max_tokens) return error{errc::unsupported} << "vocabulary of " << count << " tokens exceeds " << max_tokens;
    if (memory.size() < memory_bytes(count))
      return error{errc::capacity_exceeded} << "vocabulary of " << count << " tokens in " << memory.size()
                                            << " bytes: it needs " << memory_bytes(count);
    if (reinterpret_cast<std::uintptr_t>(memory.data()) % cache_line_bytes != 0)
      return error{errc::misaligned} << "vocabulary memory is not " << cache_line_bytes << "-byte aligned";
    const memory_layout m = lay_out(count);
    vocabulary v;
    auto* records = reinterpret_cast<token_record*>(memory.data() + m.records);
    for (std::size_t i = 0; i < count; ++i) ::new (static_cast<void*>(records + i)) token_record{};
    v.records_ = {records, count};
    v.table_ = {reinterpret_cast<std::uint32_t*>(memory.data() + m.table), m.slots};
    v.special_order_ = {reinterpret_cast<std::uint32_t*>(memory.data() + m.special_order), 0};
    v.end_of_generation_ = {reinterpret_cast<token_id*>(memory.data() + m.end_of_generation), 0};
    for (auto& slot : v.table_) slot = empty_slot;
    for (std::size_t i = 0; i < count; ++i) {
      result<token_record> r = token_at(i);
      if (!r) return r.error();
      if (static_cast<std::uint8_t>(r->type) > static_cast<std::uint8_t>(token_type::byte)) r->type = token_type::undefined;
      if (is_end_marker(r->piece)) {
        r->type = token_type::control;
        ++v.end_of_generation_count_;
      }
      v.records_.data()[i] = *r;
      v.max_piece_ = v.max_piece_ < r->piece.size() ? r->piece.size() : v.max_piece_;
      if (!r->piece.empty()) v.insert(static_cast<std::uint32_t>(i));
      if (is_special(r->type) && !r->piece.empty()) ++v.special_;
      if (r->type == token_type::user_defined && !r->piece.empty()) ++v.user_defined_;
    }
    auto disable = [count](token_id& id) {
      if (id < 0 || static_cast<std::size_t>(id) >= count) id = no_token;
    };
    disable(settings.bos);
    disable(settings.eos);
    disable(settings.unk);
    disable(settings.eot);
    disable(settings.eom);
    v.settings_ = settings;
    v.merges_ = std::move(merges);
    if (auto r = v.collect_end_of_generation(); !r) return r.error();
    // Byte fallback as llama.cpp's byte_to_token: the piece "<0xHH>", else the byte
    // itself as a piece; where neither exists, the unknown token.
    for (unsigned b = 0; b < 256; ++b) {
      static constexpr char hex[] = "0123456789ABCDEF";
      const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
      token_id id = v.find(std::string_view{name, 6});
      if (id == no_token) {
        const char raw = static_cast<char>(b);
        id = v.find(std::string_view{&raw, 1});
      }
      v.byte_tokens_[b] = id == no_token ? v.settings_.unk : id;
    }
    v.special_order_ = {v.special_order_.data(), v.special_};
    v.sort_special();
    const std::string_view space = v.space_piece();
    v.space_is_token_ = v.find(space) != no_token;
    v.splits_at_spaces_ = true;
    for (std::size_t id = 0; id < count && v.splits_at_spaces_; ++id) {
      const std::string_view piece = v.records_.data()[id].piece;
      if (piece.find(space, 1) == std::string_view::npos) continue;
      for (std::size_t at = 0; at < piece.size(); at += space.size())
        if (piece.substr(at, space.size()) != space) v.splits_at_spaces_ = false;
    }
    return v;
  }

  [[nodiscard]] std::size_t size() const noexcept { return records_.size(); }
  [[nodiscard]] const vocabulary_settings& settings() const noexcept { return settings_; }
  [[nodiscard]] bool contains(token_id id) const noexcept { return id >= 0 && static_cast<std::size_t>(id) < size(); }
  /// Id's piece, score and type; `id` must be in range (`contains`).
  [[nodiscard]] const token_record& operator[](token_id id) const noexcept { return records_.data()[id]; }
  /// Bytes of the longest piece: a longer candidate is not looked up.
  [[nodiscard]] std::size_t max_piece_bytes() const noexcept { return max_piece_; }

  /// The id whose piece is exactly `piece` (the highest such id), or no_token.
  [[nodiscard]] token_id find(std::string_view piece) const noexcept {
    if (piece.empty() || piece.size() > max_piece_) return no_token;
    const std::size_t mask = table_.size() - 1;
    for (std::size_t slot = detail::piece_hash(piece) & mask;; slot = (slot + 1) & mask) {
      const std::uint32_t id = table_.data()[slot];
      if (id == empty_slot) return no_token;
      if (records_.data()[id].piece == piece) return static_cast<token_id>(id);
    }
  }

  /// The byte-fallback token of byte b (no_token when the vocabulary has none and no unknown token).
  [[nodiscard]] token_id byte_token(unsigned char b) const noexcept { return byte_tokens_[b]; }

  /// Whether a space (escaped or not) is one token: then every space costs at most one id.
  [[nodiscard]] bool space_is_token() const noexcept { return space_is_token_; }

  /// The piece of one space: "▁" (U+2581) when spaces are escaped, else " ".
  [[nodiscard]] std::string_view space_piece() const noexcept {
    return settings_.escape_whitespace ? std::string_view{"\xE2\x96\x81"} : std::string_view{" "};
  }

  /// Whether no piece holds a space after something other than spaces (SentencePiece's
  /// default split_by_whitespace): then no merge crosses into a space that follows another
  /// character, and the encoder merges each such word apart, in cache.
  [[nodiscard]] bool splits_at_spaces() const noexcept { return splits_at_spaces_; }

  /// Control, user-defined and unknown tokens, longest piece first, ties by id: the tokens
  /// llama.cpp's tokenizer_st_partition splits out of the text before the merges (the
  /// user-defined ones always, the others only with parse_special).
  [[nodiscard]] std::span<const std::uint32_t> special_order() const noexcept { return special_order_; }
  /// Whether any piece is user-defined (split out of text even without parse_special).
  [[nodiscard]] bool has_user_defined() const noexcept { return user_defined_ > 0; }

  /// The end-of-generation tokens, ascending: the end markers, EOS, EOT and EOM.
  [[nodiscard]] std::span<const token_id> end_of_generation() const noexcept { return end_of_generation_; }
  [[nodiscard]] bool is_end_of_generation(token_id id) const noexcept {
    for (const token_id e : end_of_generation_)
      if (e == id) return true;
    return false;
  }

  /// The merge ranks (empty for SentencePiece).
  [[nodiscard]] const bpe_merges& merges() const noexcept { return merges_; }

  /// Whether text holds `type`'s pieces as tokens of their own before any merge.
  static constexpr bool is_special(token_type type) noexcept {
    return type == token_type::control || type == token_type::user_defined || type == token_type::unknown;
  }

 private:
  static constexpr std::uint32_t empty_slot = 0xFFFFFFFFu;

  static constexpr bool is_end_marker(std::string_view piece) noexcept {
    for (const std::string_view m : end_markers)
      if (piece == m) return true;
    return false;
  }

  /// Offsets of a vocabulary's arrays in its memory: records, hash table (2^k slots, k the
  /// least with 2^k >= 2 count), special-token order (at most count) and end-of-generation
  /// set (the end markers, at most count, and EOS, EOT, EOM).
  struct memory_layout {
    std::size_t slots, records, table, special_order, end_of_generation, end;
  };
  static constexpr memory_layout lay_out(std::size_t count) noexcept {
    const auto aligned = [](std::size_t n) { return (n + cache_line_bytes - 1) / cache_line_bytes * cache_line_bytes; };
    memory_layout m{};
    m.slots = 1;
    while (m.slots < 2 * count) m.slots *= 2;
    m.records = 0;
    m.table = aligned(m.records + count * sizeof(token_record));
    m.special_order = aligned(m.table + m.slots * sizeof(std::uint32_t));
    m.end_of_generation = aligned(m.special_order + count * sizeof(std::uint32_t));
    m.end = m.end_of_generation + (count + 3) * sizeof(token_id);
    return m;
  }

  /// The end markers found at build time, then EOS, EOT and EOM where not among them, in
  /// end_of_generation_'s room (end_of_generation_count_ + 3 ids).
  result<void> collect_end_of_generation() noexcept {
    token_id* set = end_of_generation_.data();
    std::size_t n = 0;
    for (std::size_t id = 0; id < size() && n < end_of_generation_count_; ++id)
      if (is_end_marker(records_[id].piece)) set[n++] = static_cast<token_id>(id);
    for (const token_id id : {settings_.eos, settings_.eot, settings_.eom}) {
      if (id == no_token) continue;
      std::size_t at = 0;
      while (at < n && set[at] != id) ++at;
      if (at < n) continue;
      while (at > 0 && set[at - 1] > id) {
        set[at] = set[at - 1];
        --at;
      }
      set[at] = id;
      ++n;
    }
    end_of_generation_ = {set, n};
    return {};
  }

  /// Inserts id; a later id with the same piece replaces the earlier (llama.cpp's token_to_id map).
  void insert(std::uint32_t id) noexcept {
    const std::string_view piece = records_.data()[id].piece;
    const std::size_t mask = table_.size() - 1;
    for (std::size_t slot = detail::piece_hash(piece) & mask;; slot = (slot + 1) & mask) {
      std::uint32_t& entry = table_.data()[slot];
      if (entry == empty_slot || records_.data()[entry].piece == piece) {
        entry = id;
        return;
      }
    }
  }

  /// Insertion sort by (piece length descending, id ascending): special tokens are few (a
  /// few hundred in Llama 3's and Qwen's vocabularies).
  void sort_special() noexcept {
    std::size_t n = 0;
    for (std::size_t id = 0; id < size(); ++id) {
      const token_record& r = records_.data()[id];
      if (!is_special(r.type) || r.piece.empty()) continue;
      std::size_t at = n++;
      while (at > 0 && records_.data()[special_order_.data()[at - 1]].piece.size() < r.piece.size()) {
        special_order_.data()[at] = special_order_.data()[at - 1];
        --at;
      }
      special_order_.data()[at] = static_cast<std::uint32_t>(id);
    }
  }

  std::span<token_record> records_;
  std::span<std::uint32_t> table_;
  std::span<std::uint32_t> special_order_;
  std::span<token_id> end_of_generation_;
  heap_storage<std::byte> owned_;  ///< the arrays above, unless the caller lent their memory
  bpe_merges merges_;
  vocabulary_settings settings_{};
  std::size_t max_piece_ = 0;
  std::size_t special_ = 0;
  std::size_t user_defined_ = 0;
  std::size_t end_of_generation_count_ = 0;
  token_id byte_tokens_[256] = {};
  bool space_is_token_ = false;
  bool splits_at_spaces_ = false;
};

}  // namespace hedge::model
