// hedge/route/complexity_model.hpp: the learned complexity scorer (a logistic model over
// complexity_features) and its weights file.
//
// The model predicts the probability that routing the prompt to the cloud pays off (as
// trained by hedge-route-train: only the cloud model answers correctly -> 1, both or
// neither -> 0.5, only the edge -> 0). Scoring runs the feature extraction and sums
// weights as it goes: no feature vector, no allocation.
//
// Weights file (text, one record per line, '#' starts a comment line):
//
//     hedge-complexity 1            magic and format version
//     buckets 16384                 hash buckets; must equal the model's Buckets
//     bias -0.7311
//     dense log_bytes 0.25          one line per dense feature (names: dense_feature_names);
//     ...                           missing ones are 0
//     words 812 0.0417              hashed word-group weight: bucket, value
//     chars 90 -0.0031              hashed char-group weight: bucket, value
//
// Buckets not listed are 0, so a file only lists the weights training touched.
// The model itself is large (2 x Buckets floats): keep it in static storage or a caller
// buffer and give policies a pointer to it.
#pragma once

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/route/complexity_features.hpp"

namespace hedge::route {

/// Logistic complexity model.
/// \tparam Buckets hash buckets per hashed group (a power of two)
template <std::size_t Buckets = 16384>
struct complexity_model {
  using features = complexity_features<Buckets>;
  static constexpr std::size_t buckets = Buckets;

  float bias = 0.0f;
  std::array<float, dense_feature_count> dense{};
  std::array<std::array<float, Buckets>, hashed_group_count> hashed{};

  /// Linear score (log-odds) of a prompt; every Arch gives the same bits.
  template <class Arch = arch::native>
  [[nodiscard]] float logit(std::string_view prompt, Arch = {}) const noexcept {
    // Two register accumulators per group, swapped after each add, so consecutive adds do
    // not wait on each other (the char group adds once per byte). The batch overload (used
    // by the vector pass) adds to them in the same alternation without the swaps.
    struct accumulate {
      const complexity_model& m;
      float words0 = 0.0f, words1 = 0.0f, chars0 = 0.0f, chars1 = 0.0f;
      void operator()(hashed_group g, std::uint32_t bucket) noexcept {
        if (g == hashed_group::words) {
          words0 += m.hashed[static_cast<std::size_t>(hashed_group::words)][bucket];
          std::swap(words0, words1);
        } else {
          chars0 += m.hashed[static_cast<std::size_t>(hashed_group::chars)][bucket];
          std::swap(chars0, chars1);
        }
      }
      void operator()(hashed_group g, const std::uint32_t* buckets, std::size_t count) noexcept {
        const bool words = g == hashed_group::words;
        float& next = words ? words0 : chars0;
        float& other = words ? words1 : chars1;
        const auto& weights = m.hashed[static_cast<std::size_t>(g)];
        std::size_t t = 0;
        for (; t + 2 <= count; t += 2) {
          next += weights[buckets[t]];
          other += weights[buckets[t + 1]];
        }
        if (t < count) {
          next += weights[buckets[t]];
          std::swap(next, other);
        }
      }
    };
    accumulate acc{*this};
    const feature_summary s = features::extract(prompt, acc, Arch{});
    const std::array<float, hashed_group_count> sums{acc.words0 + acc.words1, acc.chars0 + acc.chars1};
    float z = bias;
    for (std::size_t k = 0; k < dense_feature_count; ++k) z += dense[k] * s.dense[k];
    for (std::size_t g = 0; g < hashed_group_count; ++g)
      z += sums[g] * s.group_scale(static_cast<hashed_group>(g));
    return z;
  }
  /// Probability that the prompt needs the cloud tier.
  [[nodiscard]] float probability(std::string_view prompt) const noexcept {
    return 1.0f / (1.0f + std::exp(-logit(prompt)));
  }
};

namespace detail {
/// Splits off the next space-separated field of a line.
constexpr std::string_view next_field(std::string_view& line) noexcept {
  std::size_t b = 0;
  while (b < line.size() && (line[b] == ' ' || line[b] == '\t')) ++b;
  std::size_t e = b;
  while (e < line.size() && line[e] != ' ' && line[e] != '\t') ++e;
  const auto field = line.substr(b, e - b);
  line.remove_prefix(e);
  return field;
}
template <class T>
bool parse_number(std::string_view s, T& out) noexcept {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc{} || end != s.data() + s.size()) return false;
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(out);
  return true;
}
}  // namespace detail

/// Reads a weights file (format above) into `model`, replacing its weights. On error the
/// model is left zeroed-or-partial and the error names the line.
/// \tparam Buckets the model's bucket count; the file must declare the same
template <std::size_t Buckets>
result<void> parse_complexity_weights(std::string_view text, complexity_model<Buckets>& model) noexcept {
  model.bias = 0.0f;
  model.dense.fill(0.0f);
  for (auto& g : model.hashed) g.fill(0.0f);
  bool seen_magic = false, seen_buckets = false;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string_view key = detail::next_field(line);
    if (key.empty() || key.front() == '#') continue;
    const auto bad = [&](std::string_view what) {
      return error{errc::parse_error} << "complexity weights line " << line_no << ": " << what;
    };
    if (!seen_magic) {
      std::uint32_t version = 0;
      if (key != "hedge-complexity") return bad("expected 'hedge-complexity 1' first");
      if (!detail::parse_number(detail::next_field(line), version)) return bad("bad version");
      if (version != 1) return error{errc::unsupported} << "complexity weights version " << version << " (this build reads 1)";
      seen_magic = true;
    } else if (key == "buckets") {
      std::uint64_t n = 0;
      if (!detail::parse_number(detail::next_field(line), n)) return bad("bad bucket count");
      if (n != Buckets)
        return error{errc::shape_mismatch} << "complexity weights line " << line_no << ": file has " << n
                                           << " buckets, model has " << static_cast<std::uint64_t>(Buckets);
      seen_buckets = true;
    } else if (key == "bias") {
      if (!detail::parse_number(detail::next_field(line), model.bias)) return bad("bad bias value");
    } else if (key == "dense") {
      const auto name = detail::next_field(line);
      std::size_t k = 0;
      while (k < dense_feature_count && dense_feature_names[k] != name) ++k;
      if (k == dense_feature_count) return bad("unknown dense feature");
      if (!detail::parse_number(detail::next_field(line), model.dense[k])) return bad("bad dense value");
    } else if (key == "words" || key == "chars") {
      if (!seen_buckets) return bad("'buckets' must precede hashed weights");
      std::uint64_t bucket = 0;
      if (!detail::parse_number(detail::next_field(line), bucket)) return bad("bad bucket index");
      if (bucket >= Buckets) return bad("bucket index out of range");
      const auto g = static_cast<std::size_t>(key == "words" ? hashed_group::words : hashed_group::chars);
      if (!detail::parse_number(detail::next_field(line), model.hashed[g][bucket])) return bad("bad weight value");
    } else {
      return bad("unknown record");
    }
    if (!detail::next_field(line).empty()) return bad("trailing fields");
  }
  if (!seen_magic) return error{errc::parse_error} << "complexity weights: empty file";
  if (!seen_buckets) return error{errc::parse_error} << "complexity weights: no 'buckets' line";
  return ok();
}

}  // namespace hedge::route
