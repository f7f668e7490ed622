// model/perplexity.hpp against float64 hand computations: the statistics on random logits,
// the chunking (llama-perplexity's rules), and the whole measurement on synthetic models
// against tests/model/reference_llama.hpp's float64 forward pass.
#include "hedge/model/perplexity.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "hedge/model/forward.hpp"
#include "reference_llama.hpp"
#include "synthetic_gguf.hpp"

namespace {

using namespace hedge;
using namespace hedge::model;
using hedge::test::expect_error;

std::vector<float> random_logits(std::size_t n, std::uint32_t& state, float spread) {
  std::vector<float> out(n);
  for (auto& l : out) {
    state = state * 1664525u + 1013904223u;
    l = spread * (static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
  }
  return out;
}

/// log softmax of `logits` in double, written out.
std::vector<double> log_softmax(const std::vector<double>& logits) {
  double high = logits[0];
  for (double l : logits) high = std::max(high, l);
  double sum = 0;
  for (double l : logits) sum += std::exp(l - high);
  std::vector<double> out;
  for (double l : logits) out.push_back(l - high - std::log(sum));
  return out;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(Perplexity, StatisticsMatchAFloat64HandComputation) {
  constexpr std::size_t vocab = 97, positions = 300;
  std::uint32_t state = 2024;
  perplexity_accumulator ppl;
  kl_divergence_accumulator kl;
  std::vector<double> nll, nll_base, kld, p_diff;
  std::size_t same = 0;
  for (std::size_t i = 0; i < positions; ++i) {
    const auto reference = random_logits(vocab, state, 12.0f);
    auto logits = reference;  // the model: the reference moved a little, more at some positions
    const auto noise = random_logits(vocab, state, i % 7 == 0 ? 6.0f : 0.5f);
    for (std::size_t j = 0; j < vocab; ++j) logits[j] += noise[j];
    const auto target = static_cast<token_id>(state % vocab);
    ppl.add(logits, target);
    kl.add(logits, reference, target);
    const auto lq = log_softmax(widen(logits)), lp = log_softmax(widen(reference));
    nll.push_back(-lq[static_cast<std::size_t>(target)]);
    nll_base.push_back(-lp[static_cast<std::size_t>(target)]);
    double d = 0;
    for (std::size_t j = 0; j < vocab; ++j) d += std::exp(lp[j]) * (lp[j] - lq[j]);
    kld.push_back(d);
    p_diff.push_back(std::exp(-nll.back()) - std::exp(-nll_base.back()));
    same += std::max_element(logits.begin(), logits.end()) - logits.begin() ==
            std::max_element(reference.begin(), reference.end()) - reference.begin();
  }
  const double n = positions;
  const auto mean = [&](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / n;
  };
  // The standard error of the mean, from the sample variance with n - 1.
  const auto standard_error = [&](const std::vector<double>& v) {
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / n / (n - 1));
  };
  const double m = mean(nll), mb = mean(nll_base), se = standard_error(nll), seb = standard_error(nll_base);
  ASSERT_EQ(ppl.count(), positions);
  EXPECT_NEAR(ppl.log_perplexity().value, m, 1e-12);
  EXPECT_NEAR(ppl.log_perplexity().uncertainty, se, 1e-12);
  EXPECT_NEAR(ppl.perplexity().value, std::exp(m), 1e-9 * std::exp(m));
  EXPECT_NEAR(ppl.perplexity().uncertainty, std::exp(m) * se, 1e-9);

  double covariance = 0;
  for (std::size_t i = 0; i < positions; ++i) covariance += (nll[i] - m) * (nll_base[i] - mb);
  covariance /= n * (n - 1);
  const kl_divergence_summary s = kl.summary();
  EXPECT_EQ(s.count, positions);
  EXPECT_NEAR(s.perplexity.value, std::exp(m), 1e-9);
  EXPECT_NEAR(s.reference_perplexity.value, std::exp(mb), 1e-9);
  EXPECT_NEAR(s.reference_perplexity.uncertainty, std::exp(mb) * seb, 1e-9);
  EXPECT_NEAR(s.correlation, covariance / (se * seb), 1e-9);
  EXPECT_NEAR(s.log_ratio.value, m - mb, 1e-12);
  EXPECT_NEAR(s.log_ratio.uncertainty, std::sqrt(se * se + seb * seb - 2 * covariance), 1e-9);
  EXPECT_NEAR(s.ratio.value, std::exp(m - mb), 1e-9);
  EXPECT_NEAR(s.difference.value, std::exp(m) - std::exp(mb), 1e-9);
  const double pc = std::exp(m) * std::exp(mb) * covariance, ue = std::exp(m) * se, ub = std::exp(mb) * seb;
  EXPECT_NEAR(s.difference.uncertainty, std::sqrt(ue * ue + ub * ub - 2 * pc), 1e-9);
  EXPECT_NEAR(s.kl_divergence.value, mean(kld), 1e-9);
  EXPECT_NEAR(s.kl_divergence.uncertainty, standard_error(kld), 1e-9);
  EXPECT_NEAR(s.max_kl_divergence, *std::max_element(kld.begin(), kld.end()), 1e-9);
  std::vector<double> p_diff2;
  for (double d : p_diff) p_diff2.push_back(d * d);
  EXPECT_NEAR(s.rms_p_diff.value, std::sqrt(mean(p_diff2)), 1e-9);
  EXPECT_NEAR(s.rms_p_diff.uncertainty, 0.5 / std::sqrt(mean(p_diff2)) * standard_error(p_diff2), 1e-9);
  EXPECT_NEAR(s.same_top.value, static_cast<double>(same) / n, 1e-12);
  EXPECT_GT(same, 0u);
  EXPECT_LT(same, positions);  // the noisy positions change some top tokens: the count is tested
  EXPECT_NEAR(s.same_top.uncertainty, std::sqrt(s.same_top.value * (1 - s.same_top.value) / (n - 1)), 1e-12);
  EXPECT_GT(s.kl_divergence.value, 0.0);
}

TEST(Perplexity, ChunksFollowLlamaPerplexity) {
  auto p = perplexity_chunks::plan(6936, 512);  // tests/tools/data/stories.txt under stories260K
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->count, 13u);
  EXPECT_EQ(p->first, 256u);
  EXPECT_EQ(p->scored(), 255u);
  EXPECT_EQ(perplexity_chunks::plan(6936, 512, 4)->count, 4u);
  EXPECT_EQ(perplexity_chunks::plan(6936, 512, 40)->count, 13u);
  EXPECT_EQ(perplexity_chunks::plan(1024, 512)->count, 2u);
  EXPECT_EQ(perplexity_chunks::plan(15, 5)->scored(), 2u);  // odd: first = 2, positions 2 and 3
  expect_error(perplexity_chunks::plan(1023, 512).error(), errc::invalid_argument,
               "the text makes 1023 tokens: perplexity with a context of 512 needs at least 1024 (2 chunks)");
  expect_error(perplexity_chunks::plan(100, 3).error(), errc::invalid_argument, "context of 3 tokens: at least 4");
  expect_error(perplexity_chunks::plan(100, 0).error(), errc::invalid_argument, "context of 0 tokens");
}

/// Ids BOS, then `n - 1` random ids of 3..vocab-1 (never BOS: the chunks' BOS is the method's).
std::vector<token_id> random_text(std::size_t n, std::uint32_t vocab) {
  std::vector<token_id> ids{1};
  std::uint32_t state = 99;
  while (ids.size() < n) {
    state = state * 1664525u + 1013904223u;
    ids.push_back(static_cast<token_id>(3 + (state >> 8) % (vocab - 3)));
  }
  return ids;
}

/// The float64 forward pass's logits at positions first..context-2 of chunk i, its first
/// token replaced by BOS (id 1).
std::vector<std::vector<double>> reference_chunk(const test::reference_llama& pristine, const std::vector<token_id>& ids,
                                                 const perplexity_chunks& c, std::size_t i) {
  test::reference_llama r = pristine;
  std::vector<std::vector<double>> rows;
  for (std::size_t k = 0; k + 1 < c.context; ++k) {
    auto logits = r.forward(k == 0 ? 1 : ids[i * c.context + k]);
    if (k >= c.first) rows.push_back(std::move(logits));
  }
  return rows;
}

TEST(Perplexity, MeasurementMatchesAFloat64ForwardPass) {
  const synthetic_llama spec{.dim = 64, .hidden_dim = 96, .layers = 2, .heads = 8, .kv_heads = 4, .context = 32,
                             .vocab = 48};
  auto s = test::load_synthetic(spec);
  ASSERT_TRUE(s) << s.error().message();
  auto model = llama<>::make(s->weights, {.context = 20});
  ASSERT_TRUE(model) << model.error().message();
  auto reference = test::reference_llama::make(s->weights);
  ASSERT_TRUE(reference) << reference.error().message();
  const auto ids = random_text(75, spec.vocab);  // 3 chunks of 20, 15 tokens left out
  const auto chunks = perplexity_chunks::plan(ids.size(), 20);
  ASSERT_TRUE(chunks);
  ASSERT_EQ(chunks->count, 3u);

  double sum = 0, sum2 = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < chunks->count; ++i) {
    const auto rows = reference_chunk(*reference, ids, *chunks, i);
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const double nll = -log_softmax(rows[k])[static_cast<std::size_t>(ids[i * 20 + chunks->first + k + 1])];
      sum += nll, sum2 += nll * nll, ++n;
    }
  }
  const estimate want = mean_estimate(sum, sum2, n);
  exec::serial serial;
  std::vector<std::size_t> reported;
  auto got = measure_perplexity(*model, ids, *chunks, 1, serial,
                                [&](std::size_t i, const perplexity_accumulator& a) {
                                  reported.push_back(i);
                                  EXPECT_EQ(a.count(), (i + 1) * chunks->scored());
                                });
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(reported, (std::vector<std::size_t>{0, 1, 2}));
  ASSERT_EQ(got->count(), n);
  EXPECT_NEAR(got->log_perplexity().value, want.value, 1e-5);
  EXPECT_NEAR(got->log_perplexity().uncertainty, want.uncertainty, 1e-5);

  // The scored half in blocks of 4 rows (the last one 1): each position's logits as above.
  auto session = model->create_session();
  ASSERT_TRUE(session);
  auto run = chunk_run<llama<>>::make(*model, *session, chunks->first, 4);
  ASSERT_TRUE(run);
  for (std::size_t i = 0; i < 2; ++i) {
    std::vector<token_id> input(ids.begin() + static_cast<std::ptrdiff_t>(i * 20),
                                ids.begin() + static_cast<std::ptrdiff_t>(i * 20 + 20));
    input[0] = 1;
    run->begin(input);
    const auto rows = reference_chunk(*reference, ids, *chunks, i);
    for (const auto& row : rows) {
      auto logits = run->next(serial);
      ASSERT_TRUE(logits) << logits.error().message();
      double worst = 0;
      for (std::size_t j = 0; j < row.size(); ++j) worst = std::max(worst, std::fabs((*logits)[j] - row[j]));
      EXPECT_LT(worst, 1e-4);
    }
    expect_error(run->next(serial).error(), errc::out_of_range, "the chunk's 20 positions are all scored");
  }
  ASSERT_TRUE(model->release(*session));

  // Without BOS in place of each chunk's first token the figure changes: the replacement is done.
  auto plain = measure_perplexity(*model, ids, *chunks, no_token, serial, [](std::size_t, const auto&) {});
  ASSERT_TRUE(plain);
  EXPECT_GT(std::fabs(plain->log_perplexity().value - want.value), 1e-4);

  // A model whose context is shorter than a chunk is refused by name.
  auto short_model = llama<>::make(s->weights, {.context = 16});
  ASSERT_TRUE(short_model);
  expect_error(measure_perplexity(*short_model, ids, *chunks, 1, serial, [](std::size_t, const auto&) {}).error(),
               errc::capacity_exceeded, "the model's context of 16 positions is shorter than the chunks' 20");
}

TEST(Perplexity, KlDivergenceMatchesAFloat64ForwardPass) {
  synthetic_llama spec{.dim = 64, .hidden_dim = 96, .layers = 2, .heads = 8, .kv_heads = 4, .context = 32,
                       .vocab = 48};
  auto a = test::load_synthetic(spec);
  spec.seed = 7;  // another model of the same vocabulary
  auto b = test::load_synthetic(spec);
  ASSERT_TRUE(a && b);
  auto model = llama<>::make(a->weights, {.context = 16});
  auto same = llama<>::make(a->weights, {.context = 16});
  auto other = llama<>::make(b->weights, {.context = 16});
  auto ref_a = test::reference_llama::make(a->weights);
  auto ref_b = test::reference_llama::make(b->weights);
  ASSERT_TRUE(model && same && other && ref_a && ref_b);
  const auto ids = random_text(48, spec.vocab);
  const auto chunks = *perplexity_chunks::plan(ids.size(), 16);
  exec::serial serial;
  std::size_t calls = 0;
  const auto count = [&](std::size_t, const kl_divergence_accumulator&) { ++calls; };

  auto itself = measure_kl_divergence(*model, *same, ids, chunks, 1, serial, count);
  ASSERT_TRUE(itself) << itself.error().message();
  const auto zero = itself->summary();
  EXPECT_EQ(zero.count, 3 * chunks.scored());
  EXPECT_NEAR(zero.kl_divergence.value, 0.0, 1e-12);
  EXPECT_EQ(zero.same_top.value, 1.0);
  EXPECT_EQ(zero.difference.value, 0.0);
  EXPECT_EQ(calls, 3u);

  double kl = 0, dq = 0, dp = 0;
  std::size_t agree = 0, n = 0;
  for (std::size_t i = 0; i < chunks.count; ++i) {
    const auto q_rows = reference_chunk(*ref_a, ids, chunks, i), p_rows = reference_chunk(*ref_b, ids, chunks, i);
    for (std::size_t k = 0; k < q_rows.size(); ++k, ++n) {
      const auto lq = log_softmax(q_rows[k]), lp = log_softmax(p_rows[k]);
      for (std::size_t j = 0; j < lq.size(); ++j) kl += std::exp(lp[j]) * (lp[j] - lq[j]);
      const auto target = static_cast<std::size_t>(ids[i * chunks.context + chunks.first + k + 1]);
      dq += -lq[target], dp += -lp[target];
      agree += std::max_element(lq.begin(), lq.end()) - lq.begin() == std::max_element(lp.begin(), lp.end()) - lp.begin();
    }
  }
  auto got = measure_kl_divergence(*model, *other, ids, chunks, 1, serial, count);
  ASSERT_TRUE(got) << got.error().message();
  const auto s = got->summary();
  ASSERT_EQ(s.count, n);
  EXPECT_GT(kl / n, 0.01);
  EXPECT_NEAR(s.kl_divergence.value, kl / n, 1e-5);
  EXPECT_NEAR(s.log_ratio.value, (dq - dp) / n, 1e-5);
  EXPECT_NEAR(s.same_top.value, static_cast<double>(agree) / n, 1e-12);

  // A reference with another vocabulary is refused, by its size and by its first other piece.
  spec.vocab = 50;
  auto wider = test::load_synthetic(spec);
  ASSERT_TRUE(wider);
  auto wide = llama<>::make(wider->weights, {.context = 16});
  ASSERT_TRUE(wide);
  expect_error(measure_kl_divergence(*model, *wide, ids, chunks, 1, serial, count).error(), errc::shape_mismatch,
               "the reference's classifier has 50 rows, the model's 48");
  const std::vector<std::string> pieces{"<unk>", "<s>", "</s>", "a", "b"}, others{"<unk>", "<s>", "</s>", "a", "c"},
      fewer{"<unk>", "<s>", "</s>"};
  const auto build = [](const std::vector<std::string>& p) {
    return vocabulary::build(p.size(), [&](std::size_t i) -> result<token_record> { return token_record{p[i]}; },
                             vocabulary_settings{});
  };
  auto v = build(pieces), w = build(others), shorter = build(fewer);
  ASSERT_TRUE(v && w && shorter);
  EXPECT_TRUE(check_same_vocabulary(*v, *v));
  expect_error(check_same_vocabulary(*v, *w).error(), errc::shape_mismatch,
               "the reference's vocabulary differs from the model's at token 4");
  expect_error(check_same_vocabulary(*v, *shorter).error(), errc::shape_mismatch,
               "the reference's vocabulary has 3 tokens, the model's 5");
}

}  // namespace
