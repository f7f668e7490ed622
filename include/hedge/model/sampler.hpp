// hedge/model/sampler.hpp: choosing the next token from the logits, and the signals the
// verifier and the router read from each choice.
//
// The steps, in order (each off at its default):
//   1. repetition penalty over the recent tokens (Keskar et al. 2019, CTRL: a positive
//      logit divided by the penalty, a negative one multiplied);
//   2. temperature 0: greedy, the argmax, first index on ties. Otherwise the logits are
//      divided by the temperature and turned into probabilities (softmax in float, expf);
//   3. top-k: the k most probable tokens kept; min-p (Nguyen et al. 2024): tokens below
//      min_p times the top probability dropped;
//   4. top-p (Holtzman et al. 2020, nucleus): the smallest set, most probable first, whose
//      probability exceeds p; then one draw from what is left.
// With only temperature and top-p set, steps 2 and 4 are llama2.c run.c's `sample`, float
// operation for float operation: its softmax, its top-p prefilter (1 - p) / (n - 1), its
// order (descending probability; ties keep index order, as glibc's merge-sort qsort
// leaves them), its coin (one `uniform()` per sampled token, scaled by the kept mass). With
// `llama2c_random` (model/random.hpp) as the generator, `run -t T -p P -s S` draws are
// reproduced.
//
// What each choice carries (`token_choice`): the token's log-probability, the entropy of
// the distribution and the most probable alternatives with their log-probabilities, all
// of the model's own distribution (the logits after the repetition penalty, at temperature
// 1), so the verifier's signals do not depend on how the token was drawn.
//
// No heap: the caller gives a workspace of `sampler_workspace_bytes(vocab)`. The logits
// are overwritten.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "hedge/core/result.hpp"
#include "hedge/model/random.hpp"

namespace hedge::model {

/// How to choose a token; the defaults are greedy.
struct sampler_config {
  float temperature = 0.0f;         ///< 0: greedy; else the logits are divided by it
  std::size_t top_k = 0;            ///< 0: off
  float top_p = 1.0f;               ///< 1 (or more, or 0): off
  float min_p = 0.0f;               ///< 0: off
  float repetition_penalty = 1.0f;  ///< 1: off
  std::size_t penalty_window = 64;  ///< recent tokens the penalty looks at

  [[nodiscard]] result<void> check() const noexcept {
    if (!(temperature >= 0.0f && temperature <= 1e6f))
      return error{errc::invalid_argument} << "temperature " << temperature << " outside [0, 1e6]";
    if (!(top_p >= 0.0f && top_p <= 1e6f)) return error{errc::invalid_argument} << "top-p " << top_p << " is negative or not a number";
    if (!(min_p >= 0.0f && min_p < 1.0f)) return error{errc::invalid_argument} << "min-p " << min_p << " outside [0, 1)";
    if (!(repetition_penalty > 0.0f && repetition_penalty <= 1e6f))
      return error{errc::invalid_argument} << "repetition penalty " << repetition_penalty << " outside (0, 1e6]";
    return ok();
  }
};

/// A token id and its log-probability (cloud::token_logprob is a token as a server reports
/// it: text, bytes, alternatives).
struct id_logprob {
  std::int32_t id = 0;
  float logprob = 0.0f;
};

/// The chosen token and the signals of the distribution it came from.
struct token_choice {
  static constexpr std::size_t max_alternatives = 8;
  std::int32_t id = 0;
  float logprob = 0.0f;  ///< log p(id)
  float entropy = 0.0f;  ///< -sum p log p, in nats
  std::array<id_logprob, max_alternatives> alternatives{};  ///< most probable first
  std::size_t alternative_count = 0;
};

/// Workspace bytes `sampler::sample` needs for a vocabulary: the ranked candidates, and a
/// copy of the logits the draw overwrites.
constexpr std::size_t sampler_workspace_bytes(std::size_t vocab) noexcept {
  return vocab * (sizeof(id_logprob) + sizeof(float));
}

/// The greedy choice: the index of the largest logit, the first on ties (llama2.c's argmax).
inline std::int32_t argmax(std::span<const float> logits) noexcept {
  std::size_t best = 0;
  for (std::size_t j = 1; j < logits.size(); ++j)
    if (logits[j] > logits[best]) best = j;
  return static_cast<std::int32_t>(best);
}

/// Chooses tokens with a configuration and a generator.
/// \tparam Random has `double uniform()` in [0, 1): seeded_random, llama2c_random
template <class Random = seeded_random>
class sampler {
 public:
  sampler(sampler_config config, Random random) noexcept : config_(config), random_(random) {}

  [[nodiscard]] const sampler_config& config() const noexcept { return config_; }

  /// Chooses the next token from `logits` (overwritten), with `recent` the tokens so far
  /// (the penalty's window is their end) and `alternatives` wanted (at most
  /// token_choice::max_alternatives).
  result<token_choice> sample(std::span<float> logits, std::span<const std::int32_t> recent,
                              std::span<std::byte> workspace, std::size_t alternatives = 0) noexcept {
    const std::size_t n = logits.size();
    if (n == 0) return error{errc::invalid_argument} << "sampling from an empty vocabulary";
    if (workspace.size() < sampler_workspace_bytes(n))
      return error{errc::capacity_exceeded} << "sampler workspace of " << workspace.size() << " bytes, "
                                            << sampler_workspace_bytes(n) << " needed for " << n << " tokens";
    HEDGE_TRY(config_.check());
    if (alternatives > token_choice::max_alternatives) alternatives = token_choice::max_alternatives;
    auto* candidates = reinterpret_cast<id_logprob*>(workspace.data());
    auto* penalised = reinterpret_cast<float*>(workspace.data() + n * sizeof(id_logprob));

    apply_repetition_penalty(logits, recent);
    token_choice choice;
    HEDGE_TRY(describe(logits, alternatives, candidates, choice));
    std::copy(logits.begin(), logits.end(), penalised);
    choice.id = config_.temperature == 0.0f ? argmax(logits) : draw(logits, candidates);
    choice.logprob = static_cast<float>(static_cast<double>(penalised[static_cast<std::size_t>(choice.id)]) - log_sum_);
    return choice;
  }

 private:
  void apply_repetition_penalty(std::span<float> logits, std::span<const std::int32_t> recent) const noexcept {
    if (config_.repetition_penalty == 1.0f) return;
    const std::size_t from = recent.size() > config_.penalty_window ? recent.size() - config_.penalty_window : 0;
    for (std::size_t k = from; k < recent.size(); ++k) {
      const auto t = recent[k];
      if (t < 0 || static_cast<std::size_t>(t) >= logits.size()) continue;
      // A token repeated in the window is penalised once (as CTRL and llama.cpp do).
      bool seen = false;
      for (std::size_t j = from; j < k && !seen; ++j) seen = recent[j] == t;
      if (seen) continue;
      float& l = logits[static_cast<std::size_t>(t)];
      l = l > 0.0f ? l / config_.repetition_penalty : l * config_.repetition_penalty;
    }
  }

  /// Log-sum-exp, entropy and the top alternatives of softmax(logits), in double.
  result<void> describe(std::span<const float> logits, std::size_t alternatives, id_logprob* scratch,
                        token_choice& choice) noexcept {
    double top = -std::numeric_limits<double>::infinity();
    for (const float l : logits) {
      if (std::isnan(l)) return error{errc::invalid_argument} << "a logit is NaN";
      top = std::max(top, static_cast<double>(l));
    }
    if (!std::isfinite(top)) return error{errc::invalid_argument} << "the largest logit is " << top;
    double sum = 0.0, weighted = 0.0;
    for (const float l : logits) {
      const double z = static_cast<double>(l) - top, e = std::exp(z);
      sum += e;
      weighted += e * z;
    }
    log_sum_ = top + std::log(sum);
    // H = log S - E[z] with z = l - top and S = sum exp(z).
    choice.entropy = static_cast<float>(std::log(sum) - weighted / sum);
    const std::size_t k = std::min(alternatives, logits.size());
    choice.alternative_count = k;
    if (k == 0) return ok();  // no pass over the vocabulary for alternatives nobody asked for
    for (std::size_t j = 0; j < logits.size(); ++j) scratch[j] = {static_cast<std::int32_t>(j), logits[j]};
    std::partial_sort(scratch, scratch + k, scratch + logits.size(), more_probable);
    for (std::size_t j = 0; j < k; ++j)
      choice.alternatives[j] = {scratch[j].id, static_cast<float>(static_cast<double>(scratch[j].logprob) - log_sum_)};
    return ok();
  }

  static bool more_probable(const id_logprob& a, const id_logprob& b) noexcept {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
  }


  /// Steps 2-4 on the logits (overwritten by the probabilities).
  std::int32_t draw(std::span<float> x, id_logprob* candidates) noexcept {
    const std::size_t n = x.size();
    for (float& v : x) v /= config_.temperature;
    softmax(x);
    const float coin = static_cast<float>(random_.uniform());
    const bool top_p_on = config_.top_p > 0.0f && config_.top_p < 1.0f;
    if (config_.top_k == 0 && config_.min_p == 0.0f && !top_p_on) {
      float cdf = 0.0f;
      for (std::size_t j = 0; j < n; ++j) {
        cdf += x[j];
        if (coin < cdf) return static_cast<std::int32_t>(j);
      }
      return static_cast<std::int32_t>(n - 1);  // rounding at the top end
    }
    // Candidates: run.c's prefilter (a token below (1 - p) / (n - 1) cannot be in the
    // nucleus), and min-p's floor.
    const float cutoff = top_p_on && n > 1 ? (1.0f - config_.top_p) / static_cast<float>(n - 1) : 0.0f;
    float top = 0.0f;
    for (const float p : x) top = std::max(top, p);
    const float floor = std::max(cutoff, config_.min_p * top);
    std::size_t kept = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (x[j] >= floor) candidates[kept++] = {static_cast<std::int32_t>(j), x[j]};
    // Descending probability, ties in index order (a stable sort's order, without its buffer).
    std::sort(candidates, candidates + kept, more_probable);
    if (config_.top_k != 0 && kept > config_.top_k) kept = config_.top_k;
    std::size_t last = kept - 1;
    float mass = 0.0f;
    for (std::size_t j = 0; j < kept; ++j) {
      mass += candidates[j].logprob;
      if (top_p_on && mass > config_.top_p) {
        last = j;
        break;
      }
    }
    const float r = coin * mass;
    float cdf = 0.0f;
    for (std::size_t j = 0; j <= last; ++j) {
      cdf += candidates[j].logprob;
      if (r < cdf) return candidates[j].id;
    }
    return candidates[last].id;
  }

  /// run.c's softmax: float, expf, the max subtracted first.
  static void softmax(std::span<float> x) noexcept {
    float top = x[0];
    for (const float v : x) top = std::max(top, v);
    float sum = 0.0f;
    for (float& v : x) {
      v = std::exp(v - top);
      sum += v;
    }
    for (float& v : x) v /= sum;
  }

  sampler_config config_;
  Random random_;
  double log_sum_ = 0.0;  ///< log sum exp of the penalised logits
};

}  // namespace hedge::model
