// Causal prefill attention against the float64 reference (one reference call per
// query token, keys up to and including its own position), every element
// format, every arch variant the build compiles and the CPU runs, GQA groups 1/4/8, head_dim 64/80/128, paged storage,
// a block appended after an existing prefix, a sliding window, soft-cap and ALiBi,
// 1 and 2 threads. Tolerance as decode's (2e-5 relative to max |output|).
#include "hedge/attention/prefill.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "hedge/os/thread_pool.hpp"
#include "reference.hpp"

namespace {

namespace attention = hedge::attention;
namespace kv = hedge::kv;
using kv::kv_config;
using kv::kv_dynamic_shape;
constexpr double prefill_tolerance = 2e-5;

template <class Elem>
class PrefillAttention : public ::testing::Test {};
TYPED_TEST_SUITE(PrefillAttention, hedge::test::kv_elements);

// The reference for a block of `tokens` queries ending the view: one reference call per
// query token, keys up to and including its own position.
template <class Elem>
std::vector<double> prefill_reference(const kv::kv_sequence_view<Elem>& view, std::size_t layer, std::size_t tokens,
                                      const std::vector<float>& q, const attention::attention_params& p) {
  const std::size_t dim = view.head_dim(), q_heads = q.size() / (tokens * dim);
  std::vector<double> want(q.size());
  for (std::size_t i = 0; i < tokens; ++i) {
    const std::uint64_t pos = view.end() - tokens + i;
    const auto row_q = std::span(q).subspan(i * q_heads * dim, q_heads * dim);
    const auto row = hedge::test::reference_attention(view, layer, row_q, p,
                                                      attention::prefill_first_key(pos, view.window()), pos + 1, pos);
    std::copy(row.begin(), row.end(), want.begin() + static_cast<std::ptrdiff_t>(i * q_heads * dim));
  }
  return want;
}

// Prefill with every arch variant this build compiles and this CPU runs, against `want`
// (prefill_reference of the same view, block, queries and parameters).
template <class Elem, class Exec>
void check_prefill(const kv::kv_sequence_view<Elem>& view, std::size_t layer, std::size_t tokens,
                   const std::vector<float>& q, const attention::attention_params& p, const std::vector<double>& want,
                   Exec& exec, const char* what) {
  const std::size_t dim = view.head_dim(), q_heads = q.size() / (tokens * dim);
  std::vector<float> out(q.size());
  std::vector<float> workspace(
      attention::prefill_workspace_floats(q_heads, view.kv_heads(), dim, exec.concurrency()));
  hedge::test::for_each_supported_arch([&](auto arch) {
    using A = decltype(arch);
    std::fill(out.begin(), out.end(), 0.f);
    auto r = attention::prefill_attention<A>(view, layer, tokens, q, out, p, workspace, exec);
    ASSERT_TRUE(r) << r.error().c_str();
    EXPECT_LE(hedge::test::relative_error(out, want), prefill_tolerance) << A::name << " " << Elem::name << " " << what;
  });
}

TYPED_TEST(PrefillAttention, MatchesFloat64Reference) {
  using Elem = TypeParam;
  std::mt19937 rng(17);
  hedge::exec::serial serial;
  hedge::exec::thread_pool pool(2);
  for (std::size_t dim : {64, 80, 128}) {
    for (std::size_t group : {1, 4, 8}) {
      const std::size_t kv_heads = 2, q_heads = kv_heads * group;
      auto cache =
          kv::kv_cache<kv_dynamic_shape, Elem>::make({1, kv_heads, dim}, kv_config{2, 400, 16, 0, 0});
      ASSERT_TRUE(cache);
      auto seq = *cache->create();
      auto other = *cache->create();
      // A 37-token prompt, then a 100-token block after it, pages interleaved with another sequence.
      for (std::size_t tokens : {37, 100}) {
        for (std::size_t t = 0; t < tokens; t += 16) {
          hedge::test::append_random(*cache, seq, std::min<std::size_t>(16, tokens - t), rng);
          hedge::test::append_random(*cache, other, 3, rng);
        }
        const auto q = hedge::test::random_floats(tokens * q_heads * dim, rng);
        char what[64];
        std::snprintf(what, sizeof what, "dim %zu group %zu tokens %zu", dim, group, tokens);
        const attention::attention_params p{1.f / std::sqrt(static_cast<float>(dim))};
        const auto want = prefill_reference(*cache->view(seq), 0, tokens, q, p);
        check_prefill(*cache->view(seq), 0, tokens, q, p, want, serial, what);
        check_prefill(*cache->view(seq), 0, tokens, q, p, want, pool, what);
      }
    }
  }
}

TYPED_TEST(PrefillAttention, SlidingWindowSoftcapAlibi) {
  using Elem = TypeParam;
  std::mt19937 rng(23);
  hedge::exec::serial serial;
  const auto filled = hedge::test::make_filled_sequence<Elem>({1, 1, 64}, kv_config{1, 256, 16, 0, 50}, 300, rng);
  const std::size_t tokens = 120;  // needs keys from 300 - 120 - 49 = 131 on: still in the 256-token ring
  const auto q = hedge::test::random_floats(tokens * 4 * 64, rng, 2.f);
  const std::vector<float> slopes{0.5f, 0.25f, 0.125f, 0.0625f};
  for (const auto& [p, what] : {std::pair<attention::attention_params, const char*>{{0.125f}, "window"},
                                {{0.125f, 4.f}, "window softcap"},
                                {{0.125f, 0.f, slopes}, "window alibi"}}) {
    check_prefill(filled.view(), 0, tokens, q, p, prefill_reference(filled.view(), 0, tokens, q, p), serial, what);
  }
  // A block reaching back past the ring is an error, not garbage.
  std::vector<float> big(250 * 4 * 64), out(big.size()), workspace(attention::prefill_workspace_floats(4, 1, 64, 1));
  EXPECT_EQ(attention::prefill_attention(filled.view(), 0, 250, big, out, {0.125f}, workspace).error().code(),
            hedge::errc::out_of_range);
}

// arch::best, the default, gives the output of the tag it resolves to, bit for bit.
TEST(PrefillAttentionDispatch, BestEqualsItsTagBitForBit) {
  std::mt19937 rng(29);
  hedge::exec::thread_pool pool(2);
  const auto filled = hedge::test::make_filled_sequence<kv::kv_q8_0>({1, 2, 64}, kv_config{1, 300, 16, 0, 0}, 200, rng);
  const std::size_t tokens = 90;
  const auto q = hedge::test::random_floats(tokens * 8 * 64, rng);
  std::vector<float> by_best(q.size()), by_tag(q.size());
  std::vector<float> workspace(attention::prefill_workspace_floats(8, 2, 64, pool.concurrency()));
  ASSERT_TRUE(attention::prefill_attention(filled.view(), 0, tokens, q, by_best, {0.125f}, workspace, pool));
  hedge::arch::visit<hedge::arch::best>([&](auto tag) {
    ASSERT_TRUE(
        attention::prefill_attention<decltype(tag)>(filled.view(), 0, tokens, q, by_tag, {0.125f}, workspace, pool));
  });
  EXPECT_EQ(std::memcmp(by_best.data(), by_tag.data(), q.size() * sizeof(float)), 0);
}

}  // namespace
