// hedge/route/complexity_features.hpp: prompt features for the learned complexity scorer.
//
// Two passes over the bytes (characters, then words), no allocation, no stored token list.
// The AVX2 path does both in one pass over 32-byte blocks (classification by compares and
// nibble tables, 8 gram hashes per multiply from in-register windows, words from the bit
// masks of two blocks at a time, each hashed with one load, one mask and one multiply) and
// reports the same buckets in the same order as the scalar passes, its specification:
//   hashed features (feature hashing, Weinberger et al. 2009), each reported to a visitor
//   as (group, bucket):
//     group words: lower-cased word unigrams and adjacent-word bigrams (a word by its first
//                  8 bytes and its length)
//     group chars: character 4-grams of the folded text (lower case, white space and control
//                  bytes as ' ', punctuation kept) ending at every second byte (0-based
//                  offsets 3, 5, 7, ...): robust to unseen words, sees notation. Consecutive
//                  grams overlap by two bytes, so every byte is in two grams; on MMLU
//                  leave-domain-out this scores the APGR of a gram at every byte (0.6065
//                  against 0.6077 over ten hash seeds) with half the weight lookups, the
//                  scorer's largest cost (docs/routing.md)
//   dense features (one float each, already scaled to about [0, 1]):
//     length, word count, digit / math-symbol / upper-case / code-marker fractions,
//     question marks, lines, mean word length, LaTeX markers, numbers.
// A linear model scores a prompt as bias + dense . w_dense + (sum of bucket weights of
// each group) / sqrt(occurrences in that group): the normalisation keeps long and
// short prompts on one scale, and can be applied at the end, so scoring needs no
// feature vector at all.
// Every feature saturates, so a linear model's score has a bound for any input (a 16 MB
// token, a 50 MB field): each dense feature stops at dense_feature_max (counts at 2^32,
// the mean word length at 32 bytes), and past hashed_saturation occurrences a group's
// normalisation turns from 1/sqrt(n) to sqrt(N)/n, so the group's term is at most
// sqrt(N) times its largest weight. MMLU's longest prompt (4.9 KB: 2,447 grams, a mean
// word length of 8.2) is far below every saturation point.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/barrier.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/route/avx2_bytes.hpp"


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

/// The multipliers of the three feature hashes. Multiply-shift hashing (Dietzfelbinger et
/// al. 1997): with an odd multiplier drawn at random, the top bits of the product are a
/// universal hash of the key, so a seed draws a new, equally good set of buckets. Which
/// features share a bucket changes with the seed, and with it the trained model's quality:
/// on MMLU leave-domain-out, APGR spans up to 0.02 over five seeds, so an evaluation
/// reports the mean over several (hedge-route-eval --hash-seeds). Seed 0 is 2^64 / phi
/// (Fibonacci hashing, Knuth TAOCP 6.4), xxHash64's PRIME64_2 and Knuth's 2654435761, a
/// prime near 2^32 / phi.
struct feature_hash_keys {
  std::uint64_t word = 0x9e3779b97f4a7c15u;
  std::uint64_t bigram = 0xc2b2ae3d27d4eb4fu;
  std::uint32_t gram = 0x9e3779b1u;

  [[nodiscard]] static constexpr feature_hash_keys of_seed(std::uint64_t seed) noexcept {
    if (seed == 0) return {};
    // SplitMix64 (Steele et al. 2014) outputs, made odd.
    const auto next = [&seed] {
      std::uint64_t z = (seed += 0x9e3779b97f4a7c15u);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
      return (z ^ (z >> 31)) | 1u;
    };
    const std::uint64_t word = next(), bigram = next();
    return {word, bigram, static_cast<std::uint32_t>(next() >> 32) | 1u};
  }
};

/// Occurrences of a hashed group past which its normalisation saturates (feature_summary::
/// group_scale): 128 KB of text in 4-grams.
inline constexpr std::uint64_t hashed_saturation = std::uint64_t{1} << 16;
/// sqrt(hashed_saturation): the most a group's normalised sum can be, in units of its
/// largest weight.
inline constexpr float hashed_saturation_sqrt = 256.0f;
static_assert(hashed_saturation_sqrt * hashed_saturation_sqrt == static_cast<float>(hashed_saturation));

/// What extraction produces besides the hashed features it reported.
struct feature_summary {
  std::array<float, dense_feature_count> dense{};
  /// Occurrences reported per hashed group (for the normalisation).
  std::array<std::uint64_t, hashed_group_count> occurrences{};

  /// Scale applied to every hashed feature of group g: 1/sqrt(n) for n occurrences, and
  /// sqrt(N)/n past N = hashed_saturation (the two meet at N), so that the sum of n
  /// weights of magnitude at most w, scaled, stays within sqrt(N) w however long the prompt.
  [[nodiscard]] float group_scale(hashed_group g) const noexcept {
    const auto n = occurrences[static_cast<std::size_t>(g)];
    if (n == 0) return 0.0f;
    return n <= hashed_saturation ? 1.0f / std::sqrt(static_cast<float>(n)) : hashed_saturation_sqrt / static_cast<float>(n);
  }
};

namespace detail {
/// Word hashing: the first 8 folded bytes of a word as a little-endian integer (zero-padded:
/// word bytes are never 0, so the padding is unambiguous), with the length (mod 256) xor-ed
/// into the top byte, times the word multiplier (feature_hash_keys). A word longer
/// than 8 bytes is known by its first 8 bytes and its length: every word then costs one
/// load, one mask and one multiply, with no branch on its length, which on varied text the
/// branch predictor missed for about one word in ten ("international" and "internally"
/// still differ; words sharing 8 leading bytes and a length share a feature). Buckets are
/// the top bits of the product, the well-mixed ones (its low bits depend only on the low
/// bits of the factors).
constexpr std::uint64_t word_hash(std::uint64_t first8, std::uint32_t length, std::uint64_t key) noexcept {
  return (first8 ^ (std::uint64_t{length} << 56)) * key;
}
/// Bigram of two word hashes; the rotation makes it order-dependent ("a b" != "b a").
constexpr std::uint64_t bigram_hash(std::uint64_t previous, std::uint64_t hash, std::uint64_t key) noexcept {
  return (((previous << 29) | (previous >> 35)) ^ hash) * key;
}

/// Per-byte class, one table load per byte instead of a chain of comparisons:
/// low 3 bits = counter category, bit 3 = word byte, bit 4 = word byte that is not a digit,
/// bits 8.. = folded byte: lower case; ' ' for spaces and control bytes; punctuation and
/// symbols as they are (they mark maths, code and quoting, which the 4-grams then see).
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
    const unsigned folded = (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c <= ' ' ? ' ' : c;
    const unsigned non_digit = word && !(c >= '0' && c <= '9') ? non_digit_bit : 0;
    t[c] = static_cast<std::uint16_t>(category | (word ? word_bit : 0) | non_digit | folded << 8);
  }
  return t;
}
inline constexpr std::array<std::uint16_t, 256> byte_classes = make_byte_classes();

/// log(1 + n), inline: the dense features take it of five counts per prompt, and five calls
/// into libm's log1pf were 2-3 % of a router decision. y = 1 + n = m 2^e with m in
/// [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172: the
/// series to s^9 leaves under 1e-9, below a float's rounding (exact for n below 2^53).
constexpr float log1p_count(std::uint64_t n) noexcept {
  const auto bits = std::bit_cast<std::uint64_t>(static_cast<double>(n) + 1.0);
  // Exponent relative to [sqrt(1/2), sqrt(2)): 0x3fe6a09e667f3bcd is sqrt(1/2).
  const auto e = static_cast<std::int64_t>((bits - 0x3fe6a09e667f3bcdu) >> 52);
  const double m = std::bit_cast<double>(bits - (static_cast<std::uint64_t>(e) << 52));
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  const double series = 1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 / 9)));
  return static_cast<float>(static_cast<double>(e) * 0.6931471805599453 + 2.0 * s * series);
}

/// Counts at which the log-count features saturate (4 GiB of text).
inline constexpr std::uint64_t count_saturation = std::uint64_t{1} << 32;
/// log(1 + n), n saturated at count_saturation.
constexpr float log1p_saturated(std::uint64_t n) noexcept {
  return log1p_count(n < count_saturation ? n : count_saturation);
}
/// Mean word length (bytes) at which its feature saturates: four times an English word's,
/// past it a prompt is a blob (a long token, base64), however long.
inline constexpr float mean_word_length_saturation = 32.0f;

/// Scan state, carried from the vector blocks into the scalar tail.
struct scan_state {
  feature_hash_keys keys;
  // Counts are 64-bit: a prompt of 4 GiB or more must not wrap them (the occurrences they
  // give bound the hashed sums).
  std::array<std::uint64_t, category_count> counts{};
  std::uint32_t gram = 0;      ///< last four folded bytes, the latest in the low byte
  std::uint64_t gram_len = 0;  ///< bytes so far
  // Words: maximal runs of letters, digits and non-ASCII bytes.
  std::uint64_t words = 0, word_bytes = 0, numbers = 0;
  std::uint64_t prev_word = 0;
  std::uint64_t first8 = 0;   ///< first 8 bytes of the word in progress, little-endian
  std::uint32_t length = 0;   ///< bytes of the word in progress (0: between words)
  std::uint16_t seen = 0;     ///< class bits of the word in progress
};

/// Reports the unigram and (after the first word) the bigram of a word with hash h.
/// Number words are counted by the caller (the vector pass counts them per unit).
template <unsigned BucketBits, class Visitor>
HEDGE_ALWAYS_INLINE void report_word(scan_state& st, std::uint64_t h, Visitor& visit) noexcept {
  visit(hashed_group::words, static_cast<std::uint32_t>(h >> (64 - BucketBits)));
  if (st.words > 0)
    visit(hashed_group::words, static_cast<std::uint32_t>(bigram_hash(st.prev_word, h, st.keys.bigram) >> (64 - BucketBits)));
  st.prev_word = h;
  ++st.words;
}

/// Reports the word in progress and starts a new one.
template <unsigned BucketBits, class Visitor>
HEDGE_ALWAYS_INLINE void finish_word(scan_state& st, Visitor& visit) noexcept {
  report_word<BucketBits>(st, word_hash(st.first8, st.length, st.keys.word), visit);
  st.numbers += (st.seen & non_digit_bit) == 0 ? 1 : 0;
  st.first8 = 0;
  st.length = 0;
  st.seen = 0;
}

/// Adds a word byte of class `cls` to the word in progress.
HEDGE_ALWAYS_INLINE void add_word_byte(scan_state& st, std::uint16_t cls) noexcept {
  if (st.length < 8) st.first8 |= std::uint64_t{static_cast<std::uint32_t>(cls >> 8u)} << (8u * st.length);
  st.seen = static_cast<std::uint16_t>(st.seen | cls);
  ++st.length;
}

/// Scalar word pass over bytes [begin, end) (the specification); a word may continue
/// from before `begin` and past `end`.
template <unsigned BucketBits, class Visitor>
HEDGE_ALWAYS_INLINE void word_pass_range(const unsigned char* bytes, std::size_t begin, std::size_t end,
                                         scan_state& st, Visitor& visit) noexcept {
  for (std::size_t k = begin; k < end; ++k) {
    const std::uint16_t cls = byte_classes[bytes[k]];
    if (cls & word_bit) {
      add_word_byte(st, cls);
      ++st.word_bytes;
    } else if (st.length != 0) {
      finish_word<BucketBits>(st, visit);
    }
  }
}

/// Scalar character pass over bytes [begin, end): the specification.
/// Category counts are eight 8-bit lanes of one integer, flushed every 255 bytes.
template <unsigned BucketBits, class Visitor>
HEDGE_ALWAYS_INLINE void char_pass_range(const unsigned char* bytes, std::size_t begin, std::size_t end,
                                         scan_state& st, Visitor& visit) noexcept {
  std::uint32_t gram = st.gram;
  std::uint64_t gram_len = st.gram_len;
  const std::uint32_t key = st.keys.gram;
  for (std::size_t chunk = begin; chunk < end; chunk += 255) {
    const std::size_t chunk_end = end - chunk < 255 ? end : chunk + 255;
    std::uint64_t lanes = 0;
    for (std::size_t k = chunk; k < chunk_end; ++k) {
      const std::uint16_t cls = byte_classes[bytes[k]];
      lanes += std::uint64_t{1} << (8u * (cls & 7u));
      gram = (gram << 8) | static_cast<std::uint32_t>(cls >> 8);
      // Multiply-shift hashing: one multiply per gram. gram_len is the byte's offset + 1.
      if (++gram_len >= 4 && gram_len % 2 == 0) visit(hashed_group::chars, (gram * key) >> (32 - BucketBits));
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
  char_pass_range<BucketBits>(bytes, 0, size, st, visit);
  word_pass_range<BucketBits>(bytes, 0, size, st, visit);
  if (st.length != 0) finish_word<BucketBits>(st, visit);
}

}  // namespace detail

#if HEDGE_SIMD_X86
namespace avx2 {
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

HEDGE_ALWAYS_INLINE std::uint32_t popcount(std::uint32_t m) noexcept {
  return static_cast<std::uint32_t>(__builtin_popcount(m));
}
HEDGE_ALWAYS_INLINE std::uint32_t popcount64(std::uint64_t m) noexcept {
  return static_cast<std::uint32_t>(__builtin_popcountll(m));
}

/// The low n bytes (1 <= n <= 8) of a chunk. The mask is 2^(8n) - 1 written so that n = 8
/// needs no branch and shifts by less than 64: BMI2 compilers make it a shlx and a dec
/// (a bzhi would need BMI2 in the target attribute), others a shl.
HEDGE_ALWAYS_INLINE std::uint64_t low_bytes(std::uint64_t chunk, unsigned n) noexcept {
  return chunk & ((std::uint64_t{2} << (8 * n - 1)) - 1);
}

/// Hash of a word of `length` bytes whose folded bytes start at `folded` (8 readable bytes;
/// those past the word are masked off), the same value the scalar word pass builds byte by byte.
HEDGE_ALWAYS_INLINE std::uint64_t hash_folded_word(const unsigned char* folded, std::uint32_t length,
                                                   std::uint64_t key) noexcept {
  std::uint64_t chunk;
  std::memcpy(&chunk, folded, sizeof chunk);  // little-endian, as the scalar pass builds it
  return detail::word_hash(low_bytes(chunk, length < 8 ? length : 8), length, key);
}

/// As hash_folded_word, for a word in the text itself (needs 8 readable bytes at `begin`):
/// for a word carried into a unit, read from the text, not from the folded blocks, so the
/// load never spans the stores of two units (the store buffer could not forward it).
HEDGE_ALWAYS_INLINE std::uint64_t hash_word_at(const unsigned char* bytes, std::size_t begin, std::uint32_t length,
                                               std::uint64_t key) noexcept {
  std::uint64_t chunk;
  std::memcpy(&chunk, bytes + begin, sizeof chunk);
  // Lower case: a word byte below 0x80 is a letter or a digit, and setting its bit 5 folds
  // upper to lower case and keeps digits; bytes from 0x80 stay as they are.
  chunk |= (~chunk & 0x8080808080808080u) >> 2;
  return hash_folded_word(reinterpret_cast<const unsigned char*>(&chunk), length, key);
}

/// Bit k set when byte k of the block is in the set of `lut` (a nibble_set), from the
/// block's low nibbles and the bit of each byte's high nibble.
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE std::uint32_t member_bits(__m256i lut, __m256i low_nibbles,
                                                                __m256i high_nibble_bits) noexcept {
  const __m256i hit = _mm256_and_si256(_mm256_shuffle_epi8(lut, low_nibbles), high_nibble_bits);
  return ~bits(_mm256_cmpeq_epi8(hit, _mm256_setzero_si256()));
}

/// The AVX2 pass over whole 32-byte blocks, doing both the character and the word work
/// (words from the word-byte bit masks of a unit of two blocks); `scan` below runs it and
/// hands the tail to the scalar passes. Each group's features come in the scalar order (char
/// and word reports interleave by unit).
template <unsigned BucketBits, class Visitor>
struct feature_blocks {
  const unsigned char* bytes;
  detail::scan_state& st;
  Visitor& visit;
  __m256i low_nibble, math_lut, code_lut, latex_lut, high_lut;
  // The 4-grams of a block end at its odd bytes (blocks start at even offsets); batch g
  // holds those ending at bytes 16g+1, 16g+3, ..., 16g+15. Gram t is bytes t-3..t, most
  // significant first, as the scalar (gram << 8) | byte builds it. Each 128-bit lane of
  // the window holds 12 bytes: the low lane bytes 16g-4..16g+7 (grams 16g+1..16g+7), the
  // high lane bytes 16g+4..16g+15 (grams 16g+9..16g+15), so one pattern serves both.
  __m256i gram_pattern;
  // Dwords of the block in each window (the last of a lane unused; the first of batch 0 is
  // dword -1, the previous block's last, blended in).
  __m256i window_dwords[2];
  // Constants made opaque (compiler/barrier.hpp), or GCC rebuilds them in every block.
  __m256i gram_key;
  std::uint64_t word_key, bigram_key;
  __m256i spaces, last_dword;
  // The unit's two folded blocks, and 8 more bytes so that a word's first 8 are one load.
  alignas(32) std::array<unsigned char, 72> folded_bytes{};
  alignas(32) std::array<std::uint32_t, 8> buckets{};
  __m256i previous_dword;
  std::uint32_t carried = 0;  ///< bytes of the word in progress before the unit (0: none)
  bool carried_non_digit = false;

  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE feature_blocks(const unsigned char* text, detail::scan_state& state,
                                                       Visitor& visitor) noexcept
      : bytes(text),
        st(state),
        visit(visitor),
        low_nibble(_mm256_set1_epi8(0x0f)),
        math_lut(broadcast16(math_set)),
        code_lut(broadcast16(code_set)),
        latex_lut(broadcast16(latex_set)),
        high_lut(broadcast16(high_nibble_bit)),
        gram_pattern(_mm256_setr_epi8(5, 4, 3, 2, 7, 6, 5, 4, 9, 8, 7, 6, 11, 10, 9, 8,  //
                                      5, 4, 3, 2, 7, 6, 5, 4, 9, 8, 7, 6, 11, 10, 9, 8)),
        window_dwords{_mm256_setr_epi32(0, 0, 1, 0, 1, 2, 3, 0), _mm256_setr_epi32(3, 4, 5, 0, 5, 6, 7, 0)},
        gram_key(compiler::opaque(_mm256_set1_epi32(static_cast<int>(state.keys.gram)))),
        word_key(state.keys.word),
        bigram_key(state.keys.bigram),
        spaces(compiler::opaque(_mm256_set1_epi8(' '))),
        last_dword(compiler::opaque(_mm256_set1_epi32(7))),
        previous_dword(_mm256_set1_epi32(static_cast<int>(__builtin_bswap32(state.gram)))) {}

  /// One block at bytes + i, the unit's block `half`: counts, folding (stored for the word
  /// loop), the 4-grams; returns its word-byte bits, and its digit bits in `digit_bits`.
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE std::uint32_t block(std::size_t i, unsigned half,
                                                            std::uint32_t& digit_bits) noexcept {
    using namespace detail;  // the byte categories
    const __m256i v = load32(bytes + i);
    const __m256i digits = in_range(v, '0', '9'), uppers = in_range(v, 'A', 'Z');
    const __m256i word = _mm256_or_si256(_mm256_or_si256(digits, uppers),
                                         _mm256_or_si256(in_range(v, 'a', 'z'), _mm256_cmpgt_epi8(_mm256_setzero_si256(), v)));
    const __m256i hi_bit = _mm256_shuffle_epi8(high_lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), low_nibble));
    const __m256i lo = _mm256_and_si256(v, low_nibble);
    digit_bits = bits(digits);
    st.counts[digit] += popcount(digit_bits);
    st.counts[upper] += popcount(bits(uppers));
    st.counts[math] += popcount(member_bits(math_lut, lo, hi_bit));
    st.counts[code] += popcount(member_bits(code_lut, lo, hi_bit));
    st.counts[latex] += popcount(member_bits(latex_lut, lo, hi_bit));
    st.counts[question] += popcount(bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('?'))));
    st.counts[newline] += popcount(bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n'))));

    // Fold: lower case; ' ' for spaces and control bytes (0..32).
    // (' ' is also the case bit; a byte is at most ' ' when it equals its maximum with ' '.)
    const __m256i lowered = _mm256_or_si256(v, _mm256_and_si256(uppers, spaces));
    const __m256i folded = _mm256_blendv_epi8(lowered, spaces, _mm256_cmpeq_epi8(_mm256_max_epu8(v, spaces), spaces));
    _mm256_store_si256(reinterpret_cast<__m256i*>(folded_bytes.data() + 32 * half), folded);
    const std::uint32_t word_bits = bits(word);
    st.word_bytes += popcount(word_bits);

    // 4-grams: 8 per multiply, in text order.
    for (std::size_t g = 0; g < 2; ++g) {
      __m256i window = _mm256_permutevar8x32_epi32(folded, window_dwords[g]);
      if (g == 0) window = _mm256_blend_epi32(window, previous_dword, 0x01);
      const __m256i grams = _mm256_shuffle_epi8(window, gram_pattern);
      const __m256i hashed = _mm256_srli_epi32(_mm256_mullo_epi32(grams, gram_key), static_cast<int>(32 - BucketBits));
      _mm256_store_si256(reinterpret_cast<__m256i*>(buckets.data()), hashed);
      if (g != 0 || st.gram_len >= 2) {  // one test per block: batch 1 is always whole
        if constexpr (requires { visit(hashed_group::chars, buckets.data(), std::size_t{8}); }) {
          visit(hashed_group::chars, buckets.data(), std::size_t{8});
        } else {
          for (std::size_t t = 0; t < 8; ++t) visit(hashed_group::chars, buckets[t]);
        }
      } else {  // the text's first block: its first gram ends at byte 3, not 1
        for (std::size_t t = 1; t < 8; ++t) visit(hashed_group::chars, buckets[t]);
      }
    }
    previous_dword = _mm256_permutevar8x32_epi32(folded, last_dword);
    st.gram_len += 32;
    return word_bits;
  }

  /// The words of a unit of Width bytes at unit_begin (two blocks; one at the end of the
  /// text): each run of word bits. A run touching the unit's last bit may continue in the
  /// next unit; a word is hashed once its end is known. Two blocks per word loop halve the
  /// loop exits, which the branch predictor misses on varied text (a different number of
  /// words ends in each unit). Starts and ends are taken from two masks (lowest bit, then
  /// clear it), two short dependency chains instead of one per word.
  template <unsigned Width>
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void words_of_unit(std::size_t unit_begin, std::uint64_t word_bits,
                                                           std::uint64_t digit_bits) noexcept {
    using namespace detail;  // report_word, bigram_hash
    constexpr std::uint64_t in_unit = Width == 64 ? ~std::uint64_t{0} : 0xffffffffu;
    const std::uint64_t non_digit_bits = word_bits & ~digit_bits;
    const std::uint64_t starts_here = word_bits & ~((word_bits << 1) | (carried != 0 ? 1u : 0u));
    // Last bytes of words ending here (a run reaching the unit's last byte may go on).
    std::uint64_t ends = word_bits & ~((word_bits >> 1) | (std::uint64_t{1} << (Width - 1)));
    // Number words starting and ending in the unit, from the masks: adding a run's start
    // bit to the digit bits carries to the first byte past the run's leading digits; the
    // word is a number when that byte is a separator (not a non-digit word byte, not past
    // the unit: a word continuing into the next unit is counted when its end is known).
    const std::uint64_t past_digits = (digit_bits + (starts_here & digit_bits)) & ~digit_bits;
    st.numbers += popcount64(past_digits & ~word_bits & in_unit);
    const auto ctz = [](std::uint64_t m) { return static_cast<unsigned>(__builtin_ctzll(m)); };
    if (carried != 0) {  // the word in progress continues with the unit's leading run
      const unsigned run = (~word_bits & in_unit) != 0 ? ctz(~word_bits) : Width;
      const std::uint64_t leading = run == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << run) - 1;
      carried_non_digit = carried_non_digit || (non_digit_bits & leading) != 0;
      if (run == Width) {  // no start or end in the unit
        carried += Width;
      } else {
        if (run != 0) ends &= ends - 1;
        report_word<BucketBits>(st, hash_word_at(bytes, unit_begin - carried, carried + run, word_key), visit);
        st.numbers += carried_non_digit ? 0 : 1;
        carried = 0;
        carried_non_digit = false;
      }
    }
    // Starts and ends now pair up in order, but for one last start whose run reaches the
    // unit's end (carried on after the loop).
    std::uint64_t starts = starts_here;
    // Words in the unit are hashed from its folded bytes: one starts at byte 63 at the
    // latest, so the 8 padding bytes cover its load.
    const unsigned char* const unit = folded_bytes.data();
    if (st.words == 0 && ends != 0) [[unlikely]] {  // the text's first word: no bigram
      report_word<BucketBits>(st, hash_folded_word(unit + ctz(starts), ctz(ends) + 1 - ctz(starts), word_key), visit);
      ends &= ends - 1;
      starts &= starts - 1;
    }
    // Every word from here on has a predecessor: counted per unit, bigrams unconditional.
    // A word's bytes are [start, past end): the end bits moved up by one (they fit, a word
    // ending here ends before the unit's last bit) give each length with one subtraction.
    st.words += popcount64(ends);
    for (std::uint64_t past_ends = ends << 1; past_ends != 0; past_ends &= past_ends - 1, starts &= starts - 1) {
      const unsigned start = ctz(starts);
      const std::uint64_t h = hash_folded_word(unit + start, ctz(past_ends) - start, word_key);
      visit(hashed_group::words, static_cast<std::uint32_t>(h >> (64 - BucketBits)));
      visit(hashed_group::words, static_cast<std::uint32_t>(bigram_hash(st.prev_word, h, bigram_key) >> (64 - BucketBits)));
      st.prev_word = h;
    }
    if (starts != 0) {
      const unsigned start = ctz(starts);
      carried = Width - start;
      carried_non_digit = (non_digit_bits >> start) != 0;
    }
  }
};

/// Both passes over the whole text, AVX2: feature_blocks over the whole 32-byte blocks,
/// then the scalar passes on the tail.
template <unsigned BucketBits, class Visitor>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void scan(const unsigned char* bytes, std::size_t size, detail::scan_state& st,
                                                Visitor& visit) noexcept {
  feature_blocks<BucketBits, Visitor> pass{bytes, st, visit};
  std::size_t i = 0;
  for (; i + 64 <= size; i += 64) {
    std::uint32_t digits0, digits1;
    const std::uint32_t words0 = pass.block(i, 0, digits0);
    const std::uint32_t words1 = pass.block(i + 32, 1, digits1);
    pass.template words_of_unit<64>(i, words0 | std::uint64_t{words1} << 32, digits0 | std::uint64_t{digits1} << 32);
  }
  if (i + 32 <= size) {
    std::uint32_t digits0;
    const std::uint32_t words0 = pass.block(i, 0, digits0);
    pass.template words_of_unit<32>(i, words0, digits0);
    i += 32;
  }
  // Hand a word in progress to the scalar pass as its state after the word's bytes so far.
  for (std::size_t k = i - pass.carried; k < i; ++k) detail::add_word_byte(st, detail::byte_classes[bytes[k]]);
  if (i != 0) st.gram = __builtin_bswap32(static_cast<std::uint32_t>(_mm256_cvtsi256_si32(pass.previous_dword)));
  detail::char_pass_range<BucketBits>(bytes, i, size, st, visit);
  detail::word_pass_range<BucketBits>(bytes, i, size, st, visit);
  if (st.length != 0) detail::finish_word<BucketBits>(st, visit);
}
}  // namespace avx2

namespace detail {
/// The AVX2 overload of scan (avx512bw and the other tags derived from avx2 run it).
template <unsigned BucketBits, class Visitor>
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void scan(const unsigned char* bytes, std::size_t size, scan_state& st,
                                                Visitor& visit, arch::avx2) noexcept {
  avx2::scan<BucketBits>(bytes, size, st, visit);
}
}  // namespace detail
#endif

/// The largest value of each dense feature for any input, by dense_feature index (the
/// smallest is 0): the formulas of complexity_features::summarize at their saturation
/// points (counts at detail::count_saturation, fractions at 1, the mean word length at
/// detail::mean_word_length_saturation).
inline constexpr std::array<float, dense_feature_count> dense_feature_max{
    detail::log1p_saturated(detail::count_saturation) / 8.0f,  // log_bytes
    detail::log1p_saturated(detail::count_saturation) / 6.0f,  // log_words
    4.0f,                                                       // digit_fraction
    10.0f,                                                      // math_fraction
    4.0f,                                                       // upper_fraction
    10.0f,                                                      // code_fraction
    detail::log1p_saturated(detail::count_saturation),         // question_marks
    detail::log1p_saturated(detail::count_saturation) / 4.0f,  // log_lines
    detail::mean_word_length_saturation / 8.0f,                 // mean_word_length
    detail::log1p_saturated(detail::count_saturation) / 3.0f,  // latex_markers
    4.0f,                                                       // number_fraction
};

/// Extracts complexity features in two passes over the bytes (no allocation).
/// \tparam Buckets number of hash buckets (a power of two)
template <std::size_t Buckets>
class complexity_features {
  static_assert(Buckets >= 2 && Buckets <= (std::size_t{1} << 31) && (Buckets & (Buckets - 1)) == 0,
                "Buckets must be a power of two below 2^32");

 public:
  static constexpr std::size_t buckets = Buckets;
  static constexpr unsigned bucket_bits = [] {
    unsigned b = 0;
    while ((std::size_t{1} << b) < Buckets) ++b;
    return b;
  }();

  /// Calls visit(hashed_group, bucket) for every hashed feature occurrence and returns
  /// the dense features and occurrence counts.
  /// \tparam Visitor callable as visit(hashed_group, std::uint32_t) noexcept; if it is also
  ///   callable as visit(hashed_group, const std::uint32_t* buckets, std::size_t count), the
  ///   vector pass hands it up to 8 consecutive buckets of a group at once (same order;
  ///   `buckets` is 32-byte aligned and 8 entries are readable)
  /// \tparam A instruction set of the passes: arch::best (the best this CPU runs, chosen once
  ///   per call) or a tag (arch::scalar is the specification; every tag reports the same
  ///   features in the same order)
  /// \param keys the hash multipliers (feature_hash_keys::of_seed; a model scores with the
  ///   keys it was trained with)
  template <class Visitor, class A = arch::best>
  static feature_summary extract(std::string_view text, Visitor&& visit, const feature_hash_keys& keys = {},
                                 A = {}) noexcept {
    return arch::visit<A>([&](auto tag) { return summarize(text, counted(text, visit, keys, tag)); });
  }

  /// The passes of one arch (character pass: categories, 4-grams; word pass: unigrams,
  /// bigrams), reporting to `visit`; their counts go to `summarize`. Inlined into a caller
  /// compiled for the arch (complexity_model's scorer).
  template <class Visitor>
  HEDGE_ALWAYS_INLINE static detail::scan_state passes(std::string_view text, Visitor& visit,
                                                       const feature_hash_keys& keys, arch::scalar) noexcept {
    detail::scan_state st;
    st.keys = keys;
    detail::scan<bucket_bits>(reinterpret_cast<const unsigned char*>(text.data()), text.size(), st, visit, arch::scalar{});
    return st;
  }
#if HEDGE_SIMD_X86
  template <class Visitor>
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static detail::scan_state passes(std::string_view text, Visitor& visit,
                                                                         const feature_hash_keys& keys,
                                                                         arch::avx2) noexcept {
    detail::scan_state st;
    st.keys = keys;
    detail::scan<bucket_bits>(reinterpret_cast<const unsigned char*>(text.data()), text.size(), st, visit, arch::avx2{});
    return st;
  }
#endif

  /// The dense features and occurrence counts from the passes' counts. Floating point, so
  /// it runs outside the arch's target function: FMA contraction there would make the
  /// dense features of a baseline build differ between arches in their last bits.
  HEDGE_ALWAYS_INLINE static feature_summary summarize(std::string_view text, const detail::scan_state& st) noexcept {
    feature_summary s;
    const auto& counts = st.counts;
    const std::uint64_t gram_len = st.gram_len, words = st.words, word_bytes = st.word_bytes, numbers = st.numbers;
    const std::uint64_t digits = counts[detail::digit], math = counts[detail::math], upper = counts[detail::upper],
                        code = counts[detail::code], questions = counts[detail::question],
                        lines = counts[detail::newline] + 1, latex = counts[detail::latex];

    const auto n = static_cast<float>(text.empty() ? 1 : text.size());
    const auto fraction = [n](std::uint64_t k) { return static_cast<float>(k) / n; };
    auto& d = s.dense;
    d[static_cast<std::size_t>(dense_feature::log_bytes)] = detail::log1p_saturated(text.size()) / 8.0f;
    d[static_cast<std::size_t>(dense_feature::log_words)] = detail::log1p_saturated(words) / 6.0f;
    d[static_cast<std::size_t>(dense_feature::digit_fraction)] = fraction(digits) * 4.0f;
    d[static_cast<std::size_t>(dense_feature::math_fraction)] = fraction(math) * 10.0f;
    d[static_cast<std::size_t>(dense_feature::upper_fraction)] = fraction(upper) * 4.0f;
    d[static_cast<std::size_t>(dense_feature::code_fraction)] = fraction(code) * 10.0f;
    d[static_cast<std::size_t>(dense_feature::question_marks)] = detail::log1p_saturated(questions);
    d[static_cast<std::size_t>(dense_feature::log_lines)] = detail::log1p_saturated(lines) / 4.0f;
    d[static_cast<std::size_t>(dense_feature::mean_word_length)] =
        words == 0 ? 0.0f
                   : std::min(static_cast<float>(word_bytes) / static_cast<float>(words),
                              detail::mean_word_length_saturation) / 8.0f;
    d[static_cast<std::size_t>(dense_feature::latex_markers)] = detail::log1p_saturated(latex) / 3.0f;
    d[static_cast<std::size_t>(dense_feature::number_fraction)] =
        words == 0 ? 0.0f : static_cast<float>(numbers) / static_cast<float>(words) * 4.0f;
    // Unigrams plus bigrams between consecutive words; a 4-gram ending at each odd byte from
    // the fourth on.
    s.occurrences = {words == 0 ? 0 : 2 * words - 1, gram_len >= 4 ? gram_len / 2 - 1 : 0};
    return s;
  }

 private:
  /// `passes` as a call of its own, compiled for the arch (an always-inline AVX2 function
  /// cannot be inlined into the dispatching lambda, which has no target attribute).
  template <class Visitor>
  static detail::scan_state counted(std::string_view text, Visitor& visit, const feature_hash_keys& keys,
                                    arch::scalar) noexcept {
    return passes(text, visit, keys, arch::scalar{});
  }
#if HEDGE_SIMD_X86
  template <class Visitor>
  HEDGE_TARGET_AVX2 static detail::scan_state counted(std::string_view text, Visitor& visit,
                                                      const feature_hash_keys& keys, arch::avx2) noexcept {
    return passes(text, visit, keys, arch::avx2{});
  }
#endif
};

}  // namespace hedge::route
