// softmax_state: merging the states of two key ranges equals the state of their
// union (FlashInfer's merge, FlashDecoding's reduction), and empty ranges are neutral.
#include "hedge/attention/online_softmax.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

// State and accumulator of logits l[i] over values v[i] (one value per key, dim 1..2).
struct partial {
  hedge::attention::softmax_state state;
  std::vector<float> acc;
};
partial run(const std::vector<float>& logits, const std::vector<float>& values, std::size_t begin, std::size_t end) {
  partial p{{}, {0.f, 0.f}};
  for (std::size_t i = begin; i < end; ++i) p.state.max = std::fmax(p.state.max, logits[i]);
  for (std::size_t i = begin; i < end; ++i) {
    const float w = std::exp(logits[i] - p.state.max);
    p.state.sum += w;
    p.acc[0] += w * values[i];
    p.acc[1] += w;
  }
  return p;
}

TEST(SoftmaxState, MergeOfTwoRangesEqualsTheWholeRange) {
  const std::vector<float> logits{-3.f, 10.f, 2.5f, 40.f, -100.f, 7.f, 0.f};
  const std::vector<float> values{1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f};
  const partial whole = run(logits, values, 0, logits.size());
  std::vector<float> expected(2);
  whole.state.finish(whole.acc, expected);
  for (std::size_t cut = 0; cut <= logits.size(); ++cut) {
    partial left = run(logits, values, 0, cut);
    const partial right = run(logits, values, cut, logits.size());
    left.state.merge(left.acc, right.state, right.acc);
    std::vector<float> merged(2);
    left.state.finish(left.acc, merged);
    EXPECT_NEAR(merged[0], expected[0], 1e-6f) << cut;
    EXPECT_NEAR(merged[1], 1.f, 1e-6f) << cut;  // the weights still sum to one
  }
}

TEST(SoftmaxState, EmptyStatesAreNeutralAndFinishToZero) {
  hedge::attention::softmax_state empty;
  std::vector<float> acc{0.f, 0.f}, out{9.f, 9.f};
  empty.finish(acc, out);
  EXPECT_EQ(out[0], 0.f);
  const std::vector<float> other_acc{6.f, 3.f};
  empty.merge(acc, hedge::attention::softmax_state{1.f, 3.f}, other_acc);
  EXPECT_EQ(empty.max, 1.f);
  EXPECT_EQ(empty.sum, 3.f);
  EXPECT_EQ(acc[0], 6.f);
  empty.merge(acc, hedge::attention::softmax_state{}, std::vector<float>{0.f, 0.f});
  EXPECT_EQ(empty.sum, 3.f);
}

}  // namespace
