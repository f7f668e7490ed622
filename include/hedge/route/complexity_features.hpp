// hedge/route/complexity_features.hpp: prompt features for the learned complexity scorer.
//
// One pass over the bytes, no allocation, no stored token list:
//   hashed features (feature hashing, Weinberger et al. 2009), each reported to a visitor
//   as (group, bucket):
//     group words: lower-cased word unigrams and adjacent-word bigrams
//     group chars: character 4-grams of the lower-cased text (robust to unseen words)
//   dense features (one float each, already scaled to about [0, 1]):
//     length, word count, digit / math-symbol / upper-case / code-marker fractions,
//     question marks, lines, mean word length, LaTeX markers, numbers.
// A linear model scores a prompt as bias + dense . w_dense + (sum of bucket weights of
// each group) / sqrt(occurrences in that group): the normalisation keeps long and
// short prompts on one scale, and can be applied after the pass, so scoring needs no
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

/// What one pass produces besides the hashed features it reported.
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
/// low 3 bits = counter category, bit 3 = word byte, bits 8.. = folded byte (0 for separators).
enum byte_category : std::uint8_t { other, digit, upper, math, code, latex, question, newline, category_count };
inline constexpr std::uint16_t word_bit = 8;

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
    t[c] = static_cast<std::uint16_t>(category | (word ? word_bit : 0) | (word ? folded << 8 : 0));
  }
  return t;
}
inline constexpr std::array<std::uint16_t, 256> byte_classes = make_byte_classes();
}  // namespace detail

/// Extracts complexity features in one pass.
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
    // Category counts as eight 8-bit lanes of one integer (flushed every 255 bytes): one
    // add per byte instead of a read-modify-write of a counter array.
    std::array<std::uint32_t, detail::category_count> counts{};
    std::uint64_t lanes = 0;
    std::uint32_t lane_bytes = 0;
    std::uint32_t words = 0, word_bytes = 0, numbers = 0;
    std::uint32_t word_hash = 0, prev_word = 0;
    bool in_word = false, word_numeric = true;
    std::uint32_t gram = 0;  // last four folded bytes; a run of separators counts as one space
    std::uint32_t gram_len = 0;

    const auto end_word = [&]() noexcept {
      const std::uint32_t h = detail::mix32(word_hash);
      visit(hashed_group::words, h & mask);
      if (words > 0) visit(hashed_group::words, detail::mix32(prev_word * 0x9e3779b1u + h) & mask);
      prev_word = h;
      ++words;
      numbers += word_numeric ? 1 : 0;
      word_hash = 0;
      in_word = false;
      word_numeric = true;
    };

    for (char raw : text) {
      const std::uint16_t cls = detail::byte_classes[static_cast<unsigned char>(raw)];
      lanes += std::uint64_t{1} << (8u * (cls & 7u));
      if (++lane_bytes == 255) flush_lanes(lanes, lane_bytes, counts);
      std::uint32_t folded = ' ';
      if (cls & detail::word_bit) {
        folded = cls >> 8;
        word_hash = ((word_hash << 5) | (word_hash >> 27)) ^ folded;  // rotate-xor; mixed at word end
        word_numeric = word_numeric && (cls & 7u) == detail::digit;
        in_word = true;
        ++word_bytes;
      } else {
        if (in_word) end_word();
        if ((gram & 0xffu) == ' ') continue;  // collapse separator runs
      }
      // Character 4-grams, Fibonacci hashing (Knuth): one multiply per byte.
      gram = (gram << 8) | folded;
      if (++gram_len >= 4) visit(hashed_group::chars, (gram * 0x9e3779b1u) >> (32 - bucket_bits));
    }
    if (in_word) end_word();
    flush_lanes(lanes, lane_bytes, counts);
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

 private:
  static void flush_lanes(std::uint64_t& lanes, std::uint32_t& bytes,
                          std::array<std::uint32_t, detail::category_count>& counts) noexcept {
    for (std::size_t k = 0; k < detail::category_count; ++k) counts[k] += (lanes >> (8 * k)) & 0xffu;
    lanes = 0;
    bytes = 0;
  }
};

}  // namespace hedge::route
