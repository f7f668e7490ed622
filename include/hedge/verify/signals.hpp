// hedge/verify/signals.hpp: confidence signals of a generation, computed streaming.
//
// Token log-probabilities and entropies are the standard cheap signals of whether a
// model's answer can be trusted (mean log-prob and its minimum; a low quantile of token
// probabilities catches a few very unsure tokens in an otherwise confident answer; mean
// entropy; length). Kept as running sums plus a fixed histogram of token probabilities
// (the quantile is read from it), so memory is constant and nothing is stored per token.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hedge/verify/verifier.hpp"

namespace hedge::verify {

/// The signals fed to a deferral rule, by index into signal_vector.
enum class signal : std::uint8_t { mean_logprob, min_logprob, low_quantile_prob, mean_entropy, log_length, count_ };
inline constexpr std::size_t signal_count = static_cast<std::size_t>(signal::count_);
inline constexpr std::array<std::string_view, signal_count> signal_names{"mean_logprob", "min_logprob", "low_quantile_prob",
                                                                          "mean_entropy", "log_length"};
using signal_vector = std::array<float, signal_count>;

class streaming_signals {
 public:
  static constexpr std::size_t bins = 64;  ///< histogram resolution of token probabilities

  /// \param low_quantile which quantile of token probabilities to report (e.g. 0.1)
  constexpr explicit streaming_signals(float low_quantile = 0.1f) noexcept : quantile_(low_quantile) {}

  constexpr void reset() noexcept {
    count_ = 0;
    sum_logprob_ = sum_entropy_ = 0.0;
    min_logprob_ = 0.0f;
    histogram_.fill(0);
  }

  void add(const token_observation& t) noexcept {
    const float lp = std::min(t.logprob, 0.0f);
    sum_logprob_ += lp;
    sum_entropy_ += t.entropy;
    min_logprob_ = count_ == 0 ? lp : std::min(min_logprob_, lp);
    const auto bin = static_cast<std::size_t>(std::exp(lp) * static_cast<float>(bins));
    ++histogram_[std::min(bin, bins - 1)];
    ++count_;
  }

  [[nodiscard]] constexpr std::uint32_t length() const noexcept { return count_; }
  [[nodiscard]] constexpr float min_logprob() const noexcept { return min_logprob_; }
  [[nodiscard]] float mean_logprob() const noexcept {
    return count_ == 0 ? 0.0f : static_cast<float>(sum_logprob_ / count_);
  }
  [[nodiscard]] float mean_entropy() const noexcept {
    return count_ == 0 ? 0.0f : static_cast<float>(sum_entropy_ / count_);
  }
  /// The low quantile of token probabilities, to histogram resolution (1/bins): the upper
  /// edge of the bin holding the quantile.
  [[nodiscard]] float low_quantile_prob() const noexcept {
    if (count_ == 0) return 1.0f;
    const auto rank = static_cast<std::uint32_t>(std::ceil(quantile_ * static_cast<float>(count_)));
    std::uint32_t seen = 0;
    for (std::size_t b = 0; b < bins; ++b) {
      seen += histogram_[b];
      if (seen >= std::max<std::uint32_t>(rank, 1)) return static_cast<float>(b + 1) / static_cast<float>(bins);
    }
    return 1.0f;
  }

  [[nodiscard]] signal_vector values() const noexcept {
    return {mean_logprob(), min_logprob(), low_quantile_prob(), mean_entropy(),
            std::log1p(static_cast<float>(count_)) / 6.0f};
  }

 private:
  float quantile_;
  std::uint32_t count_ = 0;
  double sum_logprob_ = 0.0;
  double sum_entropy_ = 0.0;
  float min_logprob_ = 0.0f;
  std::array<std::uint32_t, bins> histogram_{};
};

}  // namespace hedge::verify
