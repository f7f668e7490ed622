// Speculative accept/reject (Leviathan et al. 2023) preserves the target distribution:
// chi-square tests over many seeded runs, for several (p, q) pairs, at every position of
// a 2-token draft (replacement tokens and the bonus token included).
#include "hedge/verify/speculative.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "hedge/model/random.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::verify;
using hedge::model::seeded_random;
using hedge::model::sample_index;
constexpr std::size_t vocab = 5;
using dist = std::array<float, vocab>;

/// Upper critical value of chi-square with df degrees of freedom at significance 0.001
/// (Wilson-Hilferty approximation, z = 3.09).
double chi_square_critical(std::size_t df) {
  const double d = static_cast<double>(df), a = 2.0 / (9.0 * d);
  return d * std::pow(1.0 - a + 3.09 * std::sqrt(a), 3.0);
}

/// Chi-square statistic of observed counts against probabilities p (cells with p = 0 must be empty).
double chi_square(const std::array<std::size_t, vocab>& counts, const dist& p, std::size_t& df, bool& impossible) {
  std::size_t n = 0;
  for (auto c : counts) n += c;
  double stat = 0.0;
  df = 0;
  impossible = false;
  if (n == 0) return 0.0;  // position never reached (e.g. disjoint supports reject every draft)
  for (std::size_t v = 0; v < vocab; ++v) {
    if (p[v] == 0.0f) {
      impossible = impossible || counts[v] != 0;
      continue;
    }
    const double expected = static_cast<double>(n) * p[v];
    stat += (static_cast<double>(counts[v]) - expected) * (static_cast<double>(counts[v]) - expected) / expected;
    ++df;
  }
  df = df > 0 ? df - 1 : 0;
  return stat;
}

struct case_t {
  const char* name;
  std::array<dist, 3> p;  // target at positions 1..3
  std::array<dist, 2> q;  // draft at positions 1..2
};

void check_distribution(const case_t& c, std::uint64_t seed) {
  std::array<float, 3 * vocab> target{};
  std::array<float, 2 * vocab> draft{};
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t v = 0; v < vocab; ++v) target[i * vocab + v] = c.p[i][v];
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t v = 0; v < vocab; ++v) draft[i * vocab + v] = c.q[i][v];
  const hedge::matrix_view<const float> p{target.data(), 3, vocab}, q{draft.data(), 2, vocab};
  std::array<std::array<std::size_t, vocab>, 3> counts{};
  std::array<float, vocab> scratch{};
  seeded_random rng{seed};
  constexpr int trials = 200000;
  for (int t = 0; t < trials; ++t) {
    std::array<std::int32_t, 2> tokens{};
    for (std::size_t i = 0; i < 2; ++i) tokens[i] = sample_index({c.q[i].data(), vocab}, rng.uniform());
    const auto step = speculative_accept(p, q, tokens, scratch, rng);
    ASSERT_TRUE(step.ok());
    // Emitted sequence: accepted drafts, then `next`. Position j's token is tallied among
    // the runs that reached position j.
    for (std::size_t j = 0; j < step->accepted; ++j) ++counts[j][static_cast<std::size_t>(tokens[j])];
    ++counts[step->accepted][static_cast<std::size_t>(step->next)];
  }
  for (std::size_t j = 0; j < 3; ++j) {
    std::size_t df = 0;
    bool impossible = false;
    const double stat = chi_square(counts[j], c.p[j], df, impossible);
    EXPECT_FALSE(impossible) << c.name << " position " << j << ": a token with p = 0 was emitted";
    if (df > 0) {
      EXPECT_LT(stat, chi_square_critical(df)) << c.name << " position " << j << " chi2 " << stat;
    }
  }
}

TEST(Speculative, OutputFollowsTargetDistribution) {
  const dist uniform{0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, peaked{0.7f, 0.1f, 0.1f, 0.05f, 0.05f},
      skewed{0.05f, 0.05f, 0.1f, 0.3f, 0.5f}, left{0.5f, 0.5f, 0.0f, 0.0f, 0.0f}, right{0.0f, 0.0f, 0.3f, 0.3f, 0.4f},
      one_hot{1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const case_t cases[] = {
      {"q equals p", {peaked, skewed, uniform}, {peaked, skewed}},
      {"disjoint supports", {left, right, peaked}, {right, left}},
      {"uniform draft, peaked target", {peaked, skewed, left}, {uniform, uniform}},
      {"peaked draft, uniform target", {uniform, uniform, skewed}, {peaked, one_hot}},
      {"draft support inside target's", {skewed, uniform, peaked}, {one_hot, left}},
  };
  std::uint64_t seed = 1;
  for (const auto& c : cases) check_distribution(c, seed++);
}

TEST(Speculative, RandomPairsFollowTargetDistribution) {
  seeded_random gen{99};
  for (int pair = 0; pair < 4; ++pair) {
    case_t c{"random pair", {}, {}};
    auto fill = [&](dist& d) {
      float total = 0.0f;
      for (auto& x : d) total += (x = static_cast<float>(gen.uniform()) + 0.01f);
      for (auto& x : d) x /= total;
    };
    for (auto& d : c.p) fill(d);
    for (auto& d : c.q) fill(d);
    check_distribution(c, 1000 + static_cast<std::uint64_t>(pair));
  }
}

TEST(Speculative, AcceptsEverythingWhenDraftEqualsTargetAndAllocatesNothing) {
  const std::array<float, 2 * 3> p{0.2f, 0.3f, 0.5f, 0.2f, 0.3f, 0.5f};
  const std::array<float, 3> q{0.2f, 0.3f, 0.5f};
  std::array<float, 3> scratch{};
  const std::array<std::int32_t, 1> tokens{2};
  seeded_random rng{5};
  hedge::test::alloc_scope scope;
  for (int t = 0; t < 100; ++t) {
    auto s = speculative_accept(hedge::matrix_view<const float>{p.data(), 2, 3},
                                hedge::matrix_view<const float>{q.data(), 1, 3}, tokens, scratch, rng);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->accepted, 1u);
  }
  EXPECT_EQ(scope.count(), 0u);
}

TEST(Speculative, ShapeErrors) {
  const std::array<float, 6> p{};
  std::array<float, 3> scratch{};
  const std::array<std::int32_t, 1> bad_token{7};
  seeded_random rng{1};
  const hedge::matrix_view<const float> target{p.data(), 2, 3}, draft{p.data(), 1, 3}, wrong{p.data(), 2, 3};
  EXPECT_EQ(speculative_accept(target, wrong, bad_token, scratch, rng).error().code(), hedge::errc::shape_mismatch);
  EXPECT_EQ(speculative_accept(target, draft, bad_token, scratch, rng).error().code(), hedge::errc::out_of_range);
  EXPECT_EQ(speculative_accept(target, draft, bad_token, std::span<float>{scratch.data(), 2}, rng).error().code(),
            hedge::errc::capacity_exceeded);
}

}  // namespace
