// hedge/model/tokenizer.hpp: encode and decode over a vocabulary, SentencePiece BPE (llama
// "SPM") or byte-level BPE (GPT-2's, tokenizer.ggml.model "gpt2"), giving the ids llama.cpp
// gives (llama_tokenize).
//
// Encode, as llama.cpp's llama_vocab::impl::tokenize (src/llama-vocab.cpp):
//   1. Special pieces are split out of the text first, longest piece first, each occurrence
//      becoming its id: user-defined pieces always, control and unknown ones (such as "<s>",
//      "<|eot_id|>") only with parse_special; without it they are plain text.
// SentencePiece fragments then go as llm_tokenizer_spm_session:
//   2. Each remaining fragment gets a leading space when add_space_prefix is set and it
//      starts the text or follows a special piece; spaces become U+2581 (▁).
//   3. The fragment is cut into symbols of one UTF-8 character each, the length taken from
//      the lead byte alone (a lone lead byte takes the next bytes, whatever they are).
//   4. Repeatedly, the adjacent pair whose concatenation is a piece with the highest score
//      merges, the leftmost on equal scores; any piece of the vocabulary may be a merge
//      result, control pieces included.
//   5. Each final symbol is its piece's id, or else one byte-fallback id (<0xHH>) per byte.
// Byte-level BPE fragments as llm_tokenizer_bpe_session:
//   2. The fragment is read as code points (unicode.hpp: llama.cpp's reading, U+FFFD for
//      bytes that are not UTF-8) and cut into words by the vocabulary's pre-tokenizer
//      (pre_tokenizer.hpp).
//   3. Each word is written back as UTF-8 and each byte spelled as its GPT-2 code point
//      (byte_unicode.hpp); with ignore_merges, a word that is a token is that token.
//   4. The word's symbols (one per byte) merge pair by pair, the pair of lowest merge rank
//      first, the leftmost on equal ranks (bpe_merges.hpp).
//   5. Each final symbol is its piece's id; one that is none becomes the ids of its single
//      bytes that are pieces (the others are dropped, as llama.cpp drops them).
// BOS first and EOS last when asked (add_special) and the vocabulary's add_bos/add_eos say so.
//
// Cost: O(n log n) for n bytes. Pairs live in an indexed binary heap (merge_heap.hpp), one
// entry per symbol (the pair it starts), so the heap never holds stale pairs and its size
// is bounded by the symbols; a candidate longer than the vocabulary's longest piece (or
// merge) is never hashed. Special pieces cost a search of the text each, as llama.cpp's.
// `encode` with a caller workspace of `workspace_bytes(n)` bytes touches no heap.
//
// Decode, as llama.cpp's token_to_piece and detokenize: normal pieces with ▁ as a space
// (SPM) or each code point as the byte it spells (BPE), byte tokens as their byte,
// user-defined pieces as they are, control and unknown pieces only when unparse_special is
// set, unused ones never; with add_space_prefix, the first piece's leading space is dropped
// unless the ids start with a BOS that remove_special removes (llama.cpp keeps the space
// there); a whole text of a clean_spaces vocabulary is then tidied (detail::clean_spaces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/model/byte_unicode.hpp"
#include "hedge/model/merge_heap.hpp"
#include "hedge/model/pre_tokenizer.hpp"
#include "hedge/model/unicode.hpp"
#include "hedge/model/vocabulary.hpp"

namespace hedge::model {

struct encode_options {
  /// BOS (and EOS) as the vocabulary's add_bos / add_eos say: llama_tokenize's add_special.
  bool add_special = true;
  /// Control and unknown pieces in the text ("<|im_start|>", "<s>") become their ids:
  /// llama_tokenize's parse_special. Off, they are text like any other.
  bool parse_special = false;
};

/// How one token renders (tokenizer::visit_piece).
struct piece_options {
  /// Drop one leading space (the first piece of a text when add_space_prefix is set).
  bool strip_leading_space = false;
  /// Render control and unknown pieces instead of dropping them.
  bool unparse_special = false;
};

struct decode_options {
  /// Drop a leading BOS (when add_bos) and a trailing EOS (when add_eos).
  bool remove_special = false;
  /// Render control and unknown pieces ("<s>", "</s>", "<unk>") instead of dropping them.
  bool unparse_special = false;
};

namespace detail {

/// UTF-8 sequence length from the lead byte's high nibble, as llama.cpp's unicode_len_utf8:
/// continuation bytes and ASCII count 1, 0xC_/0xD_ 2, 0xE_ 3, 0xF_ 4.
constexpr std::size_t utf8_lead_length(unsigned char lead) noexcept {
  constexpr unsigned char lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lengths[lead >> 4];
}

/// One symbol of the merge loop: a run of the escaped text, linked to its neighbours.
struct spm_symbol {
  std::uint32_t offset;
  std::uint32_t length;  ///< 0 once merged into its left neighbour
  std::int32_t prev;
  std::int32_t next;
  token_id pair_token;   ///< the pair's id
  token_id token;        ///< this symbol's id once it is a merge result, else no_token
  std::uint32_t heap_slot;
};

/// A heap slot: the pair (symbol, its next) and the pair's score, kept here so comparisons
/// read the heap array alone (the symbols are scattered: at 1 MB they outgrow the caches).
struct spm_pair {
  float score;
  std::uint32_t symbol;
  /// Higher pair score first, then the leftmost pair.
  static bool before(const spm_pair& a, const spm_pair& b) noexcept {
    return a.score > b.score || (a.score == b.score && a.symbol < b.symbol);
  }
};

/// One symbol of the byte-level BPE merge loop: a run of the spelled word.
struct bpe_symbol {
  std::uint32_t offset;
  std::uint32_t length;  ///< 0 once merged into its left neighbour
  std::int32_t prev;
  std::int32_t next;
  std::uint32_t heap_slot;
};

/// A heap slot of the BPE loop: the pair (symbol, its next) and its merge rank.
struct bpe_pair {
  std::int32_t rank;
  std::uint32_t symbol;
  /// Lower rank first, then the leftmost pair (llama.cpp's llm_bigram_bpe::comparator).
  static bool before(const bpe_pair& a, const bpe_pair& b) noexcept {
    return a.rank < b.rank || (a.rank == b.rank && a.symbol < b.symbol);
  }
};


/// 8-byte aligned offset.
constexpr std::size_t align8(std::size_t n) noexcept { return (n + 7) & ~std::size_t{7}; }

/// A byte-level BPE piece's bytes, as llama.cpp's llama_decode_text: each code point the byte
/// it spells; one that spells none becomes "[UNK_BYTE_0x" + its UTF-8 in hex + the piece + "]".
template <class Emit>
void spelled_bytes(std::string_view piece, Emit& emit) {
  char run[64];
  std::size_t n = 0;
  for (std::size_t at = 0; at < piece.size();) {
    const unicode::decoded d = unicode::decode_utf8(piece.data() + at, piece.size() - at);
    at += d.length;
    const int b = byte_unicode::byte_of(d.cpt);
    if (b >= 0) {
      run[n++] = static_cast<char>(b);
      if (n == sizeof run) emit(std::string_view{run, n}), n = 0;
      continue;
    }
    if (n > 0) emit(std::string_view{run, n}), n = 0;
    char utf8[4];
    const std::size_t length = unicode::encode_utf8(d.cpt, utf8);
    emit("[UNK_BYTE_0x");
    for (std::size_t i = 0; i < length; ++i) {
      static constexpr char hex[] = "0123456789abcdef";
      const auto u = static_cast<unsigned char>(utf8[i]);
      const char digits[2] = {hex[u >> 4], hex[u & 15]};
      emit(std::string_view{digits, 2});
    }
    emit(piece);
    emit("]");
  }
  if (n > 0) emit(std::string_view{run, n});
}

/// llama.cpp's detokenize clean-up of a whole text (clean_spaces), in place over text[0, n);
/// returns the new length. Three passes, as llama.cpp runs them: drop the space before
/// ? ! . , ; drop the spaces around a lone ' (" ' " -> "'"); drop the space before 's 'm
/// 're 've (" 's" -> "'s", " 't" kept).
inline std::size_t clean_spaces(char* text, std::size_t n) noexcept {
  if (n == 0) return 0;
  std::size_t total = 1;
  for (std::size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  n = total;
  total = 1;
  for (std::size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  n = total;
  total = 1;
  for (std::size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < n) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  return total;
}

/// Renders one token as llama.cpp's token_to_piece, handing `out` the bytes in one or more
/// segments (a normal piece's ▁ become " " segments). Returns false for an id out of range.
template <class Out>
bool visit_piece(const vocabulary& vocab, token_id id, bool strip_leading_space, bool unparse_special, Out&& out) {
  if (!vocab.contains(id)) return false;
  const token_record& r = vocab[id];
  std::string_view piece = r.piece;
  auto emit = [&](std::string_view s) {
    if (strip_leading_space && !s.empty()) {
      if (s.front() == ' ') s.remove_prefix(1);
      strip_leading_space = false;
    }
    if (!s.empty()) out(s);
  };
  switch (r.type) {
    case token_type::unknown:
    case token_type::control:
      if (unparse_special) emit(piece);
      return true;
    case token_type::user_defined: emit(piece); return true;
    case token_type::normal: {
      if (vocab.settings().model == tokenizer_model::bpe) {
        spelled_bytes(piece, emit);
        return true;
      }
      if (!vocab.settings().escape_whitespace) {
        emit(piece);
        return true;
      }
      constexpr std::string_view escaped_space = "\xE2\x96\x81";
      for (;;) {
        const std::size_t at = piece.find(escaped_space);
        if (at == std::string_view::npos) break;
        emit(piece.substr(0, at));
        emit(" ");
        piece.remove_prefix(at + escaped_space.size());
      }
      emit(piece);
      return true;
    }
    case token_type::byte: {
      // "<0xHH>": the two hex digits after "<0x", read as strtol reads them.
      unsigned value = 0;
      for (std::size_t i = 3; i < 5 && i < piece.size(); ++i) {
        const char c = piece[i];
        const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (digit < 0) break;
        value = value * 16 + static_cast<unsigned>(digit);
      }
      const char byte = static_cast<char>(value);
      emit(std::string_view{&byte, 1});
      return true;
    }
    case token_type::unused:
    case token_type::undefined: return true;
  }
  return true;
}

}  // namespace detail

class tokenizer {
 public:
  tokenizer() noexcept = default;
  explicit tokenizer(vocabulary vocab) noexcept : vocab_(std::move(vocab)) {}

  [[nodiscard]] const vocabulary& vocab() const noexcept { return vocab_; }

  /// The most input bytes one encode takes: symbol offsets and links are 32-bit.
  static constexpr std::size_t max_text_bytes = (std::size_t{1} << 31) / 6 - 2;

  /// Workspace bytes `encode` needs for a text of `text_bytes` bytes (any alignment), for
  /// either kind of vocabulary. SentencePiece: the escaped fragment (3 bytes per input byte
  /// at most) and two symbols and heap slots per input byte (a space after a lone lead byte
  /// loses its first byte to that lead's symbol and leaves two one-byte symbols), 67 bytes
  /// per input byte. Byte-level BPE: a code point, the spelled word (6 bytes: a byte read
  /// as U+FFFD is 3 bytes, each spelled in 2) and three symbols and heap slots per input
  /// byte (one per byte of the word before spelling), 94 bytes per input byte.
  static constexpr std::size_t workspace_bytes(std::size_t text_bytes) noexcept {
    const std::size_t n = (text_bytes > max_text_bytes ? max_text_bytes : text_bytes) + 1;
    const std::size_t spm =
        detail::align8(3 * n) + detail::align8(2 * n * sizeof(detail::spm_symbol)) + 2 * n * sizeof(detail::spm_pair);
    const std::size_t bpe = detail::align8(4 * n) + detail::align8(6 * n) + detail::align8(3 * n * sizeof(detail::bpe_symbol)) +
                            3 * n * sizeof(detail::bpe_pair);
    return 8 + (spm > bpe ? spm : bpe);
  }

  /// The most ids `encode` writes for a text of `text_bytes` bytes with `options`, plus BOS
  /// and EOS. SentencePiece: prefix spaces (one per fragment: there are several only where
  /// special pieces split the text) counted as bytes, every id covers at
  /// least one byte of the escaped text, at most 3 bytes per input byte; when ▁ is a piece,
  /// at most 2 ids per input byte (a space only splits into byte tokens behind a lone lead
  /// byte). Byte-level BPE: an id covers at least one byte of the spelled text, at most 6
  /// per input byte.
  [[nodiscard]] std::size_t max_tokens(std::size_t text_bytes, encode_options options = {}) const noexcept {
    if (vocab_.settings().model == tokenizer_model::bpe) return 6 * text_bytes + 2;
    const std::size_t per_byte = vocab_.space_is_token() ? 2 : 3;
    const bool splits = options.parse_special ? !vocab_.special_order().empty() : vocab_.has_user_defined();
    const std::size_t fragments = splits ? text_bytes + 1 : 1;
    return (text_bytes + fragments) * per_byte + 2;
  }

  /// Encodes `text` into `out` using `workspace` (workspace_bytes(text.size()) bytes);
  /// returns the number of ids written. No heap.
  result<std::size_t> encode(std::string_view text, std::span<token_id> out, std::span<std::byte> workspace,
                             encode_options options = {}) const noexcept {
    if (vocab_.size() == 0) return error{errc::invalid_argument} << "encode: the tokenizer has no vocabulary";
    if (text.size() > max_text_bytes)
      return error{errc::capacity_exceeded} << "encode: text of " << text.size() << " bytes exceeds the limit of "
                                            << max_text_bytes;
    if (workspace.size() < workspace_bytes(text.size()))
      return error{errc::capacity_exceeded} << "encode: workspace of " << workspace.size() << " bytes, text of "
                                            << text.size() << " bytes needs " << workspace_bytes(text.size());
    session s{vocab_, text, out, workspace, options.parse_special};
    const vocabulary_settings& st = vocab_.settings();
    if (options.add_special && st.add_bos) {
      if (st.bos == no_token) return error{errc::invalid_argument} << "encode: add_bos is set but the vocabulary has no BOS";
      if (auto r = s.emit(st.bos); !r) return r.error();
    }
    if (!text.empty()) {
      bool prev_special = true;
      if (auto r = s.partition(0, text.size(), 0, prev_special); !r) return r.error();
    }
    if (options.add_special && st.add_eos) {
      if (st.eos == no_token) return error{errc::invalid_argument} << "encode: add_eos is set but the vocabulary has no EOS";
      if (auto r = s.emit(st.eos); !r) return r.error();
    }
    return s.written;
  }

  /// Encodes `text`, allocating the workspace and the result.
  result<std::vector<token_id>> encode(std::string_view text, encode_options options = {}) const {
    auto workspace = heap_storage<std::byte>::make(workspace_bytes(text.size()));
    if (!workspace) return workspace.error();
    std::vector<token_id> ids(max_tokens(text.size(), options));
    auto n = encode(text, ids, workspace->span(), options);
    if (!n) return n.error();
    ids.resize(*n);
    return ids;
  }

  /// The most bytes of text one id covers: an id covers at most its piece of the escaped text,
  /// which is no shorter than the text (a byte-fallback id covers one byte, an unknown one at
  /// most a 4-byte character). So a text of n bytes makes at least n / max_bytes_per_id() ids.
  [[nodiscard]] std::size_t max_bytes_per_id() const noexcept {
    return vocab_.max_piece_bytes() > 4 ? vocab_.max_piece_bytes() : 4;
  }

  /// Encodes `text` if it makes at most `max_ids` ids, else capacity_exceeded; the memory is
  /// bounded by max_ids, not by the text: a text that must make more ids (over
  /// max_ids * max_bytes_per_id() bytes) is refused before any work.
  result<std::vector<token_id>> encode_at_most(std::string_view text, std::size_t max_ids,
                                               encode_options options = {}) const {
    if (text.size() / max_bytes_per_id() > max_ids)
      return error{errc::capacity_exceeded} << "encode: text of " << text.size() << " bytes makes more than " << max_ids
                                            << " ids";
    auto ids = encode(text, options);
    if (ids && ids->size() > max_ids)
      return error{errc::capacity_exceeded} << "encode: text of " << text.size() << " bytes makes " << ids->size()
                                            << " ids, more than " << max_ids;
    return ids;
  }

  /// Calls `out(std::string_view)` with the bytes token `id` renders to, in one or more
  /// segments (llama.cpp's token_to_piece); an id out of range is an error.
  template <class Out>
  result<void> visit_piece(token_id id, Out&& out, piece_options options = {}) const {
    if (!detail::visit_piece(vocab_, id, options.strip_leading_space, options.unparse_special, out))
      return error{errc::out_of_range} << "piece: token " << id << " is outside the vocabulary of " << vocab_.size();
    return {};
  }

  /// The bytes token `id` renders to, as a string.
  result<std::string> piece(token_id id, piece_options options = {}) const {
    std::string text;
    auto r = visit_piece(id, [&](std::string_view s) { text.append(s); }, options);
    if (!r) return r.error();
    return text;
  }

  /// Decodes `ids` into `out`; returns the bytes written. An id out of range, or an `out`
  /// too small (the message says how many bytes are needed), is an error.
  result<std::size_t> decode(std::span<const token_id> ids, std::span<char> out, decode_options options = {}) const noexcept {
    std::size_t total = 0;
    auto r = for_each_piece(ids, options, [&](std::string_view s) {
      if (total + s.size() <= out.size()) std::memcpy(out.data() + total, s.data(), s.size());
      total += s.size();
    });
    if (!r) return r.error();
    if (total > out.size())
      return error{errc::capacity_exceeded} << "decode: output of " << out.size() << " bytes, the ids need " << total;
    if (vocab_.settings().clean_spaces) total = detail::clean_spaces(out.data(), total);
    return total;
  }

  /// Decodes `ids` into a string.
  result<std::string> decode(std::span<const token_id> ids, decode_options options = {}) const {
    std::string text;
    auto r = for_each_piece(ids, options, [&](std::string_view s) { text.append(s); });
    if (!r) return r.error();
    if (vocab_.settings().clean_spaces) text.resize(detail::clean_spaces(text.data(), text.size()));
    return text;
  }

  /// Calls `out(std::string_view)` with the decoded bytes of `ids`, in order (llama.cpp's
  /// detokenize rules, less the whole-text clean-up of clean_spaces, which `decode`
  /// applies; token by token, as here, llama.cpp's token_to_piece applies none either); an
  /// id out of range is an error, reported before anything past it.
  template <class Out>
  result<void> for_each_piece(std::span<const token_id> ids, decode_options options, Out&& out) const {
    const vocabulary_settings& st = vocab_.settings();
    bool strip = st.add_space_prefix;
    if (options.remove_special && st.add_bos && !ids.empty() && ids.front() == st.bos) {
      strip = false;
      ids = ids.subspan(1);
    }
    if (options.remove_special && st.add_eos && !ids.empty() && ids.back() == st.eos) ids = ids.first(ids.size() - 1);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!detail::visit_piece(vocab_, ids[i], strip, options.unparse_special, out))
        return error{errc::out_of_range} << "decode: token " << ids[i] << " at position " << i << " is outside the vocabulary of "
                                         << vocab_.size();
      strip = false;
    }
    return {};
  }

 private:
  /// One encode call's state: the caller's output and the workspace, carved for the
  /// vocabulary's kind: SentencePiece's escaped text, symbols and heap, or byte-level BPE's
  /// code points, spelled word, symbols and heap.
  struct session {
    const vocabulary& vocab;
    std::string_view text;
    std::span<token_id> out;
    bool parse_special;
    char* escaped = nullptr;
    detail::spm_symbol* symbols = nullptr;
    detail::merge_heap<detail::spm_pair, detail::spm_symbol> heap;
    std::uint32_t* code_points = nullptr;
    char* spelled = nullptr;
    detail::bpe_symbol* bpe_symbols = nullptr;
    detail::merge_heap<detail::bpe_pair, detail::bpe_symbol> bpe_heap;
    std::size_t written = 0;

    session(const vocabulary& v, std::string_view t, std::span<token_id> o, std::span<std::byte> workspace, bool special) noexcept
        : vocab(v), text(t), out(o), parse_special(special) {
      const std::size_t n = t.size() + 1;
      auto base = reinterpret_cast<std::uintptr_t>(workspace.data());
      const std::size_t skip = (8 - base % 8) % 8;
      std::byte* p = workspace.data() + skip;
      if (v.settings().model == tokenizer_model::bpe) {
        code_points = reinterpret_cast<std::uint32_t*>(p);
        p += detail::align8(4 * n);
        spelled = reinterpret_cast<char*>(p);
        p += detail::align8(6 * n);
        bpe_symbols = reinterpret_cast<detail::bpe_symbol*>(p);
        p += detail::align8(3 * n * sizeof(detail::bpe_symbol));
        bpe_heap.slots = reinterpret_cast<detail::bpe_pair*>(p);
        bpe_heap.symbols = bpe_symbols;
        return;
      }
      escaped = reinterpret_cast<char*>(p);
      p += detail::align8(3 * n);
      symbols = reinterpret_cast<detail::spm_symbol*>(p);
      p += detail::align8(2 * n * sizeof(detail::spm_symbol));
      heap.slots = reinterpret_cast<detail::spm_pair*>(p);
      heap.symbols = symbols;
    }

    result<void> emit(token_id id) noexcept {
      if (written == out.size())
        return error{errc::capacity_exceeded} << "encode: output holds " << out.size()
                                              << " ids, the text needs more (size it with max_tokens)";
      out[written++] = id;
      return {};
    }

    /// Splits text[begin, end) at the special pieces from rank `rank` on, in llama.cpp's
    /// order (each piece, longest first, splits every fragment the earlier ones left), and
    /// encodes the raw fragments. Control and unknown pieces take part only with parse_special.
    result<void> partition(std::size_t begin, std::size_t end, std::size_t rank, bool& prev_special) noexcept {
      const auto order = vocab.special_order();
      for (; rank < order.size(); ++rank) {
        const token_record& special = vocab[static_cast<token_id>(order[rank])];
        if (!parse_special && special.type != token_type::user_defined) continue;
        const std::string_view piece = special.piece;
        std::size_t at = text.substr(0, end).find(piece, begin);
        if (at == std::string_view::npos) continue;
        while (at != std::string_view::npos) {
          if (at > begin) {
            if (auto r = partition(begin, at, rank + 1, prev_special); !r) return r;
          }
          if (auto r = emit(static_cast<token_id>(order[rank])); !r) return r;
          prev_special = true;
          begin = at + piece.size();
          if (strips_after(piece))
            while (begin < end && is_c_space(text[begin])) ++begin;
          at = begin < end ? text.substr(0, end).find(piece, begin) : std::string_view::npos;
        }
        if (begin < end) return partition(begin, end, rank + 1, prev_special);
        return {};
      }
      const std::string_view fragment = text.substr(begin, end - begin);
      auto r = vocab.settings().model == tokenizer_model::bpe
                   ? encode_bpe_fragment(fragment)
                   : encode_fragment(fragment, prev_special && vocab.settings().add_space_prefix);
      prev_special = false;
      return r;
    }

    [[nodiscard]] bool strips_after(std::string_view piece) const noexcept {
      return vocab.settings().strip_after_special && piece != "<unk>" && piece != "<s>" && piece != "<|endoftext|>";
    }

    /// C's isspace in the "C" locale, as llama.cpp strips.
    static bool is_c_space(char c) noexcept { return c == ' ' || (c >= '\t' && c <= '\r'); }

    [[nodiscard]] std::string_view symbol_text(const detail::spm_symbol& s) const noexcept {
      return {escaped + s.offset, s.length};
    }

    /// Looks up the pair (sym, sym.next) and puts it in, updates it in, or takes it out of the heap.
    void refresh_pair(std::int32_t sym) noexcept {
      if (sym < 0) return;
      detail::spm_symbol& left = symbols[sym];
      token_id id = no_token;
      if (left.next >= 0) {
        const std::size_t length = std::size_t{left.length} + symbols[left.next].length;
        if (length <= vocab.max_piece_bytes()) id = vocab.find({escaped + left.offset, length});
      }
      const auto index = static_cast<std::uint32_t>(sym);
      if (id == no_token) {
        heap.remove(index);
        return;
      }
      left.pair_token = id;
      heap.upsert({vocab[id].score, index});
    }

    result<void> encode_fragment(std::string_view fragment, bool space_prefix) noexcept {
      const bool escape = vocab.settings().escape_whitespace;
      std::size_t length = 0;
      auto put = [&](char c) {
        if (c == ' ' && escape) {
          escaped[length++] = '\xE2';
          escaped[length++] = '\x96';
          escaped[length++] = '\x81';
        } else {
          escaped[length++] = c;
        }
      };
      if (space_prefix) put(' ');
      for (char c : fragment) put(c);

      std::uint32_t count = 0;
      for (std::size_t at = 0; at < length;) {
        std::size_t n = detail::utf8_lead_length(static_cast<unsigned char>(escaped[at]));
        if (n > length - at) n = length - at;
        symbols[count] = {static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(n),
                          static_cast<std::int32_t>(count) - 1, at + n == length ? -1 : static_cast<std::int32_t>(count) + 1,
                          no_token, no_token, detail::not_in_heap};
        ++count;
        at += n;
      }
      if (count == 0) return {};

      // Words apart (see vocabulary::splits_at_spaces): a word starts at a symbol that is
      // a space after one that is not. Merges in one word never touch another, so merging
      // word by word keeps each word's merge order and so gives the same ids.
      const std::string_view space = vocab.space_piece();
      const bool split = vocab.splits_at_spaces();
      for (std::uint32_t begin = 0; begin < count;) {
        std::uint32_t end = begin + 1;
        if (split) {
          while (end < count && !(symbol_text(symbols[end]) == space && symbol_text(symbols[end - 1]) != space)) ++end;
        } else {
          end = count;
        }
        symbols[begin].prev = -1;
        symbols[end - 1].next = -1;
        if (auto r = merge_and_emit(begin, end); !r) return r;
        begin = end;
      }
      return {};
    }

    /// Merges symbols [begin, end) (linked among themselves only) and emits their ids.
    result<void> merge_and_emit(std::uint32_t begin, std::uint32_t end) noexcept {
      heap.size = 0;
      for (std::uint32_t i = begin; i + 1 < end; ++i) {
        const std::size_t pair = std::size_t{symbols[i].length} + symbols[i + 1].length;
        const token_id id = pair <= vocab.max_piece_bytes() ? vocab.find({escaped + symbols[i].offset, pair}) : no_token;
        if (id == no_token) continue;
        symbols[i].pair_token = id;
        heap.append({vocab[id].score, i});
      }
      heap.heapify();

      while (!heap.empty()) {
        const std::uint32_t left_index = heap.top().symbol;
        detail::spm_symbol& left = symbols[left_index];
        const auto right_index = static_cast<std::uint32_t>(left.next);
        detail::spm_symbol& right = symbols[right_index];
        left.length += right.length;
        left.token = left.pair_token;
        right.length = 0;
        heap.remove(right_index);
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = static_cast<std::int32_t>(left_index);
        refresh_pair(static_cast<std::int32_t>(left_index));
        refresh_pair(left.prev);
      }

      for (auto i = static_cast<std::int32_t>(begin); i != -1; i = symbols[i].next) {
        const detail::spm_symbol& s = symbols[i];
        token_id id = s.token != no_token ? s.token : vocab.find(symbol_text(s));
        if (id != no_token) {
          if (auto r = emit(id); !r) return r;
          continue;
        }
        for (std::uint32_t b = 0; b < s.length; ++b) {
          const auto byte = static_cast<unsigned char>(escaped[s.offset + b]);
          const token_id fallback = vocab.byte_token(byte);
          if (fallback == no_token)
            return error{errc::unsupported} << "encode: byte " << static_cast<unsigned>(byte)
                                            << " has no <0xHH> piece and the vocabulary has no unknown token";
          if (auto r = emit(fallback); !r) return r;
        }
      }
      return {};
    }

    /// Byte-level BPE: code points, words, spelling, merges (see the header comment).
    result<void> encode_bpe_fragment(std::string_view fragment) noexcept {
      std::size_t count = 0;
      for (std::size_t at = 0; at < fragment.size();) {
        const unicode::decoded d = unicode::decode_utf8(fragment.data() + at, fragment.size() - at);
        code_points[count++] = d.cpt;
        at += d.length;
      }
      result<void> status;
      split_words(vocab.settings().pre, code_points, count, [&](std::size_t begin, std::size_t end) {
        if (status) status = encode_bpe_word(begin, end);
      });
      return status;
    }

    /// Spells code_points[begin, end) and merges it.
    result<void> encode_bpe_word(std::size_t begin, std::size_t end) noexcept {
      std::uint32_t length = 0, count = 0;
      for (std::size_t i = begin; i < end; ++i) {
        char utf8[4];
        const std::size_t n = unicode::encode_utf8(code_points[i], utf8);
        for (std::size_t k = 0; k < n; ++k) {
          const unsigned spelled_length = byte_unicode::encode(static_cast<unsigned char>(utf8[k]), spelled + length);
          bpe_symbols[count] = {length, spelled_length, static_cast<std::int32_t>(count) - 1,
                                static_cast<std::int32_t>(count) + 1, detail::not_in_heap};
          length += spelled_length;
          ++count;
        }
      }
      if (count == 0) return {};
      bpe_symbols[count - 1].next = -1;
      if (vocab.settings().ignore_merges) {
        if (const token_id id = vocab.find({spelled, length}); id != no_token) return emit(id);
      }
      const bpe_merges& merges = vocab.merges();
      bpe_heap.size = 0;
      for (std::uint32_t i = 0; i + 1 < count; ++i) {
        const std::int32_t rank = merges.rank(bpe_text(bpe_symbols[i]), bpe_text(bpe_symbols[i + 1]));
        if (rank >= 0) bpe_heap.append({rank, i});
      }
      bpe_heap.heapify();
      while (!bpe_heap.empty()) {
        const std::uint32_t left_index = bpe_heap.top().symbol;
        detail::bpe_symbol& left = bpe_symbols[left_index];
        const auto right_index = static_cast<std::uint32_t>(left.next);
        detail::bpe_symbol& right = bpe_symbols[right_index];
        left.length += right.length;
        right.length = 0;
        bpe_heap.remove(right_index);
        left.next = right.next;
        if (right.next >= 0) bpe_symbols[right.next].prev = static_cast<std::int32_t>(left_index);
        refresh_bpe_pair(static_cast<std::int32_t>(left_index));
        refresh_bpe_pair(left.prev);
      }
      for (std::int32_t i = 0; i != -1; i = bpe_symbols[i].next) {
        const std::string_view piece = bpe_text(bpe_symbols[i]);
        if (const token_id id = vocab.find(piece); id != no_token) {
          if (auto r = emit(id); !r) return r;
          continue;
        }
        for (std::size_t b = 0; b < piece.size(); ++b)
          if (const token_id id = vocab.find(piece.substr(b, 1)); id != no_token)
            if (auto r = emit(id); !r) return r;
      }
      return {};
    }

    [[nodiscard]] std::string_view bpe_text(const detail::bpe_symbol& s) const noexcept { return {spelled + s.offset, s.length}; }

    /// Ranks the pair (sym, sym.next) and puts it in, updates it in, or takes it out of the heap.
    void refresh_bpe_pair(std::int32_t sym) noexcept {
      if (sym < 0) return;
      const detail::bpe_symbol& left = bpe_symbols[sym];
      const std::int32_t rank = left.next >= 0 ? vocab.merges().rank(bpe_text(left), bpe_text(bpe_symbols[left.next])) : -1;
      const auto index = static_cast<std::uint32_t>(sym);
      if (rank < 0)
        bpe_heap.remove(index);
      else
        bpe_heap.upsert({rank, index});
    }
  };

  vocabulary vocab_;
};

/// Decodes ids one at a time and hands `sink(std::string_view)` only whole UTF-8
/// characters: a character cut across pieces (byte tokens) is held until its last byte
/// arrives. Bytes that cannot start or continue a character go out as they are, as soon as
/// that is known, and `finish` flushes an incomplete tail as it is.
class stream_decoder {
 public:
  explicit stream_decoder(const tokenizer& t, decode_options options = {}) noexcept
      : tokenizer_(&t), options_(options), strip_(t.vocab().settings().add_space_prefix) {}

  template <class Sink>
  result<void> push(token_id id, Sink&& sink) {
    const vocabulary& vocab = tokenizer_->vocab();
    if (first_) {
      first_ = false;
      if (options_.remove_special && vocab.settings().add_bos && id == vocab.settings().bos) {
        strip_ = false;
        return {};
      }
    }
    const bool ok = detail::visit_piece(vocab, id, strip_, options_.unparse_special,
                                        [&](std::string_view s) { feed(s, sink); });
    if (!ok) return error{errc::out_of_range} << "decode: token " << id << " is outside the vocabulary of " << vocab.size();
    strip_ = false;
    return {};
  }

  /// Reads a prompt's ids without output (their text is the caller's), so the text that
  /// follows reads on from it: only a piece right after BOS loses its leading space, as
  /// llama2.c prints it.
  result<void> follow(std::span<const token_id> prompt) {
    const token_id bos = tokenizer_->vocab().settings().bos;
    for (const token_id t : prompt)
      if (t != bos)
        if (auto pushed = push(t, [](std::string_view) {}); !pushed) return pushed;
    return {};
  }

  /// Flushes held bytes (an incomplete character at the end) as they are.
  template <class Sink>
  void finish(Sink&& sink) {
    if (pending_length_ > 0) sink(std::string_view{pending_, pending_length_});
    pending_length_ = 0;
  }

 private:
  static bool continuation(unsigned char b) noexcept { return (b & 0xC0) == 0x80; }

  /// Length of the character a byte starts: 1 for ASCII and for bytes that start none.
  static std::size_t sequence_length(unsigned char b) noexcept {
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 1;
  }

  template <class Sink>
  void feed(std::string_view s, Sink& sink) {
    std::size_t i = 0;
    while (pending_length_ > 0 && i < s.size()) {
      const auto b = static_cast<unsigned char>(s[i]);
      if (!continuation(b)) {
        sink(std::string_view{pending_, pending_length_});
        pending_length_ = 0;
        break;
      }
      // pending_length_ < pending_need_ <= 4 holds; the bound check says so to the compiler.
      if (pending_length_ < sizeof pending_) pending_[pending_length_] = s[i];
      ++pending_length_;
      ++i;
      if (pending_length_ >= pending_need_) {
        sink(std::string_view{pending_, pending_length_});
        pending_length_ = 0;
      }
    }
    if (i == s.size()) return;
    // Hold back a character the segment's end cuts: its lead is within the last 3 bytes.
    std::size_t cut = s.size();
    for (std::size_t k = s.size(); k-- > i && s.size() - k <= 3;) {
      const auto b = static_cast<unsigned char>(s[k]);
      if (continuation(b)) continue;
      const std::size_t need = sequence_length(b);
      if (need > s.size() - k) {
        cut = k;
        pending_need_ = need;
      }
      break;
    }
    if (cut > i) sink(s.substr(i, cut - i));
    // Here pending_ is empty and the tail is at most 3 bytes (a lead within the last 3).
    pending_length_ = s.size() - cut;
    for (std::size_t k = 0; k < pending_length_ && k < sizeof pending_; ++k) pending_[k] = s[cut + k];
  }

  const tokenizer* tokenizer_;
  decode_options options_;
  bool strip_;
  bool first_ = true;
  char pending_[4] = {};
  std::size_t pending_length_ = 0;
  std::size_t pending_need_ = 0;
};

}  // namespace hedge::model
