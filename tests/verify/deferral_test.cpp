// Streaming signals, the deferral rule, early exit, a user-written Verifier, and the
// calibrated escalation rate on held-out (synthetic, seeded) generations.
#include "hedge/verify/deferral.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hedge/route/calibration.hpp"
#include "hedge/route/training.hpp"
#include "hedge/model/random.hpp"
#include "hedge/verify/signals.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::verify;
using hedge::model::seeded_random;

static_assert(Verifier<logistic_verifier>);

/// A user-written verifier: escalates answers shorter than a minimum length.
struct min_length_verifier {
  std::uint32_t min = 3, seen = 0;
  void begin(std::string_view) noexcept { seen = 0; }
  verify_verdict observe(const token_observation&) noexcept { return (++seen, verify_verdict{}); }
  verify_verdict finish() const noexcept {
    return seen >= min ? verify_verdict{verify_action::accept, 1.0, verify_reason::confident}
                       : verify_verdict{verify_action::escalate, 0.0, verify_reason::low_confidence};
  }
};
static_assert(Verifier<min_length_verifier>);

TEST(StreamingSignals, MatchesDirectComputation) {
  streaming_signals s{0.25f};
  const float lps[] = {-0.1f, -2.0f, -0.5f, -0.05f};
  for (float lp : lps) s.add({0, lp, 1.5f});
  EXPECT_EQ(s.length(), 4u);
  EXPECT_FLOAT_EQ(s.mean_logprob(), (-0.1f - 2.0f - 0.5f - 0.05f) / 4);
  EXPECT_FLOAT_EQ(s.min_logprob(), -2.0f);
  EXPECT_FLOAT_EQ(s.mean_entropy(), 1.5f);
  // Lowest quarter: the single token with p = e^-2 = 0.135, reported as its bin's upper edge.
  EXPECT_NEAR(s.low_quantile_prob(), std::exp(-2.0f), 1.0f / streaming_signals::bins);
  EXPECT_GE(s.low_quantile_prob(), std::exp(-2.0f));
}

TEST(LogisticVerifier, EarlyExitOnVeryUnlikelyToken) {
  logistic_verifier v{deferral_rule{}, {.min_tokens = 2, .floor_logprob = -10.0f}};
  std::vector<token_observation> gen(20, {1, -0.1f, 0.2f});
  gen[5].logprob = -15.0f;
  const auto verdict = verify_generation(v, "prompt", gen);
  EXPECT_EQ(verdict.action, verify_action::escalate);
  EXPECT_EQ(verdict.why, verify_reason::very_unlikely_token);
  EXPECT_EQ(v.signals().length(), 6u);  // stopped at the bad token
  min_length_verifier m;
  EXPECT_EQ(verify_generation(m, "p", std::span{gen}.first(2)).action, verify_action::escalate);
}

/// Synthetic generations: good answers have confident tokens, bad ones drift to lower
/// probabilities and higher entropy, with overlap (label noise) so the task is not trivial.
struct generation {
  std::vector<token_observation> tokens;
  bool bad = false;
};
std::vector<generation> synthesize(std::size_t n, std::uint64_t seed) {
  seeded_random rng{seed};
  std::vector<generation> out(n);
  for (auto& g : out) {
    g.bad = rng.uniform() < 0.3;
    const double difficulty = (g.bad ? 0.9 : 0.3) + 0.6 * rng.uniform();
    const auto length = 10 + rng.below(60);
    for (std::uint64_t t = 0; t < length; ++t) {
      const double lp = -difficulty * -std::log(1.0 - rng.uniform() * 0.999);  // exponential spread
      g.tokens.push_back({0, static_cast<float>(lp), static_cast<float>(difficulty * (1.0 + rng.uniform()))});
    }
  }
  return out;
}

signal_vector signals_of(const generation& g) {
  streaming_signals s;
  for (const auto& t : g.tokens) s.add(t);
  return s.values();
}

TEST(LogisticVerifier, CalibratedEscalationRateHoldsOnHeldOutData) {
  const auto train = synthesize(3000, 1), calibration = synthesize(3000, 2), held_out = synthesize(5000, 3);
  // Fit the rule's weights with the scorer's trainer (dense features only).
  std::vector<hedge::route::sparse_features> features;
  std::vector<float> labels, weights;
  for (const auto& g : train) {
    hedge::route::sparse_features f;
    const auto s = signals_of(g);
    for (std::uint32_t k = 0; k < signal_count; ++k) f.index.push_back(k), f.value.push_back(s[k]);
    features.push_back(f);
    labels.push_back(g.bad ? 1.0f : 0.0f);
    weights.push_back(1.0f);
  }
  std::vector<const hedge::route::sparse_features*> x;
  for (const auto& f : features) x.push_back(&f);
  std::vector<float> w(signal_count, 0.0f);
  deferral_rule rule;
  hedge::route::train_logistic(x, labels, weights, {.epochs = 20}, w, rule.bias);
  for (std::size_t k = 0; k < signal_count; ++k) rule.weights[k] = w[k];

  for (double target : {0.1, 0.2, 0.3}) {
    std::vector<double> p;
    for (const auto& g : calibration) p.push_back(rule.failure_probability(signals_of(g)));
    rule.threshold = *hedge::route::threshold_for_cloud_fraction(p, target);
    logistic_verifier v{rule};
    std::size_t escalated = 0, caught = 0, bad = 0;
    for (const auto& g : held_out) {
      const bool esc = verify_generation(v, "", g.tokens).action == verify_action::escalate;
      escalated += esc;
      bad += g.bad;
      caught += esc && g.bad;
    }
    const double rate = static_cast<double>(escalated) / static_cast<double>(held_out.size());
    std::printf("verifier: target escalation %.2f, held-out %.4f, bad answers caught %.3f\n", target, rate,
                static_cast<double>(caught) / static_cast<double>(bad));
    EXPECT_NEAR(rate, target, 0.02);
  }
}

TEST(LogisticVerifier, VerifyingAllocatesNothing) {
  logistic_verifier v{deferral_rule{.bias = -1.0f, .weights = {-1, -1, -1, 1, 0}, .threshold = 0.5}};
  std::vector<token_observation> gen(100, {1, -0.2f, 0.5f});
  hedge::test::alloc_scope scope;
  const auto verdict = verify_generation(v, "prompt", gen);
  EXPECT_EQ(scope.count(), 0u);
  EXPECT_EQ(verdict.action, verify_action::accept);
  EXPECT_GT(verdict.confidence, 0.5);
}

}  // namespace
