// Training: the fit's parameters checked before it runs, a diverged fit refused, and the
// memory of parsing and featurising a huge prompt independent of its length.
#include "hedge/route/training.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::route;

TEST(ComplexityTraining, FitParametersAreCheckedUpFront) {
  EXPECT_TRUE(check_logistic_options({}).ok());
  EXPECT_TRUE(check_logistic_options({.epochs = 1, .learning_rate = 1e30, .l2 = 0.0}).ok());  // may still diverge
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const logistic_options bad : {logistic_options{.epochs = 0}, logistic_options{.epochs = -3},
                                     logistic_options{.epochs = logistic_options::max_epochs + 1},
                                     logistic_options{.learning_rate = 0.0}, logistic_options{.learning_rate = -0.1},
                                     logistic_options{.learning_rate = nan}, logistic_options{.learning_rate = inf},
                                     logistic_options{.l2 = -1e-3}, logistic_options{.l2 = nan},
                                     logistic_options{.l2 = inf}}) {
    const auto r = check_logistic_options(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), hedge::errc::invalid_argument);
  }
}

// hedge-route-train --learning-rate 1e30 wrote a file of NaN weights with exit code 0: the
// diverged model is refused, a converged one passes.
TEST(ComplexityTraining, ADivergedFitIsRefused) {
  const char* prompts[] = {"prove the integral converges", "what colour is the sky", "derive the eigenvalues",
                           "name a fruit"};
  std::vector<sparse_features> features;
  for (const char* p : prompts) features.push_back(sparse_features_of<256>(p));
  std::vector<const sparse_features*> x;
  for (const auto& f : features) x.push_back(&f);
  const std::vector<float> labels{1.0f, 0.0f, 1.0f, 0.0f}, weights(4, 1.0f);
  auto model = std::make_unique<complexity_model<256>>();
  const auto diverged = train_complexity_model(x, labels, weights, {.epochs = 5, .learning_rate = 1e30}, *model);
  ASSERT_FALSE(diverged.ok());
  EXPECT_NE(diverged.error().message().find("the fit diverged"), std::string_view::npos);
  EXPECT_FALSE(check_trained_model(*model).ok());
  const auto refused = train_complexity_model(x, labels, weights, {.epochs = 0}, *model);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("epochs 0"), std::string_view::npos);
  ASSERT_TRUE(train_complexity_model(x, labels, weights, {.epochs = 5}, *model).ok());
  EXPECT_TRUE(check_trained_model(*model).ok());
  EXPECT_TRUE(std::isfinite(model->max_abs_logit()));
}

// Memory: a prompt's features are counted per bucket, and a CSV field is reserved at its
// raw size, so neither allocates more often (nor holds more) for a longer prompt: a list
// of reported buckets, or a string grown byte by byte, reallocates at every doubling
// (a 50 MB prompt made training peak at 12x its size).
TEST(ComplexityTraining, MemoryOfAHugePromptDoesNotGrowWithIt) {
  const auto allocations = [](auto&& run) {
    hedge::test::alloc_scope scope;
    run();
    return scope.count();
  };
  const std::string small(4096, 'b'), huge(std::size_t{4} << 20, 'b');
  const auto features_of = [](const std::string& p) { return [&p] { (void)sparse_features_of<4096>(p); }; };
  EXPECT_EQ(allocations(features_of(huge)), allocations(features_of(small)));
  const auto csv_of = [](const std::string& p) { return "prompt,weak,strong\n\"" + p + "\",True,False\n"; };
  const std::string small_csv = csv_of(small), huge_csv = csv_of(huge);
  std::size_t parsed = 0;
  const auto parse = [&parsed](const std::string& text) {
    return [&parsed, &text] { parsed = parse_labelled_csv(text)->front().prompt.size(); };
  };
  const std::size_t huge_allocations = allocations(parse(huge_csv));
  EXPECT_EQ(parsed, huge.size());
  EXPECT_EQ(huge_allocations, allocations(parse(small_csv)));
}

}  // namespace
