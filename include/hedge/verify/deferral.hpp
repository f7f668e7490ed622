// hedge/verify/deferral.hpp: the deferral rule and the default streaming verifier.
//
// The rule is a logistic model over the streaming signals (signals.hpp):
//   p_fail = sigmoid(bias + w . signals)
// escalate when p_fail > threshold. Weights are fitted like the complexity scorer's
// (hedge::route::train_logistic on labelled generations); the threshold is calibrated to a
// target escalation rate with the quantile rule (hedge::route::threshold_for_cloud_fraction
// on p_fail of a calibration set), following the deferral-rule literature for model
// cascades (e.g. Jitkrittum et al. 2023, "When does confidence-based cascade deferral suffice?").
// Early exit: after `min_tokens`, escalate as soon as a token falls below `floor_logprob`
// or the running p_fail exceeds `early_threshold`.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "hedge/verify/signals.hpp"
#include "hedge/verify/verifier.hpp"

namespace hedge::verify {

struct deferral_rule {
  float bias = 0.0f;
  signal_vector weights{};
  double threshold = 0.5;  ///< escalate when p_fail > threshold

  [[nodiscard]] double failure_probability(const signal_vector& s) const noexcept {
    double z = bias;
    for (std::size_t k = 0; k < signal_count; ++k) z += static_cast<double>(weights[k]) * s[k];
    return 1.0 / (1.0 + std::exp(-z));
  }
};

/// When a streaming verifier may stop before the generation ends.
struct early_exit {
  std::uint32_t min_tokens = 8;  ///< never exit early before this many tokens
  float floor_logprob = -12.0f;  ///< a token this unlikely escalates at once
  double early_threshold = 2.0;  ///< running p_fail bound (> 1 disables)
};

/// Default Verifier: a deferral rule over streaming signals, with early exit.
class logistic_verifier {
 public:
  constexpr explicit logistic_verifier(deferral_rule rule, early_exit early = {}) noexcept : rule_(rule), early_(early) {}

  [[nodiscard]] constexpr const deferral_rule& rule() const noexcept { return rule_; }
  constexpr void set_threshold(double t) noexcept { rule_.threshold = t; }

  constexpr void begin(std::string_view) noexcept { signals_.reset(); }

  verify_verdict observe(const token_observation& t) noexcept {
    signals_.add(t);
    if (signals_.length() < early_.min_tokens) return {};
    if (t.logprob < early_.floor_logprob) return {verify_action::escalate, 0.0, verify_reason::very_unlikely_token};
    if (early_.early_threshold <= 1.0) {
      const double p = rule_.failure_probability(signals_.values());
      if (p > early_.early_threshold) return {verify_action::escalate, 1.0 - p, verify_reason::early_low_confidence};
    }
    return {};
  }

  [[nodiscard]] verify_verdict finish() const noexcept {
    if (signals_.length() == 0) return {verify_action::escalate, 0.0, verify_reason::empty_generation};
    const double p = rule_.failure_probability(signals_.values());
    if (p > rule_.threshold) return {verify_action::escalate, 1.0 - p, verify_reason::low_confidence};
    return {verify_action::accept, 1.0 - p, verify_reason::confident};
  }

  [[nodiscard]] constexpr const streaming_signals& signals() const noexcept { return signals_; }

 private:
  deferral_rule rule_;
  early_exit early_;
  streaming_signals signals_{};
};

}  // namespace hedge::verify
