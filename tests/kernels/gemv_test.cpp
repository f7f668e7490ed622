// gemv: every (format, arch) variant this CPU runs, against the scalar
// reference (same activation bytes) and a float64 Eigen reference; shapes with
// row counts off the 4-row tile, K off 256 where the format allows, strided
// and unaligned views; thread-count invariance; errors; no heap.
//
// Tolerances. vs scalar: both sum the same exact integer block products, only
// the order and grouping of float additions differ, so the gap is a few
// float32 roundings of the running sum: 1e-5 * sum|w_k x_k| (+1e-6). vs
// float64: the kernel multiplies the exact dequantized weights by the
// activation after rounding it to the activation format (Q8_0/Q8_K), so
// |y - W x| <= sum_k |w_k| * bound_k (bound_k: half a quantization step, see
// matmul_support.hpp) plus the same float32 rounding term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hedge/os/thread_pool.hpp"
#include "hedge/kernels/gemm.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/repack.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q5_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "kernels/matmul_support.hpp"
#include "support/alloc_counter.hpp"

namespace {

namespace q = hedge::quant;
namespace k = hedge::kernels;
using hedge::test::variant;

template <class V>
class Gemv : public ::testing::Test {
 protected:
  using W = typename V::format;
  using A = typename V::arch;
  void SetUp() override {
    if (!A::supported()) GTEST_SKIP() << "this CPU cannot run " << A::name;
  }

  /// Runs gemv on a rows x kk matrix and checks both references.
  void check(std::size_t rows, std::size_t kk, std::size_t extra_stride, std::size_t offset, unsigned seed) {
    if constexpr (hedge::test::may_run<A>) {
      hedge::test::quantized_matrix<W> m(rows, kk, seed, extra_stride, offset);
      const auto x = hedge::test::random_floats(kk, seed + 1000, 0.5f);
      std::vector<std::byte> workspace(k::gemv_workspace_bytes<W>(kk) + 1);
      std::vector<float> y(rows, -1.f), y_ref(rows, -2.f);
      ASSERT_TRUE((k::gemv<W, A>(m.view(), {x.data(), kk}, {y.data(), rows}, workspace)));
      ASSERT_TRUE((k::gemv<W, hedge::arch::scalar>(m.view(), {x.data(), kk}, {y_ref.data(), rows}, workspace)));

      const hedge::test::activation_error<W> act(x);
      Eigen::Map<const Eigen::VectorXd> seen(act.seen.data(), static_cast<Eigen::Index>(kk));
      const Eigen::VectorXd exact = m.values * seen;  // float64 product with the activation as quantized
      for (std::size_t r = 0; r < rows; ++r) {
        double magnitude = 0, activation_bound = 0;
        for (std::size_t c = 0; c < kk; ++c) {
          const double w = std::fabs(m.values(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)));
          magnitude += w * std::fabs(act.seen[c]);
          activation_bound += w * act.bound[c];
        }
        const double rounding = 1e-5 * magnitude + 1e-6;
        EXPECT_NEAR(y[r], y_ref[r], rounding) << "row " << r << " of " << rows << "x" << kk;
        EXPECT_NEAR(y[r], exact(static_cast<Eigen::Index>(r)), rounding) << "row " << r;
        // Against the original float activation (Eigen, float64).
        double with_float_x = 0;
        for (std::size_t c = 0; c < kk; ++c) {
          with_float_x += m.values(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) * double(x[c]);
        }
        EXPECT_NEAR(y[r], with_float_x, rounding + activation_bound) << "row " << r;
      }
    }
  }
};

using GemvVariants = ::testing::Types<
    variant<q::q8_0, hedge::arch::scalar>, variant<q::q4_0, hedge::arch::scalar>,
    variant<q::q4_k, hedge::arch::scalar>, variant<q::q6_k, hedge::arch::scalar>,
    variant<q::f32, hedge::arch::scalar>, variant<q::f16, hedge::arch::scalar>, variant<q::bf16, hedge::arch::scalar>,
    variant<q::q8_0, hedge::arch::avx2>, variant<q::q4_0, hedge::arch::avx2>, variant<q::q4_k, hedge::arch::avx2>,
    variant<q::q6_k, hedge::arch::avx2>, variant<q::f32, hedge::arch::avx2>, variant<q::f16, hedge::arch::avx2>,
    variant<q::bf16, hedge::arch::avx2>, variant<q::q8_0, hedge::arch::neon>, variant<q::q4_0, hedge::arch::neon>,
    variant<q::q4_k, hedge::arch::neon>, variant<q::q6_k, hedge::arch::neon>, variant<q::f32, hedge::arch::neon>,
    variant<q::f16, hedge::arch::neon>, variant<q::bf16, hedge::arch::neon>,
    variant<q::q8_0, hedge::arch::neon_dotprod>, variant<q::q4_0, hedge::arch::neon_dotprod>,
    variant<q::q4_k, hedge::arch::neon_dotprod>, variant<q::q6_k, hedge::arch::neon_dotprod>,
    variant<q::q4_0, hedge::arch::best>, variant<q::q6_k, hedge::arch::best>,
    variant<q::q5_0, hedge::arch::scalar>, variant<q::q5_1, hedge::arch::scalar>, variant<q::q5_k, hedge::arch::scalar>,
    variant<q::q5_0, hedge::arch::avx2>, variant<q::q5_1, hedge::arch::avx2>, variant<q::q5_k, hedge::arch::avx2>,
    variant<q::q5_0, hedge::arch::avx512vnni>, variant<q::q5_1, hedge::arch::avx512vnni>,
    variant<q::q5_k, hedge::arch::avx512vnni>, variant<q::q5_0, hedge::arch::neon>, variant<q::q5_1, hedge::arch::neon>,
    variant<q::q5_k, hedge::arch::neon>, variant<q::q5_0, hedge::arch::neon_dotprod>,
    variant<q::q5_1, hedge::arch::neon_dotprod>, variant<q::q5_k, hedge::arch::neon_dotprod>>;
TYPED_TEST_SUITE(Gemv, GemvVariants);

/// K values to test: multiples of the block, including ones that are not
/// multiples of 256 (or of 8 for float formats) where the format allows.
template <class W>
std::vector<std::size_t> k_values() {
  if constexpr (W::block_elements == 256) return {256, 512, 1280};
  if constexpr (W::block_elements == 32) return {32, 96, 160, 544, 1024};
  return {1, 7, 8, 33, 100, 515};
}

TYPED_TEST(Gemv, MatchesReferencesOverShapes) {
  unsigned seed = 1;
  for (std::size_t kk : k_values<typename TestFixture::W>()) {
    for (std::size_t rows : {1u, 3u, 4u, 5u, 17u}) {
      this->check(rows, kk, 0, 0, seed++);
      if (this->HasFatalFailure()) return;
    }
  }
}

TYPED_TEST(Gemv, StridedAndUnalignedViews) {
  // Rows padded by 3 blocks, the view starting 1 block (not 64 bytes) in.
  this->check(9, k_values<typename TestFixture::W>().back(), 3, 1, 77);
}

TYPED_TEST(Gemv, SameResultForAnyThreadCount) {
  using W = typename TestFixture::W;
  using A = typename TestFixture::A;
  if constexpr (hedge::test::may_run<A>) {
    const std::size_t rows = 37, kk = k_values<W>().back();
    hedge::test::quantized_matrix<W> m(rows, kk, 5);
    const auto x = hedge::test::random_floats(kk, 6);
    std::vector<std::byte> workspace(k::gemv_workspace_bytes<W>(kk));
    std::vector<float> serial(rows), pooled(rows);
    ASSERT_TRUE((k::gemv<W, A>(m.view(), {x.data(), kk}, {serial.data(), rows}, workspace)));
    for (std::size_t threads : {2u, 3u}) {
      hedge::exec::thread_pool pool(threads);
      ASSERT_TRUE((k::gemv<W, A>(m.view(), {x.data(), kk}, {pooled.data(), rows}, workspace, pool)));
      for (std::size_t r = 0; r < rows; ++r) EXPECT_EQ(serial[r], pooled[r]) << "row " << r << ", " << threads << " threads";
    }
  }
}

TEST(GemvErrors, ShapesWorkspaceAndInputAreChecked) {
  hedge::test::quantized_matrix<q::q4_0> m(4, 64, 1);
  std::vector<float> x(64, 1.f), y(4);
  std::vector<std::byte> workspace(k::gemv_workspace_bytes<q::q4_0>(64) + 2);
  EXPECT_EQ((k::gemv<q::q4_0>(m.view(), {x.data(), 32}, {y.data(), 4}, workspace)).error().code(),
            hedge::errc::shape_mismatch);
  EXPECT_EQ((k::gemv<q::q4_0>(m.view(), {x.data(), 64}, {y.data(), 3}, workspace)).error().code(),
            hedge::errc::shape_mismatch);
  EXPECT_EQ((k::gemv<q::q4_0>(m.view(), {x.data(), 64}, {y.data(), 4}, {workspace.data(), 10})).error().code(),
            hedge::errc::capacity_exceeded);
  EXPECT_EQ((k::gemv<q::q4_0>(m.view(), {x.data(), 64}, {y.data(), 4}, {workspace.data() + 1, k::gemv_workspace_bytes<q::q4_0>(64)})).error().code(),
            hedge::errc::misaligned);
  x[5] = std::nanf("");
  EXPECT_EQ((k::gemv<q::q4_0>(m.view(), {x.data(), 64}, {y.data(), 4}, workspace)).error().code(),
            hedge::errc::invalid_argument);
}

TEST(GemvWorkspace, SizesAreConstexpr) {
  static_assert(k::gemv_workspace_bytes<q::q4_0>(4096) == 128 * 34 + 128 * 8);  // blocks + offsets + scales
  static_assert(k::gemv_workspace_bytes<q::q4_k>(4096) == 16 * 292);
  static_assert(k::gemv_workspace_bytes<q::q6_k>(4096) == 16 * 292);
  static_assert(k::gemv_workspace_bytes<q::f16>(4096) == 0);
  SUCCEED();
}

TEST(GemvNoHeap, StaticWorkspaceAndSerialExecutorAllocateNothing) {
  constexpr std::size_t kk = 512, rows = 8;
  hedge::test::quantized_matrix<q::q4_k> m(rows, kk, 3);
  const auto x = hedge::test::random_floats(kk, 4);
  static k::gemv_workspace<q::q4_k, kk> workspace;
  float y[rows];
  hedge::test::alloc_scope scope;
  ASSERT_TRUE((k::gemv<q::q4_k>(m.view(), {x.data(), kk}, {y, rows}, workspace.span())));
  EXPECT_EQ(scope.count(), 0u);
}

}  // namespace

namespace {

// arch::best runs exactly the variant it resolves to: the same bits as calling that tag.
template <class W>
void expect_best_is_resolved_variant() {
  constexpr std::size_t rows = 13, kk = 512;
  hedge::test::quantized_matrix<W> m(rows, kk, 8);
  const auto x = hedge::test::random_floats(kk, 9);
  std::vector<std::byte> workspace(k::gemv_workspace_bytes<W>(kk));
  std::vector<float> best(rows), direct(rows);
  ASSERT_TRUE((k::gemv<W, hedge::arch::best>(m.view(), {x.data(), kk}, {best.data(), rows}, workspace)));
  const auto status = hedge::arch::visit<hedge::arch::best>([&](auto tag) {
    return k::gemv<W, decltype(tag)>(m.view(), {x.data(), kk}, {direct.data(), rows}, workspace);
  });
  ASSERT_TRUE(status);
  for (std::size_t r = 0; r < rows; ++r) EXPECT_EQ(best[r], direct[r]) << W::name << " row " << r;
}

TEST(GemvDispatch, BestRunsTheVariantItResolvesTo) {
  expect_best_is_resolved_variant<q::q4_0>();
  expect_best_is_resolved_variant<q::q8_0>();
  expect_best_is_resolved_variant<q::q4_k>();
  expect_best_is_resolved_variant<q::q6_k>();
  expect_best_is_resolved_variant<q::f16>();
}

}  // namespace

namespace {

// Blocks of arbitrary bytes (with finite fp16 scales): for Q6_K every level 0..63 and
// int8 scale -128..127, for Q5_0/Q5_1/Q5_K every fifth-bit pattern, level 0..31 and (Q5_K)
// 6-bit scale and min 0..63 (the reference quantizers never store some of them, other
// quantizers may), so each SIMD kernel's int16 and int32 intermediates are checked at their
// extremes against the scalar reference, with the same tolerance; with Interleave the
// kernels of the 8-row interleaved layout (repack.hpp), 53 rows: 4 groups read as long
// streams, a pair of groups and a padded group (AVX-512 VNNI: every tile of its GEMV).
template <class Block>
void random_scales(Block& b, std::mt19937& rng) {
  const auto scale = [&] { return hedge::f32_to_f16(std::ldexp(static_cast<float>(rng() % 2001) - 1000.f, -16)); };
  b.d = scale();
  if constexpr (requires { b.m; }) b.m = scale();
  if constexpr (requires { b.dmin; }) b.dmin = scale();
}

/// The largest levels (and Q6_K's extreme scales, Q5_K's largest scales and mins).
template <class Block>
void extreme_levels(Block& b) {
  if constexpr (requires { b.ql; }) {
    b.scales[0] = -128;
    b.scales[1] = 127;
    std::memset(b.ql, 0xFF, sizeof b.ql);
  } else {
    std::memset(b.qs, 0xFF, sizeof b.qs);
    if constexpr (requires { b.scales; }) std::memset(b.scales, 0xFF, sizeof b.scales);  // Q5_K
  }
  std::memset(b.qh, 0xFF, sizeof b.qh);
}

/// `count` blocks of arbitrary bytes, the first at the extremes.
template <class W>
std::vector<typename W::block> arbitrary_blocks(std::size_t count) {
  std::mt19937 rng(21);
  std::vector<typename W::block> w(count);
  for (auto& b : w) {
    auto* bytes = reinterpret_cast<std::uint8_t*>(&b);
    for (std::size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<std::uint8_t>(rng());
    random_scales(b, rng);
  }
  extreme_levels(w[0]);
  return w;
}

/// An activation of `kk` values that reaches -127 and 127 once quantized.
std::vector<float> extreme_activation(std::size_t kk) {
  auto x = hedge::test::random_floats(kk, 22);
  x[3] = -8.f;
  x[700] = 8.f;
  return x;
}

template <class W, class A, bool Interleave = false>
void expect_arbitrary_blocks_match_scalar() {
  if constexpr (hedge::test::may_run<A>) {
    if (!A::supported()) return;
    constexpr std::size_t rows = Interleave ? 53 : 9, kk = 1024, blocks = kk / W::block_elements;
    const std::vector<typename W::block> w = arbitrary_blocks<W>(rows * blocks);
    const hedge::matrix_view<const typename W::block> view(w.data(), rows, blocks);
    const auto x = extreme_activation(kk);
    std::vector<std::byte> workspace(k::gemv_workspace_bytes<W>(kk));
    std::vector<float> y(rows), y_ref(rows);
    if constexpr (Interleave) {
      std::vector<typename k::interleaved<W>::block> packed(k::interleaved_blocks<W>(rows, kk));
      const auto repacked = k::repack<W>(view, {packed.data(), packed.size()});
      ASSERT_TRUE(repacked);
      ASSERT_TRUE((k::gemv<W, A>(*repacked, {x.data(), kk}, {y.data(), rows}, workspace)));
    } else {
      ASSERT_TRUE((k::gemv<W, A>(view, {x.data(), kk}, {y.data(), rows}, workspace)));
    }
    ASSERT_TRUE((k::gemv<W, hedge::arch::scalar>(view, {x.data(), kk}, {y_ref.data(), rows}, workspace)));
    const hedge::test::activation_error<W> act(x);
    std::vector<float> values(kk);
    for (std::size_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(q::dequantize<W>({w.data() + r * blocks, blocks}, {values.data(), kk}));
      double magnitude = 0;
      for (std::size_t c = 0; c < kk; ++c) magnitude += std::fabs(double(values[c]) * act.seen[c]);
      EXPECT_NEAR(y[r], y_ref[r], 1e-5 * magnitude + 1e-6) << W::name << " " << A::name << " row " << r;
    }
  }
}

template <class W>
void expect_arbitrary_blocks_match_scalar_on_every_arch() {
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::avx2>();
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::avx512vnni>();
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::neon>();
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::neon_dotprod>();
}

TEST(GemvQ6_K, ArbitraryBlocksMatchScalar) { expect_arbitrary_blocks_match_scalar_on_every_arch<q::q6_k>(); }
TEST(GemvQ5_0, ArbitraryBlocksMatchScalar) { expect_arbitrary_blocks_match_scalar_on_every_arch<q::q5_0>(); }
TEST(GemvQ5_1, ArbitraryBlocksMatchScalar) { expect_arbitrary_blocks_match_scalar_on_every_arch<q::q5_1>(); }
TEST(GemvQ5_K, ArbitraryBlocksMatchScalar) { expect_arbitrary_blocks_match_scalar_on_every_arch<q::q5_k>(); }
// The AVX-512 VNNI Q5_0 kernel (matmul/avx512_gemv.hpp) equals the AVX2 one bit for bit:
// the same exact int32 lane sums and the same float epilogue, every fifth-bit pattern.
TEST(GemvQ5_0, Avx512VnniEqualsAvx2BitForBit) {
  if constexpr (hedge::test::may_run<hedge::arch::avx512vnni>) {
    if (!hedge::arch::avx512vnni::supported()) GTEST_SKIP() << "this CPU cannot run avx512vnni";
    constexpr std::size_t rows = 9, kk = 1024, blocks = kk / q::q5_0::block_elements;
    const auto w = arbitrary_blocks<q::q5_0>(rows * blocks);
    const hedge::matrix_view<const q::q5_0::block> view(w.data(), rows, blocks);
    const auto x = extreme_activation(kk);
    std::vector<std::byte> workspace(k::gemv_workspace_bytes<q::q5_0>(kk));
    std::vector<float> y(rows), y_avx2(rows);
    ASSERT_TRUE((k::gemv<q::q5_0, hedge::arch::avx512vnni>(view, {x.data(), kk}, {y.data(), rows}, workspace)));
    ASSERT_TRUE((k::gemv<q::q5_0, hedge::arch::avx2>(view, {x.data(), kk}, {y_avx2.data(), rows}, workspace)));
    for (std::size_t r = 0; r < rows; ++r) EXPECT_EQ(y[r], y_avx2[r]) << "row " << r;
  } else {
    GTEST_SKIP() << "no x86 build";
  }
}

// The AVX-512 VNNI interleaved kernels (matmul/avx512_interleaved.hpp) equal the AVX2
// ones bit for bit, GEMV and GEMM of 1 to 9 activation rows (the streamed decode-batch
// tiles of up to 8 rows, then tiles of 8, 4, 2 and 1): the same exact int32 lane sums and
// the same float epilogue, at every level and scale extreme. 53 rows: streams, a pair, a
// padded group.
template <class W>
void expect_avx512vnni_interleaved_equals_avx2() {
  if constexpr (hedge::test::may_run<hedge::arch::avx512vnni>) {
    if (!hedge::arch::avx512vnni::supported()) GTEST_SKIP() << "this CPU cannot run avx512vnni";
    constexpr std::size_t rows = 53, kk = 1024, blocks = kk / W::block_elements;
    const auto w = arbitrary_blocks<W>(rows * blocks);
    const hedge::matrix_view<const typename W::block> view(w.data(), rows, blocks);
    std::vector<typename k::interleaved<W>::block> packed(k::interleaved_blocks<W>(rows, kk));
    const auto repacked = k::repack<W>(view, {packed.data(), packed.size()});
    ASSERT_TRUE(repacked);
    for (std::size_t m_rows : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u}) {
      auto x = hedge::test::random_floats(m_rows * kk, 23);
      const auto extreme = extreme_activation(kk);
      std::copy(extreme.begin(), extreme.end(), x.begin());
      std::vector<std::byte> workspace(k::gemm_workspace_bytes<W>(m_rows, kk));
      std::vector<float> y(m_rows * rows), y_avx2(m_rows * rows);
      const hedge::matrix_view<const float> xv(x.data(), m_rows, kk);
      ASSERT_TRUE((k::gemm<W, hedge::arch::avx512vnni>(*repacked, xv, {y.data(), m_rows, rows}, workspace)));
      ASSERT_TRUE((k::gemm<W, hedge::arch::avx2>(*repacked, xv, {y_avx2.data(), m_rows, rows}, workspace)));
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], y_avx2[i]) << m_rows << " rows, at " << i;
      if (m_rows == 1) {
        std::vector<float> gemv_y(rows);
        ASSERT_TRUE((k::gemv<W, hedge::arch::avx512vnni>(*repacked, {x.data(), kk}, {gemv_y.data(), rows}, workspace)));
        EXPECT_EQ(gemv_y, y_avx2);
      }
    }
  } else {
    GTEST_SKIP() << "no x86 build";
  }
}

TEST(GemvQ6_K, Avx512VnniInterleavedEqualsAvx2BitForBit) { expect_avx512vnni_interleaved_equals_avx2<q::q6_k>(); }
TEST(GemvQ5_0, Avx512VnniInterleavedEqualsAvx2BitForBit) { expect_avx512vnni_interleaved_equals_avx2<q::q5_0>(); }
TEST(GemvQ5_1, Avx512VnniInterleavedEqualsAvx2BitForBit) { expect_avx512vnni_interleaved_equals_avx2<q::q5_1>(); }

template <class W>
void expect_arbitrary_blocks_match_scalar_interleaved() {
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::scalar, true>();
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::avx2, true>();
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::avx512vnni, true>();
  expect_arbitrary_blocks_match_scalar<W, hedge::arch::neon_dotprod, true>();
}

TEST(GemvQ6_K, ArbitraryBlocksMatchScalarInterleaved) { expect_arbitrary_blocks_match_scalar_interleaved<q::q6_k>(); }
TEST(GemvQ5_0, ArbitraryBlocksMatchScalarInterleaved) { expect_arbitrary_blocks_match_scalar_interleaved<q::q5_0>(); }
TEST(GemvQ5_1, ArbitraryBlocksMatchScalarInterleaved) { expect_arbitrary_blocks_match_scalar_interleaved<q::q5_1>(); }

}  // namespace
