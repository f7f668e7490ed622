// Decode attention against a float64 materialised-softmax reference: every
// element format, contiguous and paged (non-contiguous pages) storage, head_dim
// 40/64/80/96/128/256, GQA groups 1/2/3/4/6/8, contexts 1..8192, 1 to 3 threads, after truncate and fork, with
// soft-cap, ALiBi and a sliding window; split invariance; no heap on the decode path.
//
// Tolerance: error relative to max |output| <= 2e-5 for every element format (K/V
// are decoded with the format's own decode in the reference, so quantization
// error is not attention error). What remains is float32 rounding of q.k (a few
// ulp of |q||k|), of the exp polynomial (< 2 ulp) and of accumulating up to 8192
// weighted values, which grows like sqrt(context) x 6e-8; measured maxima are
// below 3e-6.
//
// The AVX2, AVX-512 and NEON kernels round the query to Q8_0 for q8_0/q4_0 keys (integer
// q.k, as llama.cpp's vec_dot for quantized K does), and the AVX-512 kernel rounds it to
// bf16 for bf16 keys where the CPU has AVX512_BF16 (vdpbf16ps, as ggml's flash attention
// for bf16 K): they are held to the same 2e-5 against the reference on the
// rounded query, and against the reference on the original query to the bound
// the rounding implies (query_rounding_bound: (e^(2E) - 1) max|v| / max|out|, E
// the largest logit change), measured at 2e-3..5e-3 of max |output| here (Q8_0).
#include "hedge/attention/decode.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "hedge/os/thread_pool.hpp"
#include "reference.hpp"
#include "support/alloc_counter.hpp"

namespace {

namespace attention = hedge::attention;
namespace kv = hedge::kv;
using kv::kv_config;
using kv::kv_dynamic_shape;
constexpr double decode_tolerance = 2e-5;

template <class Elem>
class DecodeAttention : public ::testing::Test {};
TYPED_TEST_SUITE(DecodeAttention, hedge::test::kv_elements);

// Runs decode with every arch variant this build compiles and this CPU supports (arch::compiled)
// and checks each against the reference.
template <class Elem, hedge::Executor E = hedge::exec::serial>
void check_against_reference(const kv::kv_sequence_view<Elem>& view, std::size_t layer,
                             const std::vector<float>& q, const attention::attention_params& p, std::size_t splits,
                             const char* what, E&& executor = E{}) {
  const auto want = hedge::test::reference_attention(view, layer, q, p, view.begin(), view.end(), view.end() - 1);
  // What the SIMD kernels compute for block-quantized keys: attention of the Q8_0-rounded
  // query; for bf16 keys, the AVX-512 kernel on an AVX512_BF16 CPU: of the bf16-rounded one.
  constexpr bool q8_0_query = std::is_same_v<Elem, kv::kv_q8_0> || std::is_same_v<Elem, kv::kv_q4_0>;
  constexpr bool bf16_keys = std::is_same_v<Elem, kv::kv_bf16>;
  const bool rounds_query =
      q8_0_query || (bf16_keys && hedge::test::dots_bf16_keys_in_bf16<hedge::arch::avx512vnni>(view.head_dim()));
  const auto rounded = q8_0_query  ? hedge::test::q8_0_rounded(q, view.head_dim())
                       : bf16_keys ? hedge::test::bf16_rounded(q)
                                   : q;
  const auto want_rounded =
      rounds_query ? hedge::test::reference_attention(view, layer, rounded, p, view.begin(), view.end(), view.end() - 1)
                   : want;
  const double rounding_bound =
      rounds_query ? hedge::test::query_rounding_bound(view, layer, q, rounded, p, want) : 0.0;
  std::vector<float> out(q.size());
  const std::size_t most_splits = splits != 0 ? splits : 64;  // 0: decode_splits chooses, at most 64 here
  std::vector<float> workspace(
      attention::decode_workspace_floats(q.size() / view.head_dim(), view.head_dim(), most_splits));
  hedge::test::for_each_supported_arch([&](auto arch) {
    using A = decltype(arch);
    const bool rounded_query = q8_0_query ? !std::is_same_v<A, hedge::arch::scalar>
                                          : bf16_keys && hedge::test::dots_bf16_keys_in_bf16<A>(view.head_dim());
    auto r = attention::decode_attention<A>(view, layer, q, out, p, workspace, executor, splits);
    ASSERT_TRUE(r) << r.error().c_str();
    EXPECT_LE(hedge::test::relative_error(out, rounded_query ? want_rounded : want), decode_tolerance)
        << A::name << " " << Elem::name << " " << what << " splits " << splits;
    if (rounded_query) {
      EXPECT_LE(hedge::test::relative_error(out, want), rounding_bound + decode_tolerance)
          << A::name << " " << Elem::name << " " << what << " against the unrounded query";
    }
  });
}

TYPED_TEST(DecodeAttention, MatchesFloat64ReferenceOverShapesAndLayouts) {
  using Elem = TypeParam;
  std::mt19937 rng(42);
  for (std::size_t dim : {64, 80, 128}) {
    for (std::size_t group : {1, 4, 8}) {
      for (std::size_t page_tokens : {0, 16}) {
        const std::size_t kv_heads = 2, max_tokens = 1100;
        auto cache = kv::kv_cache<kv_dynamic_shape, Elem>::make({2, kv_heads, dim},
                                                                   kv_config{2, max_tokens, page_tokens, 0, 0});
        ASSERT_TRUE(cache);
        auto seq = *cache->create();
        auto other = *cache->create();
        std::size_t length = 0;
        for (std::size_t context : {1, 5, 33, 257, 1000}) {
          // Interleave another sequence so a paged sequence's pages are not contiguous.
          hedge::test::append_random(*cache, seq, context - length, rng);
          if (page_tokens != 0) hedge::test::append_random(*cache, other, 1, rng);
          length = context;
          const auto q = hedge::test::random_floats(kv_heads * group * dim, rng);
          const attention::attention_params p{1.f / std::sqrt(static_cast<float>(dim))};
          char what[96];
          std::snprintf(what, sizeof what, "dim %zu group %zu page %zu context %zu", dim, group, page_tokens, context);
          check_against_reference(*cache->view(seq), 1, q, p, context > 256 ? 3 : 1, what);
        }
      }
    }
  }
}

// The SIMD kernels handle up to 4 query heads per pass (groups of 2, 3 and 6 take the 2-
// and 3-head passes), 16-float chunks (AVX-512) with an AVX2 fallback for float KV whose
// head_dim is no multiple of 16 (40), partly filled 32-value blocks (40, 96), the widest
// head (256), tiles of 64 positions (contexts 63, 64, 65 and 700), and splits claimed by
// 2 or 3 threads (0: decode_splits' choice at that thread count).
TYPED_TEST(DecodeAttention, OddGroupsHeadDimsAndThreads) {
  using Elem = TypeParam;
  std::mt19937 rng(17);
  for (std::size_t dim : {40, 96, 256}) {
    for (std::size_t group : {2, 3, 6}) {
      const std::size_t kv_heads = 2;
      auto cache = kv::kv_cache<kv_dynamic_shape, Elem>::make({1, kv_heads, dim}, kv_config{1, 700, 0, 0, 0});
      ASSERT_TRUE(cache);
      auto seq = *cache->create();
      std::size_t length = 0;
      for (std::size_t context : {63, 64, 65, 700}) {
        hedge::test::append_random(*cache, seq, context - length, rng);
        length = context;
        const auto q = hedge::test::random_floats(kv_heads * group * dim, rng);
        const attention::attention_params p{1.f / std::sqrt(static_cast<float>(dim))};
        // Automatic splits on 2 threads, 5 splits on 3 (a part per thread and more).
        for (const auto& [threads, splits] : {std::pair<std::size_t, std::size_t>{2, 0}, {3, 5}}) {
          char what[112];
          std::snprintf(what, sizeof what, "dim %zu group %zu context %zu threads %zu", dim, group, context, threads);
          check_against_reference(*cache->view(seq), 0, q, p, splits, what, hedge::exec::thread_pool(threads));
        }
      }
    }
  }
}

TYPED_TEST(DecodeAttention, LongContext8192Paged) {
  using Elem = TypeParam;
  std::mt19937 rng(7);
  const auto filled = hedge::test::make_filled_sequence<Elem>({1, 2, 128}, kv_config{1, 8192, 32, 0, 0}, 8192, rng);
  const auto q = hedge::test::random_floats(8 * 128, rng);
  check_against_reference(filled.view(), 0, q, {1.f / std::sqrt(128.f)}, 2, "context 8192");
}

TYPED_TEST(DecodeAttention, AfterTruncateAndFork) {
  using Elem = TypeParam;
  std::mt19937 rng(3);
  auto cache = kv::kv_cache<kv_dynamic_shape, Elem>::make({1, 2, 64}, kv_config{3, 600, 16, 0, 0});
  ASSERT_TRUE(cache);
  auto parent = *cache->create();
  hedge::test::append_random(*cache, parent, 300, rng);
  auto child = *cache->fork(parent);
  hedge::test::append_random(*cache, child, 45, rng);  // diverges inside a shared page
  ASSERT_TRUE(cache->truncate(parent, 250));           // a rejected draft
  hedge::test::append_random(*cache, parent, 20, rng);
  ASSERT_TRUE(cache->truncate(child, 310));
  const auto q = hedge::test::random_floats(4 * 64, rng);
  check_against_reference(*cache->view(parent), 0, q, {0.125f}, 2, "parent");
  check_against_reference(*cache->view(child), 0, q, {0.125f}, 2, "child");
}

TYPED_TEST(DecodeAttention, SoftcapAlibiAndSlidingWindow) {
  using Elem = TypeParam;
  std::mt19937 rng(11);
  // 517 positions wrap the 160-token ring three times.
  const auto filled = hedge::test::make_filled_sequence<Elem>({1, 2, 64}, kv_config{1, 160, 16, 0, 100}, 517, rng);
  const auto view = filled.view();
  ASSERT_EQ(view.begin(), 417u);
  const auto q = hedge::test::random_floats(8 * 64, rng, 3.f);
  const std::vector<float> slopes{0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f};
  check_against_reference(view, 0, q, {0.125f}, 1, "window");
  check_against_reference(view, 0, q, {0.125f, 5.f}, 3, "softcap 5");
  check_against_reference(view, 0, q, {0.125f, 0.f, slopes}, 2, "alibi");
}

TYPED_TEST(DecodeAttention, AnySplitCountGivesTheSameOutput) {
  using Elem = TypeParam;
  std::mt19937 rng(5);
  const auto filled = hedge::test::make_filled_sequence<Elem>({1, 1, 128}, kv_config{1, 3000, 16, 0, 0}, 2999, rng);
  const auto view = filled.view();
  const auto q = hedge::test::random_floats(4 * 128, rng);
  std::vector<float> one(q.size()), split(q.size()), workspace(attention::decode_workspace_floats(4, 128, 64));
  hedge::exec::thread_pool pool(2);
  ASSERT_TRUE(attention::decode_attention(view, 0, q, one, {0.1f}, workspace, 1));
  for (std::size_t splits : {2, 3, 7, 64}) {
    ASSERT_TRUE(attention::decode_attention(view, 0, q, split, {0.1f}, workspace, pool, splits));
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      err = std::max(err, static_cast<double>(std::fabs(one[i] - split[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(one[i])));
    }
    EXPECT_LE(err / scale, 1e-5) << "splits " << splits;
  }
}

// Full-scale Q8_0 keys and query (every |value| rounds to 127): the integer q.k
// sums pairs of 127 x 127 products in int16 lanes (vpmaddubsw), 32258 < 32767, so
// nothing saturates; logits reach +-22 (scale 0.088), where the softmax is peaked.
TEST(DecodeAttentionIntegerLogits, FullScaleQ8_0KeysDoNotSaturate) {
  auto cache = kv::kv_cache<kv_dynamic_shape, kv::kv_q8_0>::make({1, 1, 128}, kv_config{1, 64, 0, 0, 0});
  ASSERT_TRUE(cache);
  auto seq = *cache->create();
  std::mt19937 rng(13);
  std::vector<float> q(4 * 128);
  for (std::size_t j = 0; j < q.size(); ++j) q[j] = (j * 7 % 5) < 2 ? 1.f : -1.f;
  for (std::size_t pos = 0; pos < 40; ++pos) {
    ASSERT_TRUE(cache->extend(seq, 1));
    std::vector<float> k(128);
    // Keys agree with query head 0 in a growing number of blocks, so the logits differ.
    for (std::size_t j = 0; j < 128; ++j) k[j] = 2.f * q[j] * (j / 32 < pos % 5 ? 1.f : -1.f);
    ASSERT_TRUE(cache->write(seq, 0, pos, k, hedge::test::random_floats(128, rng)));
  }
  check_against_reference(*cache->view(seq), 0, q, {0.0883883f}, 1, "full scale");
}

// arch::best, the default, runs the first tag of arch::compiled this CPU supports, chosen
// at run time where the build's -march does not cover it (a baseline x86-64 build): on an
// AVX2 CPU the AVX2 kernel or a tag derived from it, with that tag's output bit for bit.
template <class Elem>
void check_best_equals_its_tag() {
  std::mt19937 rng(19);
  const auto filled = hedge::test::make_filled_sequence<Elem>({1, 2, 128}, kv_config{1, 600, 16, 0, 0}, 555, rng);
  const auto q = hedge::test::random_floats(8 * 128, rng);
  std::vector<float> by_best(q.size()), by_tag(q.size()), workspace(attention::decode_workspace_floats(8, 128, 3));
  ASSERT_TRUE(attention::decode_attention(filled.view(), 0, q, by_best, {0.088f}, workspace, 3));
  hedge::arch::visit<hedge::arch::best>([&](auto tag) {
    ASSERT_TRUE(attention::decode_attention<decltype(tag)>(filled.view(), 0, q, by_tag, {0.088f}, workspace, 3));
  });
  EXPECT_EQ(std::memcmp(by_best.data(), by_tag.data(), q.size() * sizeof(float)), 0) << Elem::name;
}

TEST(DecodeAttentionDispatch, BestRunsTheBestSupportedVariant) {
  // The first supported tag of arch::compiled, or the build's native tag derived from it.
  bool checked = false;
  hedge::test::for_each_supported_arch([&](auto first) {
    if (checked) return;
    checked = true;
    EXPECT_TRUE(hedge::arch::visit<hedge::arch::best>(
        [](auto tag) { return std::is_base_of_v<decltype(first), decltype(tag)>; }))
        << "arch::best runs " << hedge::test::best_arch_name() << ", not " << decltype(first)::name;
  });
#if HEDGE_SIMD_X86
  if (hedge::arch::avx2::supported()) {
    EXPECT_TRUE(hedge::arch::visit<hedge::arch::best>(
        [](auto tag) { return std::is_base_of_v<hedge::arch::avx2, decltype(tag)>; }))
        << "arch::best runs " << hedge::test::best_arch_name() << " on an AVX2 CPU";
  }
#endif
  check_best_equals_its_tag<kv::kv_f16>();
  check_best_equals_its_tag<kv::kv_bf16>();
  check_best_equals_its_tag<kv::kv_q8_0>();
}

TEST(DecodeAttentionLayouts, PagedAndContiguousGiveTheSameOutput) {
  std::mt19937 rng_a(9), rng_b(9);
  auto contiguous = kv::kv_cache<kv_dynamic_shape, kv::kv_f16>::make({1, 8, 128}, kv_config{1, 1000, 0, 0, 0});
  auto paged = kv::kv_cache<kv_dynamic_shape, kv::kv_f16>::make({1, 8, 128}, kv_config{1, 1000, 16, 0, 0});
  ASSERT_TRUE(contiguous && paged);
  auto a = *contiguous->create();
  auto b = *paged->create();
  hedge::test::append_random(*contiguous, a, 999, rng_a);
  hedge::test::append_random(*paged, b, 999, rng_b);
  const auto q = hedge::test::random_floats(32 * 128, rng_a);
  std::vector<float> out_a(q.size()), out_b(q.size()), workspace(attention::decode_workspace_floats(32, 128, 1));
  ASSERT_TRUE(attention::decode_attention(*contiguous->view(a), 0, q, out_a, {0.088f}, workspace));
  ASSERT_TRUE(attention::decode_attention(*paged->view(b), 0, q, out_b, {0.088f}, workspace));
  for (std::size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(out_a[i], out_b[i], 1e-6) << i;
}

TEST(DecodeAttentionErrors, ShapeWorkspaceLayerAndHeadDim) {
  std::mt19937 rng(1);
  const auto filled =
      hedge::test::make_filled_sequence<kv::kv_f32>({1, 2, 64}, kv_config{1, 16, 0, 0, 0}, 4, rng);
  const auto view = filled.view();
  std::vector<float> q(3 * 64), out(3 * 64), workspace(1000);
  EXPECT_EQ(attention::decode_attention(view, 0, q, out, {}, workspace).error().code(), hedge::errc::shape_mismatch);
  q.resize(4 * 64);
  EXPECT_EQ(attention::decode_attention(view, 0, q, out, {}, workspace).error().code(), hedge::errc::shape_mismatch);
  out.resize(4 * 64);
  EXPECT_EQ(attention::decode_attention(view, 1, q, out, {}, workspace).error().code(), hedge::errc::out_of_range);
  workspace.resize(10);
  EXPECT_EQ(attention::decode_attention(view, 0, q, out, {}, workspace).error().code(), hedge::errc::capacity_exceeded);
}

// The decode step (extend, write K/V, attend) allocates nothing once the cache,
// the workspace and the thread pool exist.
TEST(DecodeAttentionHeap, DecodeStepAllocatesNothing) {
  auto cache = kv::kv_cache<kv_dynamic_shape, kv::kv_q8_0>::make({2, 2, 64}, kv_config{1, 512, 16, 0, 0});
  ASSERT_TRUE(cache);
  auto seq = *cache->create();
  std::mt19937 rng(2);
  hedge::test::append_random(*cache, seq, 300, rng);
  const auto k = hedge::test::random_floats(128, rng), q = hedge::test::random_floats(8 * 64, rng);
  std::vector<float> out(q.size()), workspace(attention::decode_workspace_floats(8, 64, 8));
  hedge::exec::thread_pool pool(2);
  hedge::test::alloc_scope scope;
  for (int step = 0; step < 20; ++step) {
    const auto pos = cache->extend(seq, 1);
    ASSERT_TRUE(pos);
    for (std::size_t layer = 0; layer < 2; ++layer) {
      ASSERT_TRUE(cache->write(seq, layer, *pos, k, k));
      const auto view = cache->view(seq);
      ASSERT_TRUE(attention::decode_attention(*view, layer, q, out, {0.125f}, workspace, pool, 4));
      ASSERT_TRUE(attention::decode_attention<hedge::arch::scalar>(*view, layer, q, out, {0.125f}, workspace));
    }
  }
  EXPECT_EQ(scope.count(), 0u);
}

}  // namespace
