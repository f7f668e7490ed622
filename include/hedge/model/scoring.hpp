// hedge/model/scoring.hpp: how likely the model found a given token (echo scoring, the
// speculative accept/reject, a verifier reading a continuation).
//
// From one position's logits: the log-probability of a given token under the softmax, and
// the k most probable tokens with theirs (best first; ties: the lower id, as the greedy
// sampler breaks them). In double precision (the max-subtracted log-sum-exp), so a score
// does not depend on the vocabulary's order. No allocation: the caller's span holds the top.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "hedge/model/sampler.hpp"
#include "hedge/model/vocabulary.hpp"

namespace hedge::model {

/// log(sum(exp(logits))), max-subtracted.
[[nodiscard]] inline double log_sum_exp(std::span<const float> logits) noexcept {
  double high = -std::numeric_limits<double>::infinity();
  for (const float l : logits) high = high > l ? high : static_cast<double>(l);
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - high);
  return high + std::log(sum);
}

/// The log-probability of `target` at this position (`log_sum`: log_sum_exp(logits)).
[[nodiscard]] inline float log_probability(std::span<const float> logits, token_id target, double log_sum) noexcept {
  return static_cast<float>(static_cast<double>(logits[static_cast<std::size_t>(target)]) - log_sum);
}

/// The out.size() most probable tokens, best first (ties: the lower id), with their
/// log-probabilities; returns how many were written (fewer when the vocabulary is smaller).
inline std::size_t most_probable(std::span<const float> logits, double log_sum, std::span<id_logprob> out) noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < logits.size() && !out.empty(); ++i) {
    if (n == out.size() && !(logits[i] > logits[static_cast<std::size_t>(out[n - 1].id)])) continue;
    // Insert after every entry at least as probable (a lower id wins a tie: it came first).
    std::size_t at = n < out.size() ? n : n - 1;
    while (at > 0 && logits[i] > logits[static_cast<std::size_t>(out[at - 1].id)]) {
      out[at] = out[at - 1];
      --at;
    }
    out[at] = id_logprob{static_cast<token_id>(i), 0.0f};
    if (n < out.size()) ++n;
  }
  for (std::size_t k = 0; k < n; ++k) out[k].logprob = log_probability(logits, out[k].id, log_sum);
  return n;
}

}  // namespace hedge::model
