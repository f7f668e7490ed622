// The forward pass on random llama models written with the GGUF writer, against a float64
// reference (reference_llama.hpp): every weight format, GQA groups, head sizes, KV elements,
// decode against prefill, and the errors of bad input. Needs no file from ../shared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/kv/element.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/synthetic_llama.hpp"
#include "hedge/model/weights.hpp"
#include "hedge/os/thread_pool.hpp"
#include "reference_llama.hpp"
#include "synthetic_gguf.hpp"
#include "support/model_files.hpp"

namespace {

using namespace hedge::model;
using hedge::errc;
using hedge::result;
using hedge::quant::gguf_type;
using hedge::test::expect_error;
using hedge::test::load_synthetic;
using hedge::test::write_synthetic_gguf;

/// The largest |a - b| over a position's logits, relative to the largest |reference logit|.
double relative_error(std::span<const float> got, const std::vector<double>& reference) {
  double most = 0.0, scale = 0.0;
  for (std::size_t j = 0; j < reference.size(); ++j) {
    most = std::max(most, std::abs(static_cast<double>(got[j]) - reference[j]));
    scale = std::max(scale, std::abs(reference[j]));
  }
  return most / scale;
}

double relative_error(std::span<const float> got, std::span<const float> reference) {
  return relative_error(got, std::vector<double>(reference.begin(), reference.end()));
}

std::vector<std::int32_t> random_tokens(std::size_t count, std::uint32_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(vocab) - 1);
  std::vector<std::int32_t> tokens(count);
  for (auto& t : tokens) t = pick(rng);
  return tokens;
}

// Tolerances, as a fraction of the largest |logit| of a position (max_j |got_j - ref_j| <=
// tol * max_j |ref_j|), from what rounds between the float64 reference and hedge:
//
// - Float weights (F32, F16, BF16 dequantize exactly; the GEMV multiplies the float
//   activation): only float32 arithmetic. A dot product of K terms is within K * 2^-24 of
//   sum |w x| (3.1e-5 for K = 512, the widest row here), whatever the summation order;
//   softmax, RMSNorm and the residual sums add a few ulps per layer: 1e-4. A wrong index,
//   scale or position gives errors of order one.
// - Quantized activations (Q8_0 for Q4_0/Q8_0 weights, Q8_K for Q4_K/Q6_K): x is rounded
//   per block (32 or 256 values) to d * q, d = amax / 127, each element by up to d / 2:
//   an RMS of amax / (127 sqrt 12), i.e. 0.5% (Q8_0) to 0.65% (Q8_K) of the input's RMS
//   for Gaussian rows (amax about 2.2 and 2.8 sigma), and 1% to 1.4% for SwiGLU's
//   heavy-tailed output (amax 4 to 6 sigma). Each GEMV output carries that relative
//   error; a two-layer model chains 9 of them (q/k/v, o, gate/up, down per layer, the
//   classifier), which RMSNorm, attention and SwiGLU pass on with gain about one: 2% (Q8_0)
//   to 3% (Q8_K) RMS of the logits in all. The largest of 24-32 positions x 32-64 logits
//   lies within about 3.5 RMS, and the largest |logit| is about 2.5 RMS of the logits:
//   up to 3.5 * 3% / 2.5 = 4.2%. Tolerance 8e-2. (Over 12 seeds of the head-64 shape the
//   worst errors were 0.015-0.021 for Q8_0/Q4_0 and 0.021-0.034 for Q4_K/Q6_K.)
//   (The rounding is a step function: a float32 x one ulp from the reference's can round
//   to the neighbouring q, so a reference that rounds x the same way still differs by up
//   to 1e-2 at a position where that happens, and at every later one through the cache.)
// - KV f16: k and v rounded to 11 significant bits (2^-11 = 4.9e-4 relative): scores and
//   attention outputs move by about that, through two layers: 2e-3.
// - KV q8_0: k and v per head vector in Q8_0 blocks of 32 (0.5% RMS, as an activation),
//   and the AVX2 kernel rounds the query to Q8_0 too: three more roundings in every
//   attention, on top of Q8_0 weights in the second case: 1e-1.
// Prefill against decode: the same arithmetic in another order (GEMM tiles, causal
// attention), and the same activation rounding, which may step differently: they are
// compared to each other with the decode tolerance, and both to the reference.
constexpr double float_tolerance = 1e-4;
constexpr double quantized_tolerance = 8e-2;
constexpr double kv_f16_tolerance = 2e-3;
constexpr double kv_q8_0_tolerance = 1e-1;

enum class kv_kind { f32, f16, q8_0 };

struct forward_case {
  std::string name;
  synthetic_llama spec;
  kv_kind kv = kv_kind::f32;
  std::size_t positions = 24;
  double tolerance = float_tolerance;
  std::size_t threads = 1;
};

struct measured {
  double decode = 0.0;           ///< worst over positions: decode against the reference
  double prefill = 0.0;          ///< worst of the prefill chunks' last logits against the reference
  double prefill_decode = 0.0;   ///< worst of the prefill chunks' last logits against decode's
};

template <hedge::kv::KvElement KvElem>
void run_case(const forward_case& c, measured& m) {
  const auto model_file = load_synthetic(c.spec);
  ASSERT_TRUE(model_file.ok()) << model_file.error().message();
  const llama_weights& weights = model_file->weights;
  EXPECT_EQ(weights.config.shared_classifier, c.spec.shared_classifier);
  const auto vocabulary = read_gguf_vocabulary(model_file->file);
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.error().message();
  EXPECT_EQ(vocabulary->size(), c.spec.vocab);

  auto reference = hedge::test::reference_llama::make(weights);
  ASSERT_TRUE(reference.ok()) << reference.error().message();
  auto model = llama<all_weight_formats, KvElem>::make(
      weights, {.max_sessions = 2, .max_threads = c.threads, .parallel_min_bytes = 0});
  ASSERT_TRUE(model.ok()) << model.error().message();
  ASSERT_EQ(model->context(), c.spec.context);
  hedge::exec::thread_pool pool(c.threads);
  const auto tokens = random_tokens(c.positions, c.spec.vocab, c.spec.seed + 7);

  // Decode, position by position, against the reference.
  auto seq = model->create_session();
  ASSERT_TRUE(seq.ok()) << seq.error().message();
  std::vector<std::vector<float>> decoded;
  std::vector<std::vector<double>> expected;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    const auto logits = model->decode(*seq, tokens[pos], pool);
    ASSERT_TRUE(logits.ok()) << "position " << pos << ": " << logits.error().message();
    expected.push_back(reference->forward(tokens[pos]));
    const double error = relative_error(*logits, expected.back());
    EXPECT_LT(error, c.tolerance) << "decode at position " << pos;
    m.decode = std::max(m.decode, error);
    decoded.emplace_back(logits->begin(), logits->end());
  }

  // Prefill in two chunks (the second after a prefix already in the cache): the logits
  // after each chunk's last token are decode's at that position.
  auto fresh = model->create_session();
  ASSERT_TRUE(fresh.ok()) << fresh.error().message();
  const std::size_t split = tokens.size() / 2 + 1;
  std::size_t begin = 0;
  for (const std::size_t end : {split, tokens.size()}) {
    const std::span<const std::int32_t> chunk(tokens.data() + begin, end - begin);
    const auto logits = model->prefill(*fresh, chunk, pool);
    ASSERT_TRUE(logits.ok()) << "prefill of " << begin << ".." << end << ": " << logits.error().message();
    const double against_reference = relative_error(*logits, expected[end - 1]);
    const double against_decode = relative_error(*logits, decoded[end - 1]);
    EXPECT_LT(against_reference, c.tolerance) << "prefill of " << begin << ".." << end;
    EXPECT_LT(against_decode, c.tolerance) << "prefill of " << begin << ".." << end << " against decode";
    m.prefill = std::max(m.prefill, against_reference);
    m.prefill_decode = std::max(m.prefill_decode, against_decode);
    EXPECT_EQ(*model->length(*fresh), end);
    begin = end;
  }
}

class SyntheticForward : public ::testing::TestWithParam<forward_case> {};

TEST_P(SyntheticForward, DecodeAndPrefillMatchTheFloat64Reference) {
  const forward_case& c = GetParam();
  measured m;
  switch (c.kv) {
    case kv_kind::f32: run_case<hedge::kv::kv_f32>(c, m); break;
    case kv_kind::f16: run_case<hedge::kv::kv_f16>(c, m); break;
    case kv_kind::q8_0: run_case<hedge::kv::kv_q8_0>(c, m); break;
  }
  std::printf("%s: %zu positions, worst error / max|logit|: decode %.3g, prefill %.3g, prefill vs decode %.3g "
              "(tolerance %.3g)\n",
              c.name.c_str(), c.positions, m.decode, m.prefill, m.prefill_decode, c.tolerance);
}

forward_case make_case(std::string name, synthetic_llama spec, double tolerance, kv_kind kv = kv_kind::f32) {
  forward_case c;
  c.name = std::move(name);
  c.spec = std::move(spec);
  c.spec.seed = std::hash<std::string>{}(c.name);
  c.tolerance = tolerance;
  c.kv = kv;
  return c;
}

/// `shape` with every matrix in `type`, the classifier shared with the embedding or not.
synthetic_llama typed(synthetic_llama shape, gguf_type type, bool shared = false) {
  shape.all_types(type).shared_classifier = shared;
  return shape;
}

// Shapes: small enough for the sanitizer build, each exercising one kernel path.
//   head 8, group 1:   dim 64, 8 heads, 8 kv heads (stories260K's head size), hidden 96
//   head 16, group 4:  dim 128, 8 heads, 2 kv heads, hidden 160, an odd vocabulary (61)
//   head 64, group 2:  dim 256, 4 heads, 2 kv heads, hidden 256: K-quant rows
//   head 128, group 2: dim 256, 2 heads, 1 kv head, hidden 256
//   head 128, group 4: dim 512, 4 heads, 1 kv head, hidden 288 (not a multiple of 256), 1 layer
const synthetic_llama head8_group1{.dim = 64, .hidden_dim = 96, .layers = 2, .heads = 8, .kv_heads = 8, .context = 32, .vocab = 48};
const synthetic_llama head16_group4{.dim = 128, .hidden_dim = 160, .layers = 2, .heads = 8, .kv_heads = 2, .context = 32, .vocab = 61};
const synthetic_llama head64_group2{.dim = 256, .hidden_dim = 256, .layers = 2, .heads = 4, .kv_heads = 2, .context = 32, .vocab = 64};
const synthetic_llama head128_group2{.dim = 256, .hidden_dim = 256, .layers = 2, .heads = 2, .kv_heads = 1, .context = 32, .vocab = 40};
const synthetic_llama head128_group4{.dim = 512, .hidden_dim = 288, .layers = 1, .heads = 4, .kv_heads = 1, .context = 32, .vocab = 32};

std::vector<forward_case> forward_cases() {
  // llama.cpp's Q4_K_M mix: Q6_K for attn_v, ffn_down and the classifier, F32 norms.
  synthetic_llama q4_k_m = typed(head64_group2, gguf_type::q4_k);
  q4_k_m.value = q4_k_m.down = q4_k_m.output = gguf_type::q6_k;
  synthetic_llama q5_k_m = typed(head64_group2, gguf_type::q5_k);
  q5_k_m.value = q5_k_m.down = q5_k_m.output = gguf_type::q6_k;
  // Rows of 288 are Q8_0 or F32 only: down projection F32, the rest Q8_0; and the reverse.
  synthetic_llama f32_down = typed(head128_group4, gguf_type::q8_0);
  f32_down.down = gguf_type::f32;
  synthetic_llama q8_0_down = head128_group4;
  q8_0_down.down = gguf_type::q8_0;
  std::vector<forward_case> cases = {
      make_case("head8_group1_f32", typed(head8_group1, gguf_type::f32), float_tolerance),
      make_case("head8_group1_f32_shared", typed(head8_group1, gguf_type::f32, true), float_tolerance),
      make_case("head8_group1_f16", typed(head8_group1, gguf_type::f16), float_tolerance),
      make_case("head8_group1_bf16_shared", typed(head8_group1, gguf_type::bf16, true), float_tolerance),
      make_case("head8_group1_q8_0", typed(head8_group1, gguf_type::q8_0), quantized_tolerance),
      make_case("head8_group1_q4_0_shared", typed(head8_group1, gguf_type::q4_0, true), quantized_tolerance),
      make_case("head16_group4_q4_0", typed(head16_group4, gguf_type::q4_0), quantized_tolerance),
      make_case("head16_group4_f16", typed(head16_group4, gguf_type::f16), float_tolerance),
      make_case("head64_group2_q4_k", typed(head64_group2, gguf_type::q4_k), quantized_tolerance),
      make_case("head64_group2_q6_k_shared", typed(head64_group2, gguf_type::q6_k, true), quantized_tolerance),
      make_case("head64_group2_q4_k_m", q4_k_m, quantized_tolerance),
      make_case("head64_group2_q5_k_m", q5_k_m, quantized_tolerance),
      make_case("head16_group4_q5_0", typed(head16_group4, gguf_type::q5_0), quantized_tolerance),
      make_case("head8_group1_q5_1_shared", typed(head8_group1, gguf_type::q5_1, true), quantized_tolerance),
      make_case("head128_group2_bf16", typed(head128_group2, gguf_type::bf16), float_tolerance),
      make_case("head128_group2_q8_0", typed(head128_group2, gguf_type::q8_0), quantized_tolerance),
      make_case("head128_group4_q8_0_f32_down", f32_down, quantized_tolerance),
      make_case("head128_group4_f32_q8_0_down", q8_0_down, quantized_tolerance),
      // KV elements.
      make_case("head8_group1_f32_kv_f16", typed(head8_group1, gguf_type::f32), kv_f16_tolerance, kv_kind::f16),
      make_case("head64_group2_f16_kv_f16", typed(head64_group2, gguf_type::f16), kv_f16_tolerance, kv_kind::f16),
      make_case("head16_group4_f32_kv_q8_0", typed(head16_group4, gguf_type::f32), kv_q8_0_tolerance, kv_kind::q8_0),
      make_case("head128_group2_q8_0_kv_q8_0", typed(head128_group2, gguf_type::q8_0), kv_q8_0_tolerance, kv_kind::q8_0),
  };
  // Two threads: rows and attention split over the pool.
  forward_case threaded = make_case("head64_group2_q4_0_2_threads", typed(head64_group2, gguf_type::q4_0), quantized_tolerance);
  threaded.threads = 2;
  cases.push_back(threaded);
  forward_case long_run = make_case("head8_group1_q8_0_32_positions", typed(head8_group1, gguf_type::q8_0), quantized_tolerance);
  long_run.positions = 32;
  cases.push_back(long_run);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Synthetic, SyntheticForward, ::testing::ValuesIn(forward_cases()),
                         [](const ::testing::TestParamInfo<forward_case>& info) { return info.param.name; });

// A decode batch equals each session decoded alone bit for bit when every matrix is
// repacked: each GEMM row of a small batch is its GEMV (on AVX-512 VNNI the interleaved
// tiles stream the weights as the GEMV does), at 1 and 2 threads.
void expect_batch_equals_alone(const synthetic_llama& spec) {
  const auto loaded = load_synthetic(spec);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  const std::vector<std::vector<std::int32_t>> prompts{{1, 5, 9}, {1, 40}, {1, 7, 21, 33, 2, 60}};
  for (std::size_t threads : {1u, 2u}) {
    hedge::exec::thread_pool pool(threads);
    const llama_options options{.max_sessions = 3, .context = 32, .max_threads = threads, .max_batch = 3,
                                .repack = llama_repack::all, .parallel_min_bytes = 0};
    auto batched = llama<>::make(loaded->weights, options);
    auto alone = llama<>::make(loaded->weights, options);
    ASSERT_TRUE(batched.ok() && alone.ok());
    std::vector<hedge::kv::kv_seq> in_batch, by_itself;
    std::vector<std::int32_t> next;
    for (const auto& prompt : prompts) {
      in_batch.push_back(*batched->create_session());
      by_itself.push_back(*alone->create_session());
      ASSERT_TRUE(batched->prefill(in_batch.back(), prompt, pool).ok());
      ASSERT_TRUE(alone->prefill(by_itself.back(), prompt, pool).ok());
      next.push_back(prompt.back());
    }
    for (std::size_t step = 0; step < 6; ++step) {
      const auto rows = batched->decode_batch(in_batch, next, pool);
      ASSERT_TRUE(rows.ok()) << rows.error().message();
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        const auto expected = alone->decode(by_itself[i], next[i], pool);
        ASSERT_TRUE(expected.ok());
        const std::vector<float> got(rows->row(i).begin(), rows->row(i).end());
        const std::vector<float> want(expected->begin(), expected->end());
        ASSERT_EQ(got, want) << threads << " threads, step " << step << ", session " << i;
        next[i] = static_cast<std::int32_t>((step * 7 + i * 13 + 3) % spec.vocab);
      }
    }
  }
}

// The Q4_K_M mix (Q4_K, and Q6_K for attn_v, ffn_down and the classifier: whole
// super-blocks, so every K-quant matrix repacked).
TEST(SyntheticBatch, Q4KMDecodeBatchEqualsEachSessionAlone) {
  synthetic_llama spec = typed(head64_group2, gguf_type::q4_k);
  spec.value = spec.down = spec.output = gguf_type::q6_k;
  expect_batch_equals_alone(spec);
}

// Rows of 128 and 160 (not whole super-blocks), as llama.cpp's Q4_K_M falls back for
// Gemma 3 1B: Q5_0, Q5_1 for attn_v and ffn_down, a Q8_0 classifier.
TEST(SyntheticBatch, Q5DecodeBatchEqualsEachSessionAlone) {
  synthetic_llama spec = typed(head16_group4, gguf_type::q5_0);
  spec.value = spec.down = gguf_type::q5_1;
  spec.output = gguf_type::q8_0;
  expect_batch_equals_alone(spec);
}

// ---- Bad input: each a result error with a message that says what is wrong. ----


synthetic_llama small_spec() {
  return {.dim = 64, .hidden_dim = 64, .layers = 1, .heads = 8, .kv_heads = 4, .context = 8, .vocab = 16};
}

/// The error of loading `spec` or of making its model (the first that fails).
hedge::error load_or_make_error(const synthetic_llama& spec) {
  const auto loaded = load_synthetic(spec);
  if (!loaded) return loaded.error();
  const auto model = llama<>::make(loaded->weights);
  if (!model) return model.error();
  ADD_FAILURE() << "the model loads";
  return hedge::error{errc::ok};
}

TEST(SyntheticBadInput, TokensOutsideTheVocabulary) {
  const auto loaded = load_synthetic(small_spec());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  auto model = llama<>::make(loaded->weights);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto seq = *model->create_session();
  expect_error(model->decode(seq, 16).error(), errc::out_of_range, "token 16 outside the vocabulary of 16");
  expect_error(model->decode(seq, -1).error(), errc::out_of_range, "token -1 outside the vocabulary of 16");
  const std::vector<std::int32_t> prompt{1, 5, 16, 3};
  expect_error(model->prefill(seq, prompt).error(), errc::out_of_range, "16, outside the vocabulary of 16");
  EXPECT_EQ(*model->length(seq), 0u);
  EXPECT_TRUE(model->decode(seq, 15).ok());
}

TEST(SyntheticBadInput, PromptLongerThanTheContextAndAFullSession) {
  const auto loaded = load_synthetic(small_spec());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  auto model = llama<>::make(loaded->weights);  // context 8, the file's
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto seq = *model->create_session();
  const auto nine = random_tokens(9, 16, 3);
  expect_error(model->prefill(seq, nine).error(), errc::capacity_exceeded, "does not fit the context of 8");
  EXPECT_EQ(*model->length(seq), 0u);
  // Fill the session: the eighth position's logits, then one token too many.
  const auto full = model->prefill(seq, std::span(nine).first(8));
  ASSERT_TRUE(full.ok()) << full.error().message();
  const std::vector<float> last(full->begin(), full->end());
  const auto over = model->decode(seq, nine[8]);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), errc::capacity_exceeded) << over.error().message();
  EXPECT_EQ(*model->length(seq), 8u);
  const std::vector<std::int32_t> one{nine[8]};
  expect_error(model->prefill(seq, one).error(), errc::capacity_exceeded, "after 8 does not fit the context of 8");
  // Rolled back one position, the session runs the last token again to the same logits.
  ASSERT_TRUE(model->rollback(seq, 7).ok());
  const auto again = model->decode(seq, nine[7]);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_LT(relative_error(*again, last), float_tolerance);
  EXPECT_EQ(*model->length(seq), 8u);
  // Rolled back to the start, it takes a whole prompt again.
  ASSERT_TRUE(model->rollback(seq, 0).ok());
  const auto whole = model->prefill(seq, std::span(nine).first(8));
  ASSERT_TRUE(whole.ok()) << whole.error().message();
  EXPECT_LT(relative_error(*whole, last), float_tolerance);
}

TEST(SyntheticBadInput, HeadSizeAboveTheAttentionKernels) {
  auto spec = small_spec();
  spec.dim = 264;  // one head of 264 > attention_max_head_dim (256)
  spec.heads = 1;
  spec.kv_heads = 1;
  spec.hidden_dim = 32;
  static_assert(hedge::attention::attention_max_head_dim < 264);
  expect_error(load_or_make_error(spec), errc::unsupported, "head dimension 264");
}

TEST(SyntheticBadInput, OddHeadSize) {
  auto spec = small_spec();
  spec.dim = 24;  // 8 heads of 3: RoPE pairs do not fill a head
  expect_error(load_or_make_error(spec), errc::invalid_argument, "rope dimension 3 is not even");
}

TEST(SyntheticBadInput, OddRopeDimensions) {
  auto spec = small_spec();
  spec.rope_dim = 5;
  expect_error(load_or_make_error(spec), errc::invalid_argument, "rope dimension 5 is not even");
}

TEST(SyntheticBadInput, WidthNotAMultipleOfTheHeads) {
  auto spec = small_spec();
  spec.dim = 60;
  expect_error(load_or_make_error(spec), errc::invalid_argument, "dim 60 is not a multiple of the head count 8");
}

TEST(SyntheticBadInput, KvHeadsNotDividingTheHeads) {
  auto spec = small_spec();
  spec.kv_heads = 3;
  expect_error(load_or_make_error(spec), errc::invalid_argument, "head count 8 is not a multiple of the kv head count 3");
}

TEST(SyntheticBadInput, MissingTensor) {
  auto spec = small_spec();
  spec.defects.missing = "blk.0.ffn_up.weight";
  expect_error(load_or_make_error(spec), errc::parse_error, "tensor blk.0.ffn_up.weight is missing");
}

TEST(SyntheticBadInput, TensorOfTheWrongShape) {
  auto spec = small_spec();
  spec.defects.extra_row = "blk.0.attn_k.weight";
  expect_error(load_or_make_error(spec), errc::shape_mismatch,
               "tensor 'blk.0.attn_k.weight' is 64x33 (2 dims), the config needs 64x32");
  spec.defects.extra_row = "output.weight";
  expect_error(load_or_make_error(spec), errc::shape_mismatch,
               "tensor 'output.weight' is 64x17 (2 dims), the config needs 64x16");
}

TEST(SyntheticBadInput, NormThatIsNotF32) {
  auto spec = small_spec();
  spec.defects.f16_norm = "blk.0.ffn_norm.weight";
  const auto e = load_or_make_error(spec);
  EXPECT_NE(e.code(), errc::ok);
  EXPECT_NE(e.message().find("GGUF: blk.0.ffn_norm.weight: "), std::string_view::npos) << e.message();
}

TEST(SyntheticBadInput, WriterRefusesWhatItCannotWrite) {
  auto spec = small_spec();
  spec.heads = 0;
  expect_error(write_synthetic_gguf(spec).error(), errc::invalid_argument, "at least one head");
  spec = small_spec();
  spec.gate_up = gguf_type::q4_k;  // rows of 64: not whole 256-element super-blocks
  expect_error(write_synthetic_gguf(spec).error(), errc::shape_mismatch,
               "blk.0.ffn_gate.weight: rows of 64 are not whole q4_k blocks");
}

TEST(SyntheticBadInput, FormatOutsideTheModelsFormats) {
  auto spec = small_spec();
  spec.all_types(gguf_type::q4_0);
  const auto loaded = load_synthetic(spec);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  const auto model = llama<weight_formats<hedge::quant::q8_0>>::make(loaded->weights);
  ASSERT_FALSE(model.ok());
  expect_error(model.error(), errc::unsupported, "not among the formats this model is built for");
}

}  // namespace
