// The sampler: greedy ties, the signals against a float64 reference, each filter against a
// direct implementation of its definition, run.c's top-p draw step for step, and errors.
#include "hedge/model/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::model;

std::vector<float> random_logits(std::size_t n, std::uint64_t seed, float spread = 4.0f) {
  seeded_random rng{seed};
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>((rng.uniform() * 2.0 - 1.0) * spread);
  return x;
}

template <class Random>
token_choice choose(sampler<Random>& s, std::vector<float> logits, std::vector<std::int32_t> recent = {},
                    std::size_t alternatives = 0) {
  std::vector<std::byte> ws(sampler_workspace_bytes(logits.size()));
  auto c = s.sample(logits, recent, ws, alternatives);
  EXPECT_TRUE(c.ok()) << c.error().message();
  return *c;
}

TEST(Sampler, GreedyTakesTheFirstOfTiedMaxima) {
  sampler s{sampler_config{}, seeded_random{1}};
  EXPECT_EQ(choose(s, {0.5f, 2.0f, -1.0f, 2.0f}).id, 1);
  EXPECT_EQ(choose(s, {3.0f, 3.0f}).id, 0);
}

TEST(Sampler, SignalsMatchAFloat64Reference) {
  const auto logits = random_logits(512, 7);
  sampler s{sampler_config{.temperature = 0.8f, .top_p = 0.9f}, seeded_random{3}};
  const auto c = choose(s, logits, {}, 5);
  double top = *std::max_element(logits.begin(), logits.end()), sum = 0.0;
  for (const float l : logits) sum += std::exp(l - top);
  const double log_sum = top + std::log(sum);
  double entropy = 0.0;
  for (const float l : logits) {
    const double lp = l - log_sum;
    entropy -= std::exp(lp) * lp;
  }
  EXPECT_NEAR(c.logprob, logits[static_cast<std::size_t>(c.id)] - log_sum, 1e-5);
  EXPECT_NEAR(c.entropy, entropy, 1e-5);
  ASSERT_EQ(c.alternative_count, 5u);
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // Descending, ties in index order: a stable sort without std::stable_sort, whose
  // temporary buffer clang 22 reports as deprecated.
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(c.alternatives[k].id, static_cast<std::int32_t>(order[k]));
    EXPECT_NEAR(c.alternatives[k].logprob, logits[order[k]] - log_sum, 1e-5);
  }
}

/// run.c's sample() with top-p, written out as run.c writes it (its softmax, prefilter,
/// descending sort, cumulative cut and scaled coin), for comparison.
int run_c_topp(std::vector<float> logits, float temperature, float topp, llama2c_random& rng) {
  for (auto& l : logits) l /= temperature;
  float maxv = logits[0];
  for (float l : logits) maxv = std::max(maxv, l);
  float sum = 0.0f;
  for (auto& l : logits) sum += (l = std::exp(l - maxv));
  for (auto& l : logits) l /= sum;
  const float coin = static_cast<float>(rng.uniform());
  const int n = static_cast<int>(logits.size());
  const float cutoff = (1.0f - topp) / static_cast<float>(n - 1);
  std::vector<std::pair<float, int>> kept;
  for (int i = 0; i < n; ++i)
    if (logits[static_cast<std::size_t>(i)] >= cutoff) kept.push_back({logits[static_cast<std::size_t>(i)], i});
  std::sort(kept.begin(), kept.end(),
            [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  float cum = 0.0f;
  int last = static_cast<int>(kept.size()) - 1;
  for (int i = 0; i < static_cast<int>(kept.size()); ++i) {
    cum += kept[static_cast<std::size_t>(i)].first;
    if (cum > topp) {
      last = i;
      break;
    }
  }
  const float r = coin * cum;
  float cdf = 0.0f;
  for (int i = 0; i <= last; ++i) {
    cdf += kept[static_cast<std::size_t>(i)].first;
    if (r < cdf) return kept[static_cast<std::size_t>(i)].second;
  }
  return kept[static_cast<std::size_t>(last)].second;
}

TEST(Sampler, TopPIsRunCsDrawStepForStep) {
  sampler s{sampler_config{.temperature = 1.0f, .top_p = 0.9f}, llama2c_random{133742}};
  llama2c_random reference_rng{133742};
  for (std::uint64_t step = 0; step < 2000; ++step) {
    const auto logits = random_logits(512, step, 6.0f);
    ASSERT_EQ(choose(s, logits).id, run_c_topp(logits, 1.0f, 0.9f, reference_rng)) << step;
  }
}

TEST(Sampler, Llama2cRandomIsRunCsXorshift) {
  // run.c's random_u32 by hand for the first outputs of seed 133742.
  std::uint64_t state = 133742;
  llama2c_random rng{133742};
  for (int k = 0; k < 100; ++k) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const auto expected = static_cast<std::uint32_t>((state * 0x2545F4914F6CDD1Dull) >> 32);
    ASSERT_EQ(rng.next_u32(), expected);
  }
  llama2c_random a{5}, b{5};
  EXPECT_EQ(a.uniform(), static_cast<double>(static_cast<float>(b.next_u32() >> 8) / 16777216.0f));
}

TEST(Sampler, TopKAndMinPKeepOnlyTheirTokens) {
  const std::vector<float> logits{0.0f, 3.0f, 1.0f, 2.9f, -5.0f, 2.0f};
  sampler top2{sampler_config{.temperature = 1.0f, .top_k = 2}, seeded_random{9}};
  sampler min_p{sampler_config{.temperature = 1.0f, .min_p = 0.5f}, seeded_random{9}};
  std::vector<int> seen(logits.size()), seen_min_p(logits.size());
  for (int k = 0; k < 3000; ++k) {
    ++seen[static_cast<std::size_t>(choose(top2, logits).id)];
    ++seen_min_p[static_cast<std::size_t>(choose(min_p, logits).id)];
  }
  EXPECT_GT(seen[1], 1000);
  EXPECT_GT(seen[3], 1000);
  EXPECT_EQ(seen[0] + seen[2] + seen[4] + seen[5], 0);
  // min-p 0.5: kept where p >= 0.5 p(max), i.e. logit >= 3 - ln 2 = 2.307: tokens 1 and 3.
  EXPECT_EQ(seen_min_p[0] + seen_min_p[2] + seen_min_p[4] + seen_min_p[5], 0);
  EXPECT_GT(seen_min_p[1], 0);
  EXPECT_GT(seen_min_p[3], 0);
}

TEST(Sampler, DrawsFollowTheDistribution) {
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  sampler s{sampler_config{.temperature = 1.0f}, seeded_random{11}};
  std::vector<int> seen(3);
  const int n = 20000;
  for (int k = 0; k < n; ++k) ++seen[static_cast<std::size_t>(choose(s, logits).id)];
  // Binomial standard deviations at n = 20000 are under 0.0036: 5 sigma is 0.018.
  EXPECT_NEAR(seen[0] / double(n), 0.5, 0.018);
  EXPECT_NEAR(seen[1] / double(n), 0.3, 0.018);
  EXPECT_NEAR(seen[2] / double(n), 0.2, 0.018);
}

TEST(Sampler, RepetitionPenaltyLowersRecentTokensOnce) {
  sampler s{sampler_config{.repetition_penalty = 2.0f, .penalty_window = 3}, seeded_random{1}};
  // Token 0 (logit 3) was said twice within the window: 3 / 2 = 1.5 < 2 (token 1).
  EXPECT_EQ(choose(s, {3.0f, 2.0f, -1.0f}, {0, 0}).id, 1);
  // Outside the window it is not penalised.
  EXPECT_EQ(choose(s, {3.0f, 2.0f, -1.0f}, {0, 2, 2, 2}).id, 0);
  // A negative logit is multiplied: token 2 at -1 becomes -2, below token 1's -1.5.
  EXPECT_EQ(choose(s, {-3.0f, -1.5f, -1.0f}, {2}).id, 1);
}

TEST(Sampler, ErrorsAreValues) {
  sampler s{sampler_config{.temperature = 1.0f}, seeded_random{1}};
  std::vector<float> logits{1.0f, 2.0f};
  std::vector<std::byte> small(sampler_workspace_bytes(2) - 1), ws(sampler_workspace_bytes(2));
  EXPECT_EQ(s.sample(logits, {}, small).error().code(), hedge::errc::capacity_exceeded);
  logits[1] = std::nanf("");
  EXPECT_EQ(s.sample(logits, {}, ws).error().code(), hedge::errc::invalid_argument);
  std::vector<float> none;
  EXPECT_FALSE(s.sample(none, {}, ws).ok());
  sampler bad{sampler_config{.temperature = -1.0f}, seeded_random{1}};
  logits = {1.0f, 2.0f};
  EXPECT_NE(bad.sample(logits, {}, ws).error().message().find("temperature -1"), std::string_view::npos);
}

TEST(Sampler, AllocatesNothing) {
  auto logits = random_logits(32000, 5);
  std::vector<std::byte> ws(sampler_workspace_bytes(logits.size()));
  sampler s{sampler_config{.temperature = 0.7f, .top_k = 40, .top_p = 0.9f, .min_p = 0.05f, .repetition_penalty = 1.1f},
            seeded_random{2}};
  const std::vector<std::int32_t> recent{1, 2, 3};
  const hedge::test::alloc_scope count;
  const auto c = s.sample(logits, recent, ws, 8);
  EXPECT_EQ(count.count(), 0u);
  EXPECT_TRUE(c.ok());
}

}  // namespace
