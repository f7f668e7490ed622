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
/// index can be taken from the top bits.
constexpr std::uint32_t mix32(std::uint32_t h) noexcept {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
constexpr char fold(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
constexpr bool is_word_byte(unsigned char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}
}  // namespace detail

/// Extracts complexity features in one pass.
/// \tparam Buckets number of hash buckets (a power of two)
template <std::size_t Buckets>
class complexity_features {
  static_assert(Buckets >= 2 && (Buckets & (Buckets - 1)) == 0, "Buckets must be a power of two");

 public:
  static constexpr std::size_t buckets = Buckets;

  /// Calls visit(hashed_group, bucket) for every hashed feature occurrence and returns
  /// the dense features and occurrence counts.
  /// \tparam Visitor callable as visit(hashed_group, std::uint32_t) noexcept
  template <class Visitor>
  static feature_summary extract(std::string_view text, Visitor&& visit) noexcept {
    constexpr std::uint32_t mask = static_cast<std::uint32_t>(Buckets - 1);
    feature_summary s;
    std::uint32_t digits = 0, math = 0, upper = 0, code = 0, questions = 0, lines = 1, latex = 0;
    std::uint32_t words = 0, word_bytes = 0, numbers = 0;
    std::uint32_t word_hash = 2166136261u, prev_word = 0;
    bool in_word = false, word_numeric = true;
    std::uint32_t gram = 0;  // last four folded bytes, runs of non-word bytes as one space
    std::uint32_t gram_len = 0;
    std::uint32_t word_count = 0, char_count = 0;

    const auto end_word = [&]() noexcept {
      const std::uint32_t h = detail::mix32(word_hash);
      visit(hashed_group::words, h & mask);
      ++word_count;
      if (words > 0) {
        visit(hashed_group::words, detail::mix32(prev_word * 0x9e3779b1u + h) & mask);
        ++word_count;
      }
      prev_word = h;
      ++words;
      numbers += word_numeric ? 1 : 0;
      word_hash = 2166136261u;
      in_word = false;
      word_numeric = true;
    };

    for (char raw : text) {
      const auto c = static_cast<unsigned char>(raw);
      const bool w = detail::is_word_byte(c);
      if (c >= '0' && c <= '9') ++digits;
      if (c >= 'A' && c <= 'Z') ++upper;
      switch (c) {
        case '+': case '-': case '*': case '/': case '=': case '^': case '<': case '>': case '%': case '|':
          ++math;
          break;
        case '{': case '}': case ';': case '_': case '`': case '[': case ']':
          ++code;
          break;
        case '\\': case '$':
          ++latex;
          break;
        case '?': ++questions; break;
        case '\n': ++lines; break;
        default: break;
      }
      if (w) {
        word_hash = (word_hash ^ static_cast<unsigned char>(detail::fold(raw))) * 16777619u;
        word_numeric = word_numeric && c >= '0' && c <= '9';
        in_word = true;
        ++word_bytes;
      } else if (in_word) {
        end_word();
      }
      // Character 4-grams over folded text; a run of separators counts as one space.
      const std::uint32_t folded = w ? static_cast<unsigned char>(detail::fold(raw)) : ' ';
      if (folded == ' ' && (gram & 0xffu) == ' ') continue;
      gram = (gram << 8) | folded;
      if (++gram_len >= 4) {
        visit(hashed_group::chars, detail::mix32(gram ^ 0x5bd1e995u) & mask);
        ++char_count;
      }
    }
    if (in_word) end_word();

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
    s.occurrences = {word_count, char_count};
    return s;
  }
};

}  // namespace hedge::route
