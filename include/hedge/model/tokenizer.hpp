// hedge/model/tokenizer.hpp: SentencePiece BPE encode and decode over a llama (SPM)
// vocabulary, giving the ids llama.cpp gives (llama_tokenize with parse_special = false).
//
// Encode, as llama.cpp's llama_vocab::impl::tokenize and llm_tokenizer_spm_session
// (src/llama-vocab.cpp):
//   1. User-defined pieces are split out of the text first, longest piece first, each
//      occurrence becoming its id (control and unknown pieces such as "<s>" are not: with
//      parse_special = false they are plain text).
//   2. Each remaining fragment gets a leading space when add_space_prefix is set and it
//      starts the text or follows a user-defined token; spaces become U+2581 (▁).
//   3. The fragment is cut into symbols of one UTF-8 character each, the length taken from
//      the lead byte alone (a lone lead byte takes the next bytes, whatever they are).
//   4. Repeatedly, the adjacent pair whose concatenation is a piece with the highest score
//      merges, the leftmost on equal scores; any piece of the vocabulary may be a merge
//      result, control pieces included.
//   5. Each final symbol is its piece's id, or else one byte-fallback id (<0xHH>) per byte.
//   BOS first and EOS last when asked (add_special) and the vocabulary's add_bos/add_eos say so.
//
// Cost: O(n log n) for n bytes. Pairs live in an indexed binary heap, one entry per
// symbol (the pair it starts), so the heap never holds stale pairs and its size is
// bounded by the symbols; a candidate longer than the vocabulary's longest piece is
// never hashed. `encode` with a caller workspace of `workspace_bytes(n)` bytes touches
// no heap.
//
// Decode, as llama.cpp's token_to_piece and detokenize: normal pieces with ▁ as a space,
// byte tokens as their byte, user-defined pieces as they are, control and unknown pieces
// only when unparse_special is set, unused ones never; with add_space_prefix, the first
// piece's leading space is dropped unless the ids start with a BOS that remove_special
// removes (llama.cpp keeps the space there).
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
#include "hedge/model/vocabulary.hpp"

namespace hedge::model {

struct encode_options {
  /// BOS (and EOS) as the vocabulary's add_bos / add_eos say: llama_tokenize's add_special.
  bool add_special = true;
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

inline constexpr std::uint32_t not_in_heap = 0xFFFFFFFFu;

/// A heap slot: the pair (symbol, its next) and the pair's score, kept here so comparisons
/// read the heap array alone (the symbols are scattered: at 1 MB they outgrow the caches).
struct spm_pair {
  float score;
  std::uint32_t symbol;
};

/// 8-byte aligned offset.
constexpr std::size_t align8(std::size_t n) noexcept { return (n + 7) & ~std::size_t{7}; }

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
  static constexpr std::size_t max_text_bytes = (std::size_t{1} << 31) / 3 - 2;

  /// Workspace bytes `encode` needs for a text of `text_bytes` bytes (any alignment):
  /// the escaped fragment (3 bytes per input byte at most) and two symbols and heap slots
  /// per input byte (a space after a lone lead byte loses its first byte to that lead's
  /// symbol and leaves two one-byte symbols); 67 bytes per input byte.
  static constexpr std::size_t workspace_bytes(std::size_t text_bytes) noexcept {
    const std::size_t n = (text_bytes > max_text_bytes ? max_text_bytes : text_bytes) + 1;
    return 8 + detail::align8(3 * n) + detail::align8(2 * n * sizeof(detail::spm_symbol)) + 2 * n * sizeof(detail::spm_pair);
  }

  /// The most ids `encode` writes for a text of `text_bytes` bytes, prefix spaces (one per
  /// fragment) counted as bytes, plus BOS and EOS: every id covers at least one byte of the
  /// escaped text, which is at most 3 bytes per input byte; when ▁ is a piece, at most 2
  /// ids per input byte (a space only splits into byte tokens behind a lone lead byte).
  [[nodiscard]] std::size_t max_tokens(std::size_t text_bytes) const noexcept {
    const std::size_t per_byte = vocab_.space_is_token() ? 2 : 3;
    const std::size_t fragments = vocab_.user_defined_order().empty() ? 1 : text_bytes + 1;
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
    session s{vocab_, text, out, workspace};
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
    std::vector<token_id> ids(max_tokens(text.size()));
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
    return total;
  }

  /// Decodes `ids` into a string.
  result<std::string> decode(std::span<const token_id> ids, decode_options options = {}) const {
    std::string text;
    auto r = for_each_piece(ids, options, [&](std::string_view s) { text.append(s); });
    if (!r) return r.error();
    return text;
  }

  /// Calls `out(std::string_view)` with the decoded bytes of `ids`, in order (llama.cpp's
  /// detokenize rules); an id out of range is an error, reported before anything past it.
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
  /// One encode call's state: the caller's output and the workspace carved into the
  /// escaped text, the symbols and the heap.
  struct session {
    const vocabulary& vocab;
    std::string_view text;
    std::span<token_id> out;
    char* escaped = nullptr;
    detail::spm_symbol* symbols = nullptr;
    detail::spm_pair* heap = nullptr;
    std::size_t heap_size = 0;
    std::size_t written = 0;

    session(const vocabulary& v, std::string_view t, std::span<token_id> o, std::span<std::byte> workspace) noexcept
        : vocab(v), text(t), out(o) {
      const std::size_t n = t.size() + 1;
      auto base = reinterpret_cast<std::uintptr_t>(workspace.data());
      const std::size_t skip = (8 - base % 8) % 8;
      std::byte* p = workspace.data() + skip;
      escaped = reinterpret_cast<char*>(p);
      p += detail::align8(3 * n);
      symbols = reinterpret_cast<detail::spm_symbol*>(p);
      p += detail::align8(2 * n * sizeof(detail::spm_symbol));
      heap = reinterpret_cast<detail::spm_pair*>(p);
    }

    result<void> emit(token_id id) noexcept {
      if (written == out.size())
        return error{errc::capacity_exceeded} << "encode: output holds " << out.size()
                                              << " ids, the text needs more (size it with max_tokens)";
      out[written++] = id;
      return {};
    }

    /// Splits text[begin, end) at the user-defined pieces from rank `rank` on, in
    /// llama.cpp's order (each piece, longest first, splits every fragment the earlier
    /// ones left), and encodes the raw fragments.
    result<void> partition(std::size_t begin, std::size_t end, std::size_t rank, bool& prev_special) noexcept {
      const auto order = vocab.user_defined_order();
      for (; rank < order.size(); ++rank) {
        const std::string_view piece = vocab[static_cast<token_id>(order[rank])].piece;
        std::size_t at = text.substr(0, end).find(piece, begin);
        if (at == std::string_view::npos) continue;
        while (at != std::string_view::npos) {
          if (at > begin) {
            if (auto r = partition(begin, at, rank + 1, prev_special); !r) return r;
          }
          if (auto r = emit(static_cast<token_id>(order[rank])); !r) return r;
          prev_special = true;
          begin = at + piece.size();
          at = begin < end ? text.substr(0, end).find(piece, begin) : std::string_view::npos;
        }
        if (begin < end) return partition(begin, end, rank + 1, prev_special);
        return {};
      }
      auto r = encode_fragment(text.substr(begin, end - begin), prev_special && vocab.settings().add_space_prefix);
      prev_special = false;
      return r;
    }

    [[nodiscard]] std::string_view symbol_text(const detail::spm_symbol& s) const noexcept {
      return {escaped + s.offset, s.length};
    }

    /// Heap order: higher pair score first, then the leftmost pair.
    static bool before(const detail::spm_pair& a, const detail::spm_pair& b) noexcept {
      return a.score > b.score || (a.score == b.score && a.symbol < b.symbol);
    }

    void place(std::size_t slot, detail::spm_pair pair) noexcept {
      heap[slot] = pair;
      symbols[pair.symbol].heap_slot = static_cast<std::uint32_t>(slot);
    }

    void sift_up(std::size_t slot) noexcept {
      const detail::spm_pair sym = heap[slot];
      while (slot > 0) {
        const std::size_t parent = (slot - 1) / 2;
        if (!before(sym, heap[parent])) break;
        place(slot, heap[parent]);
        slot = parent;
      }
      place(slot, sym);
    }

    void sift_down(std::size_t slot) noexcept {
      const detail::spm_pair sym = heap[slot];
      for (;;) {
        std::size_t child = 2 * slot + 1;
        if (child >= heap_size) break;
        if (child + 1 < heap_size && before(heap[child + 1], heap[child])) ++child;
        if (!before(heap[child], sym)) break;
        place(slot, heap[child]);
        slot = child;
      }
      place(slot, sym);
    }

    void heap_remove(std::uint32_t sym) noexcept {
      const std::size_t slot = symbols[sym].heap_slot;
      if (slot == detail::not_in_heap) return;
      symbols[sym].heap_slot = detail::not_in_heap;
      const detail::spm_pair last = heap[--heap_size];
      if (slot == heap_size) return;
      place(slot, last);
      sift_up(slot);
      sift_down(symbols[last.symbol].heap_slot);
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
        heap_remove(index);
        return;
      }
      left.pair_token = id;
      const detail::spm_pair pair{vocab[id].score, index};
      if (left.heap_slot == detail::not_in_heap) {
        place(heap_size++, pair);
        sift_up(heap_size - 1);
      } else {
        const std::size_t slot = left.heap_slot;
        place(slot, pair);
        sift_up(slot);
        sift_down(left.heap_slot);
      }
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
      heap_size = 0;
      for (std::uint32_t i = begin; i + 1 < end; ++i) {
        const std::size_t pair = std::size_t{symbols[i].length} + symbols[i + 1].length;
        const token_id id = pair <= vocab.max_piece_bytes() ? vocab.find({escaped + symbols[i].offset, pair}) : no_token;
        if (id == no_token) continue;
        symbols[i].pair_token = id;
        place(heap_size++, {vocab[id].score, i});
      }
      for (std::size_t slot = heap_size / 2; slot-- > 0;) sift_down(slot);

      while (heap_size > 0) {
        const std::uint32_t left_index = heap[0].symbol;
        detail::spm_symbol& left = symbols[left_index];
        const auto right_index = static_cast<std::uint32_t>(left.next);
        detail::spm_symbol& right = symbols[right_index];
        left.length += right.length;
        left.token = left.pair_token;
        right.length = 0;
        heap_remove(right_index);
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
