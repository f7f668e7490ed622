// hedge/route/complexity_features.hpp: prompt features for the learned complexity scorer.
//
// Two passes over the bytes (characters, then words), no allocation, no stored token list:
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
  /// \tparam Visitor callable as visit(hashed_group, std::uint32_t) noexcept
  template <class Visitor>
  static feature_summary extract(std::string_view text, Visitor&& visit) noexcept {
    constexpr std::uint32_t mask = static_cast<std::uint32_t>(Buckets - 1);
    feature_summary s;
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t size = text.size();

    // Pass 1: byte categories and character 4-grams. Two short loops with few live values
    // run faster than one loop doing everything (the passes are instruction-bound).
    // Category counts are eight 8-bit lanes of one integer, flushed every 255 bytes.
    std::array<std::uint32_t, detail::category_count> counts{};
    std::uint32_t gram = 0;  // last four folded bytes; a run of separators counts as one space
    std::uint32_t gram_len = 0;
    for (std::size_t chunk = 0; chunk < size; chunk += 255) {
      const std::size_t end = size - chunk < 255 ? size : chunk + 255;
      std::uint64_t lanes = 0;
      for (std::size_t k = chunk; k < end; ++k) {
        const std::uint16_t cls = detail::byte_classes[bytes[k]];
        lanes += std::uint64_t{1} << (8u * (cls & 7u));
        const std::uint32_t folded = cls >> 8;
        if (folded == ' ' && (gram & 0xffu) == ' ') continue;  // collapse separator runs
        gram = (gram << 8) | folded;
        // Fibonacci hashing (Knuth): one multiply per byte.
        if (++gram_len >= 4) visit(hashed_group::chars, (gram * 0x9e3779b1u) >> (32 - bucket_bits));
      }
      for (std::size_t c = 0; c < detail::category_count; ++c) counts[c] += (lanes >> (8 * c)) & 0xffu;
    }

    // Pass 2: words (maximal runs of letters, digits and non-ASCII bytes), unigrams and bigrams.
    std::uint32_t words = 0, word_bytes = 0, numbers = 0, prev_word = 0;
    for (std::size_t k = 0;;) {
      while (k < size && !(detail::byte_classes[bytes[k]] & detail::word_bit)) ++k;
      if (k == size) break;
      const std::size_t start = k;
      std::uint32_t hash = 0;  // rotate-xor per byte, mixed at the end of the word
      std::uint16_t seen = 0;
      for (; k < size; ++k) {
        const std::uint16_t cls = detail::byte_classes[bytes[k]];
        if (!(cls & detail::word_bit)) break;
        hash = ((hash << 5) | (hash >> 27)) ^ (cls >> 8);
        seen |= cls;
      }
      const std::uint32_t h = detail::mix32(hash);
      visit(hashed_group::words, h & mask);
      if (words > 0) visit(hashed_group::words, detail::mix32(prev_word * 0x9e3779b1u + h) & mask);
      prev_word = h;
      ++words;
      word_bytes += static_cast<std::uint32_t>(k - start);
      numbers += (seen & detail::non_digit_bit) ? 0 : 1;
    }
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
