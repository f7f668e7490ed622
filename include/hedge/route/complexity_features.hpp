// hedge/route/complexity_features.hpp: prompt features for the learned complexity scorer.
//
// Two passes over the bytes (characters, then words), no allocation, no stored token list.
// The character pass has an AVX2 path (32 bytes per step: classification, separator-run
// collapse by table-driven compaction, 8 hashes per step) that reports the same buckets in
// the same order as the scalar loop, so scores are bit-identical:
//   hashed features (feature hashing, Weinberger et al. 2009), each reported to a visitor
//   as (group, bucket):
//     group words: lower-cased word unigrams and adjacent-word bigrams
//     group chars: character 4-grams of the lower-cased text (robust to unseen words)
//   dense features (one float each, already scaled to about [0, 1]):
//     length, word count, digit / math-symbol / upper-case / code-marker fractions,
//     question marks, lines, mean word length, LaTeX markers, numbers.
// A linear model scores a prompt as bias + dense . w_dense + (sum of bucket weights of
// each group) / sqrt(occurrences in that group): the normalisation keeps long and
// short prompts on one scale, and can be applied at the end, so scoring needs no
// feature vector at all.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hedge/core/arch.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace hedge::route {

/// Dense (non-hashed) complexity features, by index into feature_summary::dense.
enum class dense_feature : std::uint8_t {
  log_bytes,
  log_words,
  digit_fraction,
  math_fraction,
  upper_fraction,
  code_fraction,
  question_marks,
  log_lines,
  mean_word_length,
  latex_markers,
  number_fraction,
  count_,
};
inline constexpr std::size_t dense_feature_count = static_cast<std::size_t>(dense_feature::count_);

/// Stable names, used by the weights file.
inline constexpr std::array<std::string_view, dense_feature_count> dense_feature_names{
    "log_bytes",    "log_words",      "digit_fraction",   "math_fraction", "upper_fraction", "code_fraction",
    "question_marks", "log_lines", "mean_word_length", "latex_markers", "number_fraction"};

/// The two hashed feature groups.
enum class hashed_group : std::uint8_t { words, chars };
inline constexpr std::size_t hashed_group_count = 2;

/// What extraction produces besides the hashed features it reported.
struct feature_summary {
  std::array<float, dense_feature_count> dense{};
  /// Occurrences reported per hashed group (for the 1/sqrt(n) normalisation).
  std::array<std::uint32_t, hashed_group_count> occurrences{};

  /// Scale applied to every hashed feature of group g.
  [[nodiscard]] float group_scale(hashed_group g) const noexcept {
    const auto n = occurrences[static_cast<std::size_t>(g)];
    return n == 0 ? 0.0f : 1.0f / std::sqrt(static_cast<float>(n));
  }
};

namespace detail {
/// 32-bit finaliser of MurmurHash3 (public domain): spreads bits so that the bucket
/// index can be taken from the low bits.
constexpr std::uint32_t mix32(std::uint32_t h) noexcept {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/// Per-byte class, one table load per byte instead of a chain of comparisons:
/// low 3 bits = counter category, bit 3 = word byte, bit 4 = word byte that is not a digit,
/// bits 8.. = folded byte (lower case; ' ' for every separator).
enum byte_category : std::uint8_t { other, digit, upper, math, code, latex, question, newline, category_count };
inline constexpr std::uint16_t word_bit = 8;
inline constexpr std::uint16_t non_digit_bit = 16;

constexpr std::array<std::uint16_t, 256> make_byte_classes() noexcept {
  std::array<std::uint16_t, 256> t{};
  for (unsigned c = 0; c < 256; ++c) {
    std::uint16_t category = other;
    if (c >= '0' && c <= '9') category = digit;
    else if (c >= 'A' && c <= 'Z') category = upper;
    else if (c == '+' || c == '-' || c == '*' || c == '/' || c == '=' || c == '^' || c == '<' || c == '>' || c == '%' || c == '|')
      category = math;
    else if (c == '{' || c == '}' || c == ';' || c == '_' || c == '`' || c == '[' || c == ']') category = code;
    else if (c == '\\' || c == '$') category = latex;
    else if (c == '?') category = question;
    else if (c == '\n') category = newline;
    const bool word = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
    const unsigned folded = (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
    const unsigned non_digit = word && !(c >= '0' && c <= '9') ? non_digit_bit : 0;
    t[c] = static_cast<std::uint16_t>(category | (word ? word_bit : 0) | non_digit | (word ? folded : ' ') << 8);
  }
  return t;
}
inline constexpr std::array<std::uint16_t, 256> byte_classes = make_byte_classes();

/// Scan state, carried from the vector blocks into the scalar tail.
struct scan_state {
  std::array<std::uint32_t, category_count> counts{};
  std::uint32_t gram = 0;      ///< last four kept folded bytes; a run of separators counts as one space
  std::uint32_t gram_len = 0;  ///< kept bytes so far
  // Words: maximal runs of letters, digits and non-ASCII bytes.
  std::uint32_t words = 0, word_bytes = 0, numbers = 0, prev_word = 0;
  std::uint32_t hash = 0;  ///< of the word in progress: rotate-xor per byte, mixed at its end
  std::uint32_t length = 0;  ///< bytes of the word in progress (0: between words)
  std::uint16_t seen = 0;    ///< class bits of the word in progress
};

constexpr std::uint32_t add_to_word_hash(std::uint32_t hash, std::uint32_t folded) noexcept {
  return ((hash << 5) | (hash >> 27)) ^ folded;
}

/// Reports the unigram (and the bigram with the previous word) of the word in progress.
template <std::uint32_t Mask, class Visitor>
HEDGE_ALWAYS_INLINE void finish_word(scan_state& st, Visitor& visit) noexcept {
  const std::uint32_t h = mix32(st.hash);
  visit(hashed_group::words, h & Mask);
  if (st.words > 0) visit(hashed_group::words, mix32(st.prev_word * 0x9e3779b1u + h) & Mask);
  st.prev_word = h;
  ++st.words;
  st.word_bytes += st.length;
  st.numbers += (st.seen & non_digit_bit) ? 0 : 1;
  st.hash = 0;
  st.length = 0;
  st.seen = 0;
}

/// Scalar word pass over bytes [begin, end) (the specification); a word may continue
/// from before `begin` and past `end`.
template <std::uint32_t Mask, class Visitor>
HEDGE_ALWAYS_INLINE void word_pass_range(const unsigned char* bytes, std::size_t begin, std::size_t end,
                                         scan_state& st, Visitor& visit) noexcept {
  for (std::size_t k = begin; k < end; ++k) {
    const std::uint16_t cls = byte_classes[bytes[k]];
    if (cls & word_bit) {
      st.hash = add_to_word_hash(st.hash, cls >> 8u);
      st.seen = static_cast<std::uint16_t>(st.seen | cls);
      ++st.length;
    } else if (st.length != 0) {
      finish_word<Mask>(st, visit);
    }
  }
}

/// Scalar character pass over bytes [begin, end): the specification.
/// Category counts are eight 8-bit lanes of one integer, flushed every 255 bytes.
template <unsigned BucketBits, class Visitor>
HEDGE_ALWAYS_INLINE void char_pass_range(const unsigned char* bytes, std::size_t begin, std::size_t end,
                                                scan_state& st, Visitor& visit) noexcept {
  std::uint32_t gram = st.gram, gram_len = st.gram_len;
  for (std::size_t chunk = begin; chunk < end; chunk += 255) {
    const std::size_t chunk_end = end - chunk < 255 ? end : chunk + 255;
    std::uint64_t lanes = 0;
    for (std::size_t k = chunk; k < chunk_end; ++k) {
      const std::uint16_t cls = byte_classes[bytes[k]];
      lanes += std::uint64_t{1} << (8u * (cls & 7u));
      const std::uint32_t folded = cls >> 8;
      if (folded == ' ' && (gram & 0xffu) == ' ') continue;  // collapse separator runs
      gram = (gram << 8) | folded;
      // Fibonacci hashing (Knuth): one multiply per byte.
      if (++gram_len >= 4) visit(hashed_group::chars, (gram * 0x9e3779b1u) >> (32 - BucketBits));
    }
    for (std::size_t c = 0; c < category_count; ++c) st.counts[c] += (lanes >> (8 * c)) & 0xffu;
  }
  st.gram = gram;
  st.gram_len = gram_len;
}

/// Both passes over the whole text, scalar. Ends with no word in progress.
template <unsigned BucketBits, class Visitor>
HEDGE_ALWAYS_INLINE void scan(const unsigned char* bytes, std::size_t size, scan_state& st, Visitor& visit,
                              arch::scalar) noexcept {
  constexpr auto mask = static_cast<std::uint32_t>((std::uint64_t{1} << BucketBits) - 1);
  char_pass_range<BucketBits>(bytes, 0, size, st, visit);
  word_pass_range<mask>(bytes, 0, size, st, visit);
  if (st.length != 0) finish_word<mask>(st, visit);
}

#if defined(__AVX2__)
/// pshufb patterns that move the bytes selected by an 8-bit mask to the front, in order.
constexpr std::array<std::array<std::uint8_t, 8>, 256> make_compaction_table() noexcept {
  std::array<std::array<std::uint8_t, 8>, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    unsigned n = 0;
    for (unsigned b = 0; b < 8; ++b)
      if (m & (1u << b)) t[m][n++] = static_cast<std::uint8_t>(b);
    for (; n < 8; ++n) t[m][n] = 0x80;
  }
  return t;
}
inline constexpr std::array<std::array<std::uint8_t, 8>, 256> compaction_table = make_compaction_table();

/// Nibble table for set membership: entry [low nibble] has bit h set when the byte
/// (h << 4 | low) is in the set (ASCII only, h < 8).
constexpr std::array<std::uint8_t, 16> nibble_set(std::string_view chars) noexcept {
  std::array<std::uint8_t, 16> t{};
  for (char c : chars) {
    const auto u = static_cast<unsigned char>(c);
    t[u & 15u] = static_cast<std::uint8_t>(t[u & 15u] | (1u << (u >> 4)));
  }
  return t;
}
inline constexpr std::array<std::uint8_t, 16> math_set = nibble_set("+-*/=^<>%|");
inline constexpr std::array<std::uint8_t, 16> code_set = nibble_set("{};_`[]");
inline constexpr std::array<std::uint8_t, 16> latex_set = nibble_set("\\$");
inline constexpr std::array<std::uint8_t, 16> high_nibble_bit = {1, 2, 4, 8, 16, 32, 64, 128, 0, 0, 0, 0, 0, 0, 0, 0};

HEDGE_ALWAYS_INLINE __m256i broadcast16(const std::array<std::uint8_t, 16>& t) noexcept {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.data())));
}
/// Bytes of v in [lo, hi] (as unsigned values below 0x80), via one signed compare.
HEDGE_ALWAYS_INLINE __m256i in_range(__m256i v, char lo, char hi) noexcept {
  const __m256i moved = _mm256_add_epi8(v, _mm256_set1_epi8(static_cast<char>(-128 - lo)));
  return _mm256_cmpgt_epi8(_mm256_set1_epi8(static_cast<char>(-128 + (hi - lo + 1))), moved);
}
HEDGE_ALWAYS_INLINE std::uint32_t bits(__m256i m) noexcept {
  return static_cast<std::uint32_t>(_mm256_movemask_epi8(m));
}
HEDGE_ALWAYS_INLINE std::uint32_t popcount(std::uint32_t m) noexcept {
  return static_cast<std::uint32_t>(__builtin_popcount(m));
}

/// AVX2: one pass over whole 32-byte blocks doing both the character and the word work
/// (words from the word-byte bit mask), then the scalar passes on the tail. Each group's
/// features come in the scalar order (char and word reports interleave by block).
template <unsigned BucketBits, class Visitor>
HEDGE_ALWAYS_INLINE void scan(const unsigned char* bytes, std::size_t size, scan_state& st, Visitor& visit,
                              arch::avx2) noexcept {
  constexpr auto mask = static_cast<std::uint32_t>((std::uint64_t{1} << BucketBits) - 1);
  const __m256i low_nibble = _mm256_set1_epi8(0x0f);
  const __m256i math_lut = broadcast16(math_set), code_lut = broadcast16(code_set),
                latex_lut = broadcast16(latex_set), high_lut = broadcast16(high_nibble_bit);
  // Gram t of 8 (4 per 128-bit lane) from source bytes t..t+3, most significant first,
  // as the scalar (gram << 8) | byte builds it.
  const __m256i gram_pattern = _mm256_setr_epi8(3, 2, 1, 0, 4, 3, 2, 1, 5, 4, 3, 2, 6, 5, 4, 3,  //
                                                7, 6, 5, 4, 8, 7, 6, 5, 9, 8, 7, 6, 10, 9, 8, 7);
  // kept[0..3): the last three kept bytes before the block; then the block's kept bytes.
  alignas(32) std::array<unsigned char, 48> kept{};
  alignas(32) std::array<unsigned char, 32> folded_bytes{};
  alignas(32) std::array<std::uint32_t, 8> buckets{};
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + i));
    const __m256i digits = in_range(v, '0', '9'), uppers = in_range(v, 'A', 'Z');
    const __m256i word = _mm256_or_si256(_mm256_or_si256(digits, uppers),
                                         _mm256_or_si256(in_range(v, 'a', 'z'), _mm256_cmpgt_epi8(_mm256_setzero_si256(), v)));
    const __m256i hi_bit = _mm256_shuffle_epi8(high_lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble));
    const __m256i lo = _mm256_and_si256(v, low_nibble);
    const auto member = [&](__m256i lut) {
      return ~bits(_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(lut, lo), hi_bit), _mm256_setzero_si256()));
    };
    st.counts[digit] += popcount(bits(digits));
    st.counts[upper] += popcount(bits(uppers));
    st.counts[math] += popcount(member(math_lut));
    st.counts[code] += popcount(member(code_lut));
    st.counts[latex] += popcount(member(latex_lut));
    st.counts[question] += popcount(bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('?'))));
    st.counts[newline] += popcount(bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n'))));

    // Fold (lower case; ' ' for every separator), then drop separators after separators.
    const __m256i lowered = _mm256_or_si256(v, _mm256_and_si256(uppers, _mm256_set1_epi8(0x20)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(folded_bytes.data()),
                       _mm256_blendv_epi8(_mm256_set1_epi8(' '), lowered, word));
    const std::uint32_t separator = ~bits(word);
    const std::uint32_t after_separator = (separator << 1) | ((st.gram & 0xffu) == ' ' ? 1u : 0u);
    const std::uint32_t keep = ~(separator & after_separator);

    kept[0] = static_cast<unsigned char>(st.gram >> 16);
    kept[1] = static_cast<unsigned char>(st.gram >> 8);
    kept[2] = static_cast<unsigned char>(st.gram);
    std::size_t n = 3;
    for (std::size_t g = 0; g < 4; ++g) {
      const std::uint32_t m = (keep >> (8 * g)) & 0xffu;
      const __m128i src = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(folded_bytes.data() + 8 * g));
      const __m128i pattern = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(compaction_table[m].data()));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(kept.data() + n), _mm_shuffle_epi8(src, pattern));
      n += popcount(m);
    }

    // Kept byte j (j >= 3) is the (gram_len + j - 2)-th of the text; grams start at the 4th.
    std::size_t j = st.gram_len >= 3 ? 3 : 6 - st.gram_len;
    for (; j < n; j += 8) {
      const __m256i window = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kept.data() + j - 3)));
      const __m256i grams = _mm256_shuffle_epi8(window, gram_pattern);
      const __m256i hashed = _mm256_srli_epi32(_mm256_mullo_epi32(grams, _mm256_set1_epi32(static_cast<int>(0x9e3779b1u))),
                                               static_cast<int>(32 - BucketBits));
      _mm256_store_si256(reinterpret_cast<__m256i*>(buckets.data()), hashed);
      const std::size_t count = n - j < 8 ? n - j : 8;
      if constexpr (requires { visit(hashed_group::chars, buckets.data(), count); }) {
        visit(hashed_group::chars, buckets.data(), count);
      } else {
        for (std::size_t t = 0; t < count; ++t) visit(hashed_group::chars, buckets[t]);
      }
    }
    if (n >= 4)
      st.gram = static_cast<std::uint32_t>(kept[n - 4]) << 24 | static_cast<std::uint32_t>(kept[n - 3]) << 16 |
                static_cast<std::uint32_t>(kept[n - 2]) << 8 | kept[n - 1];
    st.gram_len += static_cast<std::uint32_t>(n - 3);

    // Words: each run of word bits; a run touching bit 31 continues in the next block.
    const std::uint32_t word_bits = ~separator, digit_bits = bits(digits);
    if (st.length != 0 && !(word_bits & 1u)) finish_word<mask>(st, visit);
    std::uint32_t remaining = word_bits;
    while (remaining != 0) {
      const auto start = static_cast<unsigned>(__builtin_ctz(remaining));
      const auto run = static_cast<unsigned>(__builtin_ctzll(~(std::uint64_t{remaining} >> start)));
      const unsigned end = start + run;
      for (unsigned p = start; p < end; ++p) st.hash = add_to_word_hash(st.hash, folded_bytes[p]);
      const auto run_bits = static_cast<std::uint32_t>(((std::uint64_t{1} << run) - 1) << start);
      if (run_bits & ~digit_bits) st.seen = static_cast<std::uint16_t>(st.seen | non_digit_bit);
      st.length += run;
      if (end == 32) break;
      finish_word<mask>(st, visit);
      remaining &= ~run_bits;
    }
  }
  char_pass_range<BucketBits>(bytes, i, size, st, visit);
  word_pass_range<mask>(bytes, i, size, st, visit);
  if (st.length != 0) finish_word<mask>(st, visit);
}
#endif
}  // namespace detail

/// Extracts complexity features in two passes over the bytes (no allocation).
/// \tparam Buckets number of hash buckets (a power of two)
template <std::size_t Buckets>
class complexity_features {
  static_assert(Buckets >= 2 && Buckets <= (std::size_t{1} << 31) && (Buckets & (Buckets - 1)) == 0,
                "Buckets must be a power of two below 2^32");
  static constexpr unsigned bucket_bits = [] {
    unsigned b = 0;
    while ((std::size_t{1} << b) < Buckets) ++b;
    return b;
  }();

 public:
  static constexpr std::size_t buckets = Buckets;

  /// Calls visit(hashed_group, bucket) for every hashed feature occurrence and returns
  /// the dense features and occurrence counts.
  /// \tparam Visitor callable as visit(hashed_group, std::uint32_t) noexcept; if it is also
  ///   callable as visit(hashed_group, const std::uint32_t* buckets, std::size_t count), the
  ///   vector pass hands it up to 8 consecutive buckets of a group at once (same order)
  /// \tparam Arch instruction set of the character pass (arch::scalar is its specification;
  ///   every tag reports the same features in the same order)
  template <class Visitor, class Arch = arch::native>
  HEDGE_ALWAYS_INLINE static feature_summary extract(std::string_view text, Visitor&& visit, Arch = {}) noexcept {
    feature_summary s;
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t size = text.size();

    // Character pass (categories, 4-grams), word pass (unigrams, bigrams).
    detail::scan_state st;
    detail::scan<bucket_bits>(bytes, size, st, visit, Arch{});
    const auto& counts = st.counts;
    const std::uint32_t gram_len = st.gram_len, words = st.words, word_bytes = st.word_bytes, numbers = st.numbers;
    const std::uint32_t digits = counts[detail::digit], math = counts[detail::math], upper = counts[detail::upper],
                        code = counts[detail::code], questions = counts[detail::question],
                        lines = counts[detail::newline] + 1, latex = counts[detail::latex];

    const auto n = static_cast<float>(text.empty() ? 1 : text.size());
    const auto fraction = [n](std::uint32_t k) { return static_cast<float>(k) / n; };
    auto& d = s.dense;
    d[static_cast<std::size_t>(dense_feature::log_bytes)] = std::log1p(static_cast<float>(text.size())) / 8.0f;
    d[static_cast<std::size_t>(dense_feature::log_words)] = std::log1p(static_cast<float>(words)) / 6.0f;
    d[static_cast<std::size_t>(dense_feature::digit_fraction)] = fraction(digits) * 4.0f;
    d[static_cast<std::size_t>(dense_feature::math_fraction)] = fraction(math) * 10.0f;
    d[static_cast<std::size_t>(dense_feature::upper_fraction)] = fraction(upper) * 4.0f;
    d[static_cast<std::size_t>(dense_feature::code_fraction)] = fraction(code) * 10.0f;
    d[static_cast<std::size_t>(dense_feature::question_marks)] = std::log1p(static_cast<float>(questions));
    d[static_cast<std::size_t>(dense_feature::log_lines)] = std::log1p(static_cast<float>(lines)) / 4.0f;
    d[static_cast<std::size_t>(dense_feature::mean_word_length)] =
        words == 0 ? 0.0f : static_cast<float>(word_bytes) / static_cast<float>(words) / 8.0f;
    d[static_cast<std::size_t>(dense_feature::latex_markers)] = std::log1p(static_cast<float>(latex)) / 3.0f;
    d[static_cast<std::size_t>(dense_feature::number_fraction)] =
        words == 0 ? 0.0f : static_cast<float>(numbers) / static_cast<float>(words) * 4.0f;
    // Unigrams plus bigrams between consecutive words; one 4-gram per byte from the fourth on.
    s.occurrences = {words == 0 ? 0 : 2 * words - 1, gram_len >= 4 ? gram_len - 3 : 0};
    return s;
  }

};

}  // namespace hedge::route
