// model/scoring.hpp against a float64 softmax and a full sort.
#include "hedge/model/scoring.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>

namespace {

using namespace hedge::model;

TEST(Scoring, LogProbabilityAndTopKMatchAFullSoftmaxAndSort) {
  std::vector<float> logits(1000);
  std::uint32_t state = 12345;
  for (auto& l : logits) {
    state = state * 1664525u + 1013904223u;
    l = static_cast<float>(state >> 8) / 1048576.0f - 8.0f;
  }
  logits[7] = logits[9] = 50.0f;  // a tie at the top: the lower id first
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  const double log_sum = log_sum_exp(logits);
  EXPECT_NEAR(log_sum, std::log(sum), 1e-9);
  for (token_id t : {0, 7, 500, 999})
    EXPECT_NEAR(log_probability(logits, t, log_sum), std::log(std::exp(static_cast<double>(logits[t])) / sum), 1e-5);
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  std::array<id_logprob, 8> top{};
  ASSERT_EQ(most_probable(logits, log_sum, top), 8u);
  for (std::size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(top[k].id, order[k]) << k;
    EXPECT_FLOAT_EQ(top[k].logprob, log_probability(logits, order[k], log_sum));
  }
  const std::array<float, 3> tiny{1.0f, 3.0f, 2.0f};
  std::array<id_logprob, 8> more{};
  ASSERT_EQ(most_probable(tiny, log_sum_exp(tiny), more), 3u);
  EXPECT_EQ(more[0].id, 1);
  EXPECT_EQ(more[2].id, 0);
}

}  // namespace
