// hedge/route/complexity_model.hpp: the learned complexity scorer (a logistic model over
// complexity_features) and its weights file.
//
// The model predicts the probability that routing the prompt to the cloud pays off (as
// trained by hedge-route-train: only the cloud model answers correctly -> 1, both or
// neither -> 0.5, only the edge -> 0). Scoring runs the feature extraction and sums
// weights as it goes: no feature vector, no allocation.
//
// Hashed weights are 16-bit integers with one scale per group (a weight is value x scale):
// both tables of the default 4096-bucket model take 16 KB and stay in L1 while a prompt is
// scored, and integer sums are exact, so the scalar and vector feature passes give the
// same score in any order of addition. Training rounds float weights to the nearest step
// of max|w| / 32767 (no measurable change in APGR: docs/routing.md).
//
// Weights file (text, one record per line, '#' starts a comment line):
//
//     hedge-complexity 5            magic and format version (5: the saturating features
//                                   of complexity_features.hpp and the 'end' record; 4:
//                                   4-grams at every second byte, words hashed by their
//                                   first 8 bytes and length, quantised weights)
//     buckets 4096                  hash buckets; must equal the model's Buckets
//     hash_seed 0                   the feature hash keys the weights belong to
//                                   (feature_hash_keys::of_seed); default 0
//     bias -0.7311
//     dense log_bytes 0.25          one line per dense feature (names: dense_feature_names);
//     ...                           missing ones are 0
//     scale words 1.52e-05          quantisation step of each hashed group (finite, > 0; default 1)
//     scale chars 9.8e-06
//     words 812 2731                hashed word-group weight: bucket, integer in [-32767, 32767]
//     chars 90 -203                 hashed char-group weight: bucket, integer in [-32767, 32767]
//     end 19                        last record: the number of records before it (the magic
//                                   line included; comments and blank lines not), so a
//                                   file cut after any line, or inside one, is refused
//
// Buckets not listed are 0, so a file only lists the weights training touched. Only
// comments and blank lines may follow 'end'. The weights must keep the score finite for
// every prompt: a file whose bound (complexity_model::max_abs_logit) exceeds the float
// range (e.g. 'scale words 3e38' with a non-zero word weight) is refused, naming the entry.
// The model is 2 x Buckets x 2 bytes plus a few floats: keep it in static storage or a
// caller buffer and give policies a pointer to it.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/parse_number.hpp"
#include "hedge/core/result.hpp"
#include "hedge/route/complexity_features.hpp"


namespace hedge::route {

/// Version of the weights file format and of the features its weights belong to.
inline constexpr std::uint32_t complexity_weights_version = 5;

/// Logistic complexity model.
/// \tparam Buckets hash buckets per hashed group (a power of two)
template <std::size_t Buckets = 4096>
struct complexity_model {
  using features = complexity_features<Buckets>;
  using hashed_weight = std::int16_t;
  static constexpr std::size_t buckets = Buckets;
  static constexpr hashed_weight max_hashed_weight = 32767;

  float bias = 0.0f;
  std::array<float, dense_feature_count> dense{};
  /// Seed of the feature hash keys the weights were trained with (feature_hash_keys::of_seed).
  std::uint64_t hash_seed = 0;
  /// Value of one step of each group's hashed weights.
  std::array<float, hashed_group_count> scale{1.0f, 1.0f};
  std::array<std::array<hashed_weight, Buckets>, hashed_group_count> hashed{};

  /// Linear score (log-odds) of a prompt; every arch gives the same bits.
  /// \tparam A instruction set of the feature passes: arch::best (the best this CPU runs,
  ///   chosen once per call) or a tag (arch::scalar: the specification)
  template <class A = arch::best>
  [[nodiscard]] float logit(std::string_view prompt, A = {}) const noexcept {
    // Below 2^20 bytes (fewer than 65536 batches of 8 grams, one batch per 16 bytes) the
    // vector lanes of the char sums cannot overflow, and the batches skip the count that
    // guards them.
    return arch::visit<A>([&](auto tag) {
      return combine(prompt, prompt.size() < (std::size_t{1} << 20) ? hashed_sums<false>(prompt, tag)
                                                                     : hashed_sums<true>(prompt, tag));
    });
  }
  /// A bound on |logit(prompt)| over every prompt, of any length, float rounding included:
  /// |bias| + sum_k |dense_k| dense_feature_max[k] + sum_g scale_g max_b |hashed_g[b]|
  /// sqrt(hashed_saturation) (a group's normalised sum is at most sqrt(N) times its
  /// largest weight: feature_summary::group_scale), times 1 + 2^-18, more than the
  /// relative error of the logit's float operations (under 20 roundings of 2^-24).
  [[nodiscard]] double max_abs_logit() const noexcept {
    double bound = 0.0;
    for (const double term : logit_bound_terms()) bound += term;
    return bound * (1.0 + 0x1p-18);
  }
  /// The terms of max_abs_logit's sum, without the rounding margin: the bias, the dense
  /// features by index, then the hashed groups.
  [[nodiscard]] std::array<double, 1 + dense_feature_count + hashed_group_count> logit_bound_terms() const noexcept {
    std::array<double, 1 + dense_feature_count + hashed_group_count> terms{};
    terms[0] = std::abs(static_cast<double>(bias));
    for (std::size_t k = 0; k < dense_feature_count; ++k)
      terms[1 + k] = std::abs(static_cast<double>(dense[k])) * static_cast<double>(dense_feature_max[k]);
    for (std::size_t g = 0; g < hashed_group_count; ++g) {
      int largest = 0;
      for (const hashed_weight w : hashed[g]) largest = std::max(largest, std::abs(static_cast<int>(w)));
      terms[1 + dense_feature_count + g] = std::abs(static_cast<double>(scale[g])) * largest *
                                           static_cast<double>(hashed_saturation_sqrt);
    }
    return terms;
  }

  /// Probability that the prompt needs the cloud tier.
  template <class A = arch::best>
  [[nodiscard]] float probability(std::string_view prompt, A = {}) const noexcept {
    return 1.0f / (1.0f + std::exp(-logit(prompt, A{})));
  }

 private:
  /// What the feature passes leave for the score: their counts and, per group, the integer
  /// sum of the hashed weights they reported. Integer sums are exact, so independent of the
  /// order the passes report buckets in, and each add depends only on its load (no
  /// floating-point add chain). 64 bits: a prompt would need 2^48 features to overflow; a
  /// batch of 8 fits 32 bits.
  struct pass_result {
    detail::scan_state counts;
    std::array<std::int64_t, hashed_group_count> sums{};
  };

  /// Scalar visitor: adds each reported bucket's weight to its group's sum (the scalar
  /// passes report bucket by bucket).
  struct scalar_sums {
    const complexity_model& m;
    std::array<std::int64_t, hashed_group_count> sums{};
    HEDGE_ALWAYS_INLINE void operator()(hashed_group g, std::uint32_t bucket) noexcept {
      const auto k = static_cast<std::size_t>(g);
      sums[k] += m.hashed[k][bucket];
    }
  };

  template <bool CountBatches>
  pass_result hashed_sums(std::string_view prompt, arch::scalar) const noexcept {
    scalar_sums acc{*this};
    pass_result r;
    r.counts = features::passes(prompt, acc, feature_hash_keys::of_seed(hash_seed), arch::scalar{});
    r.sums = acc.sums;
    return r;
  }

#if HEDGE_SIMD_X86
  /// AVX2 visitor: char-group batches of 8 buckets summed with one gather into 32-bit lanes.
  template <bool CountBatches>
  struct avx2_sums {
    const complexity_model& m;
    std::array<std::int64_t, hashed_group_count> sums{};
    __m256i lanes;               ///< char-group sums of the batch visits, per lane
    std::uint32_t batches = 0;   ///< since the lanes were last added to sums

    HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE explicit avx2_sums(const complexity_model& model) noexcept
        : m(model), lanes(_mm256_setzero_si256()) {}
    // No target attribute: the scalar parts of the passes report single buckets too.
    HEDGE_ALWAYS_INLINE void operator()(hashed_group g, std::uint32_t bucket) noexcept {
      const auto k = static_cast<std::size_t>(g);
      sums[k] += m.hashed[k][bucket];
    }
    HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void operator()(hashed_group g, const std::uint32_t* buckets,
                                                          std::size_t count) noexcept {
      // `lanes` and flush() hold char-group sums: the feature pass batches only chars, and
      // a batch of another group goes bucket by bucket.
      if (g != hashed_group::chars) [[unlikely]] {
        for (std::size_t t = 0; t < count; ++t) operator()(g, buckets[t]);
        return;
      }
      const auto k = static_cast<std::size_t>(g);
      // One gather of 32-bit words ending at each weight (its high half; the low half is
      // the int16 before it, inside the model: the other table or `scale`), masked to the
      // first `count` lanes.
      const __m256i index = _mm256_load_si256(reinterpret_cast<const __m256i*>(buckets));
      const __m256i active = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const auto* base = reinterpret_cast<const int*>(reinterpret_cast<const char*>(m.hashed[k].data()) - 2);
      const __m256i pairs = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), base, index, active, 2);
      lanes = _mm256_add_epi32(lanes, _mm256_srai_epi32(pairs, 16));
      // A lane gains at most 32767 per batch: add the lanes to sums before 2^31 / 32767 batches.
      if constexpr (CountBatches) {
        if (++batches == 65536) flush();
      }
    }
    HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE void flush() noexcept {
      alignas(32) std::array<std::int32_t, 8> lane{};
      _mm256_store_si256(reinterpret_cast<__m256i*>(lane.data()), lanes);
      for (const std::int32_t v : lane) sums[static_cast<std::size_t>(hashed_group::chars)] += v;
      lanes = _mm256_setzero_si256();
      batches = 0;
    }
  };

  template <bool CountBatches>
  HEDGE_TARGET_AVX2 pass_result hashed_sums(std::string_view prompt, arch::avx2) const noexcept {
    avx2_sums<CountBatches> acc{*this};
    pass_result r;
    r.counts = features::passes(prompt, acc, feature_hash_keys::of_seed(hash_seed), arch::avx2{});
    acc.flush();
    r.sums = acc.sums;
    return r;
  }
#endif

  /// The score from the passes' result: floating point, outside the arch's target function
  /// (complexity_features::summarize says why).
  HEDGE_ALWAYS_INLINE float combine(std::string_view prompt, const pass_result& r) const noexcept {
    const feature_summary s = features::summarize(prompt, r.counts);
    float z = bias;
    for (std::size_t k = 0; k < dense_feature_count; ++k) z += dense[k] * s.dense[k];
    // The normalised sum first: it is at most sqrt(hashed_saturation) x 32767, so times the
    // scale it stays within max_abs_logit (the raw sum times the scale could overflow).
    for (std::size_t g = 0; g < hashed_group_count; ++g)
      z += scale[g] * (static_cast<float>(r.sums[g]) * s.group_scale(static_cast<hashed_group>(g)));
    return z;
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
}  // namespace detail

/// Reads a weights file (format above) into `model`, replacing its weights. On error the
/// model is left zeroed-or-partial and the error names the line.
/// \tparam Buckets the model's bucket count; the file must declare the same
template <std::size_t Buckets>
result<void> parse_complexity_weights(std::string_view text, complexity_model<Buckets>& model) noexcept {
  using model_type = complexity_model<Buckets>;
  model.bias = 0.0f;
  model.dense.fill(0.0f);
  model.hash_seed = 0;
  model.scale.fill(1.0f);
  for (auto& g : model.hashed) g.fill(0);
  bool seen_magic = false, seen_buckets = false, seen_end = false;
  std::size_t line_no = 0, records = 0;
  // The line of each entry of model_type::logit_bound_terms (0: not in the file).
  std::array<std::size_t, 1 + dense_feature_count + hashed_group_count> term_line{};
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
    if (seen_end) return bad("a record after 'end'");
    if (!seen_magic) {
      std::uint32_t version = 0;
      if (key != "hedge-complexity") return bad("expected 'hedge-complexity <version>' first");
      if (!parse_number(detail::next_field(line), version)) return bad("bad version");
      if (version != complexity_weights_version)
        return error{errc::unsupported} << "complexity weights version " << version << " (this build reads "
                                        << complexity_weights_version << ")";
      seen_magic = true;
    } else if (key == "end") {
      std::uint64_t count = 0;
      if (!parse_number(detail::next_field(line), count)) return bad("bad record count");
      if (count != records)
        return error{errc::parse_error} << "complexity weights line " << line_no << ": 'end " << count
                                        << "' but " << records << " records precede it (lines lost or added)";
      seen_end = true;
    } else if (key == "buckets") {
      std::uint64_t n = 0;
      if (!parse_number(detail::next_field(line), n)) return bad("bad bucket count");
      if (n != Buckets)
        return error{errc::shape_mismatch} << "complexity weights line " << line_no << ": file has " << n
                                           << " buckets, model has " << static_cast<std::uint64_t>(Buckets);
      seen_buckets = true;
    } else if (key == "hash_seed") {
      if (!parse_number(detail::next_field(line), model.hash_seed)) return bad("bad hash seed");
    } else if (key == "bias") {
      if (!parse_number(detail::next_field(line), model.bias)) return bad("bad bias value");
      term_line[0] = line_no;
    } else if (key == "dense") {
      const auto name = detail::next_field(line);
      std::size_t k = 0;
      while (k < dense_feature_count && dense_feature_names[k] != name) ++k;
      if (k == dense_feature_count) return bad("unknown dense feature");
      if (!parse_number(detail::next_field(line), model.dense[k])) return bad("bad dense value");
      term_line[1 + k] = line_no;
    } else if (key == "scale") {
      const auto name = detail::next_field(line);
      if (name != "words" && name != "chars") return bad("unknown hashed group");
      float step = 0.0f;
      if (!parse_number(detail::next_field(line), step) || !(step > 0.0f)) return bad("bad scale value");
      const auto g = static_cast<std::size_t>(name == "words" ? hashed_group::words : hashed_group::chars);
      model.scale[g] = step;
      term_line[1 + dense_feature_count + g] = line_no;
    } else if (key == "words" || key == "chars") {
      if (!seen_buckets) return bad("'buckets' must precede hashed weights");
      std::uint64_t bucket = 0;
      if (!parse_number(detail::next_field(line), bucket)) return bad("bad bucket index");
      if (bucket >= Buckets) return bad("bucket index out of range");
      const auto g = static_cast<std::size_t>(key == "words" ? hashed_group::words : hashed_group::chars);
      std::int32_t value = 0;
      if (!parse_number(detail::next_field(line), value) || value < -model_type::max_hashed_weight ||
          value > model_type::max_hashed_weight)
        return bad("bad weight value");
      model.hashed[g][bucket] = static_cast<typename model_type::hashed_weight>(value);
    } else {
      return bad("unknown record");
    }
    if (!detail::next_field(line).empty()) return bad("trailing fields");
    ++records;
  }
  if (!seen_magic) return error{errc::parse_error} << "complexity weights: empty file";
  if (!seen_buckets) return error{errc::parse_error} << "complexity weights: no 'buckets' line";
  if (!seen_end)
    return error{errc::parse_error} << "complexity weights: truncated (no 'end <records>' line after line " << line_no
                                    << ")";
  // Every value is finite, yet the score may not be: name the largest term of its bound.
  if (!(model.max_abs_logit() <= static_cast<double>(std::numeric_limits<float>::max()))) {
    const auto terms = model.logit_bound_terms();
    const auto k = static_cast<std::size_t>(std::max_element(terms.begin(), terms.end()) - terms.begin());
    error e{errc::parse_error};
    e << "complexity weights line " << term_line[k] << ": ";
    if (k == 0) e << "bias";
    else if (k <= dense_feature_count) e << "dense " << dense_feature_names[k - 1];
    else e << "scale " << (k - 1 - dense_feature_count == 0 ? "words" : "chars") << " (times its largest weight)";
    return e << " makes the score unbounded: its worst-case logit exceeds the float range";
  }
  return ok();
}

}  // namespace hedge::route
