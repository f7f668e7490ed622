// gemm and the interleaved (repacked) layout: every variant this CPU runs,
// against the scalar reference and a float64 Eigen reference (tolerances as in
// gemv_test.cpp), GEMM row m == GEMV of row m bit for bit, the interleaved
// scalar path == the GGUF-layout scalar path bit for bit, repack round trips,
// M/N edge tiles (N off the 8-row group, M off the 4-row tile and the 64-row
// chunk), strided X/Y, thread-count invariance and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "hedge/os/thread_pool.hpp"
#include "hedge/kernels/gemm.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/repack.hpp"
#include "kernels/matmul_support.hpp"

namespace {

namespace q = hedge::quant;
namespace k = hedge::kernels;
using hedge::test::variant;

/// An interleaved copy of a quantized matrix.
template <class W>
struct repacked {
  std::vector<typename k::interleaved<W>::block> storage;
  k::interleaved_view<W> view;
  explicit repacked(const hedge::test::quantized_matrix<W>& m)
      : storage(k::interleaved_blocks<W>(m.rows, m.k)) {
    auto r = k::repack<W>(m.view(), {storage.data(), storage.size()});
    if (!r) std::abort();
    view = *r;
  }
};

/// Whether the GGUF-layout GEMM of W on A packs its weights into the interleaved layout on
/// the fly (AVX-512 VNNI Q4_0/Q8_0/Q5_0/Q5_1): its rows then equal the interleaved GEMV's bit for bit.
template <class W, class A>
constexpr bool packs_on_the_fly = std::is_same_v<A, hedge::arch::avx512vnni> &&
                                  (std::is_same_v<W, q::q4_0> || std::is_same_v<W, q::q8_0> ||
                                   std::is_same_v<W, q::q5_0> || std::is_same_v<W, q::q5_1>);

/// Runs Y = X W^T in the layout `Layout` (plain or interleaved) of variant V
/// and checks it against the references.
template <class W, class A, bool Interleave>
void check_gemm(std::size_t m_rows, std::size_t n, std::size_t kk, unsigned seed) {
  if constexpr (hedge::test::may_run<A>) {
    SCOPED_TRACE(testing::Message() << m_rows << "x" << n << "x" << kk << (Interleave ? " interleaved" : " plain"));
    hedge::test::quantized_matrix<W> w(n, kk, seed);
    const std::size_t x_stride = kk + 3, y_stride = n + 5;  // strided X and Y
    const auto xs = hedge::test::random_floats(m_rows * x_stride, seed + 1, 0.5f);
    std::vector<float> y(m_rows * y_stride, -7.f), y_ref(m_rows * y_stride, -7.f);
    std::vector<std::byte> workspace(k::gemm_workspace_bytes<W>(m_rows, kk));
    const hedge::matrix_view<const float> x(xs.data(), m_rows, kk, x_stride);
    const hedge::matrix_view<float> yv(y.data(), m_rows, n, y_stride), yv_ref(y_ref.data(), m_rows, n, y_stride);
    if constexpr (Interleave) {
      repacked<W> p(w);
      ASSERT_TRUE((k::gemm<W, A>(p.view, x, yv, workspace)));
      ASSERT_TRUE((k::gemm<W, hedge::arch::scalar>(p.view, x, yv_ref, workspace)));
    } else {
      ASSERT_TRUE((k::gemm<W, A>(w.view(), x, yv, workspace)));
      ASSERT_TRUE((k::gemm<W, hedge::arch::scalar>(w.view(), x, yv_ref, workspace)));
    }
    std::vector<float> row_y(n), row_scalar(n);
    std::vector<std::byte> gemv_workspace(k::gemv_workspace_bytes<W>(kk));
    for (std::size_t m = 0; m < m_rows; ++m) {
      const std::vector<float> x_row(xs.begin() + static_cast<std::ptrdiff_t>(m * x_stride),
                                     xs.begin() + static_cast<std::ptrdiff_t>(m * x_stride + kk));
      // GEMV of the same row, same layout and arch: bit-identical.
      if constexpr (Interleave || packs_on_the_fly<W, A>) {
        repacked<W> p(w);
        ASSERT_TRUE((k::gemv<W, A>(p.view, {x_row.data(), kk}, {row_y.data(), n}, gemv_workspace)));
      } else {
        ASSERT_TRUE((k::gemv<W, A>(w.view(), {x_row.data(), kk}, {row_y.data(), n}, gemv_workspace)));
      }
      // The GGUF-layout scalar GEMV, which the interleaved scalar path must equal exactly.
      ASSERT_TRUE((k::gemv<W, hedge::arch::scalar>(w.view(), {x_row.data(), kk}, {row_scalar.data(), n},
                                                    gemv_workspace)));
      const hedge::test::activation_error<W> act(x_row);
      for (std::size_t c = 0; c < n; ++c) {
        const float got = y[m * y_stride + c];
        ASSERT_EQ(y_ref[m * y_stride + c], row_scalar[c]) << "scalar paths differ at " << m << "," << c;
        double exact = 0, magnitude = 0;
        for (std::size_t j = 0; j < kk; ++j) {
          const double wv = w.values(static_cast<Eigen::Index>(c), static_cast<Eigen::Index>(j));
          exact += wv * act.seen[j];
          magnitude += std::fabs(wv * act.seen[j]);
        }
        const double rounding = 1e-5 * magnitude + 1e-6;
        ASSERT_EQ(got, row_y[c]) << "gemm row " << m << " col " << c << " differs from gemv";
        EXPECT_NEAR(got, y_ref[m * y_stride + c], rounding) << m << "," << c;
        EXPECT_NEAR(got, exact, rounding) << m << "," << c;
      }
      for (std::size_t c = n; c < y_stride; ++c) ASSERT_EQ(y[m * y_stride + c], -7.f) << "padding overwritten";
    }
  }
}

template <class V>
class Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!V::arch::supported()) GTEST_SKIP() << "this CPU cannot run " << V::arch::name;
  }
};
using Variants = ::testing::Types<
    variant<q::q8_0, hedge::arch::scalar>, variant<q::q4_0, hedge::arch::scalar>,
    variant<q::q4_k, hedge::arch::scalar>, variant<q::f16, hedge::arch::scalar>,
    variant<q::q8_0, hedge::arch::avx2>, variant<q::q4_0, hedge::arch::avx2>, variant<q::q4_k, hedge::arch::avx2>,
    variant<q::f32, hedge::arch::avx2>, variant<q::f16, hedge::arch::avx2>, variant<q::bf16, hedge::arch::avx2>,
    variant<q::q8_0, hedge::arch::avx512vnni>, variant<q::q4_0, hedge::arch::avx512vnni>,
    variant<q::q8_0, hedge::arch::neon_dotprod>, variant<q::q4_0, hedge::arch::neon_dotprod>,
    variant<q::q4_k, hedge::arch::neon_dotprod>, variant<q::bf16, hedge::arch::neon>,
    variant<q::q5_0, hedge::arch::scalar>, variant<q::q5_1, hedge::arch::scalar>, variant<q::q5_k, hedge::arch::scalar>,
    variant<q::q5_0, hedge::arch::avx2>, variant<q::q5_1, hedge::arch::avx2>, variant<q::q5_k, hedge::arch::avx2>,
    variant<q::q5_0, hedge::arch::avx512vnni>, variant<q::q5_1, hedge::arch::avx512vnni>,
    variant<q::q5_k, hedge::arch::avx512vnni>, variant<q::q5_0, hedge::arch::neon_dotprod>,
    variant<q::q5_1, hedge::arch::neon_dotprod>, variant<q::q5_k, hedge::arch::neon_dotprod>,
    variant<q::q5_0, hedge::arch::neon>, variant<q::q5_1, hedge::arch::neon>, variant<q::q5_k, hedge::arch::neon>>;
TYPED_TEST_SUITE(Gemm, Variants);

TYPED_TEST(Gemm, GgufLayoutMatchesReferences) {
  using W = typename TypeParam::format;
  const std::size_t kk = W::block_elements == 256 ? 512 : (W::block_elements == 32 ? 96 : 45);
  unsigned seed = 10;
  for (std::size_t m_rows : {1u, 5u, 9u}) {
    for (std::size_t n : {1u, 7u, 17u}) check_gemm<W, typename TypeParam::arch, false>(m_rows, n, kk, seed++);
  }
  // More than one chunk of K packed on the fly (AVX-512 VNNI), full and partial 16-row slices.
  if constexpr (W::block_elements == 32) check_gemm<W, typename TypeParam::arch, false>(9, 35, 70 * 32, seed++);
}

template <class V>
class InterleavedGemm : public Gemm<V> {};
using InterleavedVariants =
    ::testing::Types<variant<q::q8_0, hedge::arch::scalar>, variant<q::q4_0, hedge::arch::scalar>,
                     variant<q::q4_k, hedge::arch::scalar>, variant<q::q8_0, hedge::arch::avx2>,
                     variant<q::q4_0, hedge::arch::avx2>, variant<q::q4_k, hedge::arch::avx2>,
                     variant<q::q8_0, hedge::arch::avx512vnni>, variant<q::q4_0, hedge::arch::avx512vnni>,
                     variant<q::q4_k, hedge::arch::avx512vnni>, variant<q::q8_0, hedge::arch::neon_dotprod>,
                     variant<q::q4_0, hedge::arch::neon_dotprod>,
                     variant<q::q4_k, hedge::arch::neon_dotprod>, variant<q::q4_0, hedge::arch::best>,
                     variant<q::q4_k, hedge::arch::best>, variant<q::q6_k, hedge::arch::scalar>,
                     variant<q::q6_k, hedge::arch::avx2>, variant<q::q6_k, hedge::arch::avx512vnni>,
                     variant<q::q6_k, hedge::arch::neon_dotprod>, variant<q::q6_k, hedge::arch::best>,
                     variant<q::q5_0, hedge::arch::scalar>, variant<q::q5_0, hedge::arch::avx2>,
                     variant<q::q5_0, hedge::arch::avx512vnni>, variant<q::q5_0, hedge::arch::neon_dotprod>,
                     variant<q::q5_0, hedge::arch::best>, variant<q::q5_1, hedge::arch::scalar>,
                     variant<q::q5_1, hedge::arch::avx2>, variant<q::q5_1, hedge::arch::avx512vnni>,
                     variant<q::q5_1, hedge::arch::neon_dotprod>, variant<q::q5_1, hedge::arch::best>>;
TYPED_TEST_SUITE(InterleavedGemm, InterleavedVariants);

TYPED_TEST(InterleavedGemm, MatchesReferencesOnEdgeTiles) {
  using W = typename TypeParam::format;
  // One block, and a K with an odd block count (not a multiple of 256 for the 32-element formats).
  const std::size_t one = W::block_elements;
  unsigned seed = 20;
  for (std::size_t kk : {one, 17 * one}) {
    for (std::size_t m_rows : {1u, 2u, 3u, 4u, 7u}) {
      for (std::size_t n : {1u, 8u, 13u}) check_gemm<W, typename TypeParam::arch, true>(m_rows, n, kk, seed++);
    }
  }
  check_gemm<W, typename TypeParam::arch, true>(70, 24, 2 * one, seed++);  // crosses the 64-row chunk
  // GEMV runs (gemv_streams.hpp), which AVX-512 VNNI GEMMs of up to 8 rows read
  // the same way, 5 rows on as two pairs of streams: 4 streams of one group then a partial
  // group; of one group then a pair, a lone group and a partial one; of two groups, nothing
  // left; of three groups, then a pair, a lone group and a partial one.
  check_gemm<W, typename TypeParam::arch, true>(1, 37, 3 * one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(2, 61, one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(1, 64, 2 * one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(3, 125, 3 * one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(4, 125, 2 * one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(5, 37, 3 * one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(6, 61, one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(7, 64, 2 * one, seed++);
  check_gemm<W, typename TypeParam::arch, true>(8, 125, 3 * one, seed++);
  // Tiles of two groups (AVX-512): pairs only, pairs then a lone full group, pairs then a
  // partial group; activation tiles of 8, 4, 2 and 1 rows.
  for (std::size_t m_rows : {8u, 15u, 17u}) {
    for (std::size_t n : {16u, 40u, 45u}) check_gemm<W, typename TypeParam::arch, true>(m_rows, n, 3 * one, seed++);
  }
}

TYPED_TEST(InterleavedGemm, SameResultForAnyThreadCount) {
  using W = typename TypeParam::format;
  using A = typename TypeParam::arch;
  if constexpr (hedge::test::may_run<A>) {
    const std::size_t m_rows = 11, n = 301, kk = 4 * W::block_elements;  // GEMV runs of several streams per thread
    hedge::test::quantized_matrix<W> w(n, kk, 3);
    repacked<W> p(w);
    const auto xs = hedge::test::random_floats(m_rows * kk, 4);
    std::vector<std::byte> workspace(k::gemm_workspace_bytes<W>(m_rows, kk));
    std::vector<float> serial(m_rows * n), pooled(m_rows * n);
    const hedge::matrix_view<const float> x(xs.data(), m_rows, kk);
    ASSERT_TRUE((k::gemm<W, A>(p.view, x, {serial.data(), m_rows, n}, workspace)));
    for (std::size_t threads : {2u, 3u}) {
      hedge::exec::thread_pool pool(threads);
      ASSERT_TRUE((k::gemm<W, A>(p.view, x, {pooled.data(), m_rows, n}, workspace, pool)));
      EXPECT_EQ(serial, pooled) << threads << " threads";
      std::vector<float> row(n);
      ASSERT_TRUE((k::gemv<W, A>(p.view, {xs.data(), kk}, {row.data(), n}, workspace, pool)));
      EXPECT_TRUE(std::equal(row.begin(), row.end(), serial.begin())) << threads << " threads, GEMV";
      ASSERT_TRUE((k::gemm<W, A>(w.view(), x, {pooled.data(), m_rows, n}, workspace, pool)));
      std::vector<float> plain(m_rows * n);
      ASSERT_TRUE((k::gemm<W, A>(w.view(), x, {plain.data(), m_rows, n}, workspace)));
      EXPECT_EQ(plain, pooled) << threads << " threads, GGUF layout";
    }
  }
}

template <class W>
void check_round_trip() {
  hedge::test::quantized_matrix<W> w(11, 3 * W::block_elements, 9);
  repacked<W> p(w);
  EXPECT_EQ(p.view.groups(), 2u);
  for (std::size_t r = 0; r < 16; ++r) {
    for (std::size_t b = 0; b < 3; ++b) {
      const auto back = k::original_block<W>(p.view.group(r / 8)[b], r % 8);
      if (r < 11) {
        EXPECT_EQ(std::memcmp(&back, &w.view()(r, b), sizeof back), 0) << r << "," << b;
      } else {
        EXPECT_EQ(back.d.bits, 0) << "padding row " << r;
      }
    }
  }
  std::vector<typename k::interleaved<W>::block> wrong(3);
  EXPECT_EQ((k::repack<W>(w.view(), {wrong.data(), wrong.size()})).error().code(), hedge::errc::shape_mismatch);
}

TEST(Repack, RoundTripsAndPadsTheLastGroup) {
  check_round_trip<q::q4_0>();
  check_round_trip<q::q8_0>();
  check_round_trip<q::q4_k>();
  check_round_trip<q::q6_k>();
  check_round_trip<q::q5_0>();
  check_round_trip<q::q5_1>();
}

TEST(Repack, Q5FifthBitsRoundTripEveryPosition) {
  // Each single fifth bit of each row lands on the bit of its quad word that lines up
  // with its nibble's byte (repack.hpp), and comes back.
  for (std::size_t r = 0; r < 8; ++r) {
    for (std::size_t e = 0; e < 32; ++e) {
      q::q5_0::block src{};
      src.qh[e / 8] = static_cast<std::uint8_t>(1u << (e % 8));
      k::interleaved<q::q5_0>::block group{};
      k::interleaved<q::q5_0>::pack(group, r, src);
      const std::size_t word = 2 * (e % 16 / 4) + e / 16, bit = 4 * r + e % 4;
      for (std::size_t i = 0; i < sizeof group.qh; ++i) {
        const unsigned expected = i == 4 * word + bit / 8 ? 1u << (bit % 8) : 0u;
        ASSERT_EQ(group.qh[i], expected) << "row " << r << " element " << e << " byte " << i;
      }
      const auto back = k::original_block<q::q5_0>(group, r);
      ASSERT_EQ(std::memcmp(back.qh, src.qh, sizeof src.qh), 0) << "row " << r << " element " << e;
    }
  }
}

TEST(Repack, Q4KScalesAndMinsRoundTripEveryValue) {
  // Every 6-bit scale and min value in every sub-block position survives
  // unpacking into the interleaved block and packing back.
  for (unsigned v = 0; v < 64; ++v) {
    q::q4_k::block src{};
    std::uint8_t scales[8], mins[8];
    for (std::size_t j = 0; j < 8; ++j) {
      scales[j] = static_cast<std::uint8_t>((v + 7 * j) % 64);
      mins[j] = static_cast<std::uint8_t>((v + 13 * j + 5) % 64);
    }
    for (std::size_t j = 0; j < 4; ++j) {
      src.scales[j] = static_cast<std::uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
      src.scales[j + 4] = static_cast<std::uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
      src.scales[j + 8] = static_cast<std::uint8_t>((scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4));
    }
    for (std::size_t j = 0; j < 8; ++j) {
      ASSERT_EQ(q::q4_k::unpack_scale_min(src.scales, j).scale, scales[j]);
      ASSERT_EQ(q::q4_k::unpack_scale_min(src.scales, j).min, mins[j]);
    }
    k::interleaved<q::q4_k>::block group{};
    k::interleaved<q::q4_k>::pack(group, v % 8, src);
    const auto back = k::original_block<q::q4_k>(group, v % 8);
    EXPECT_EQ(std::memcmp(back.scales, src.scales, sizeof src.scales), 0) << v;
  }
}

TEST(GemmEdges, ZeroActivationRowsIsANoOp) {
  hedge::test::quantized_matrix<q::q4_0> w(8, 64, 1);
  repacked<q::q4_0> p(w);
  const hedge::matrix_view<const float> x(nullptr, 0, 64);
  const hedge::matrix_view<float> y(nullptr, 0, 8);
  EXPECT_TRUE((k::gemm<q::q4_0>(w.view(), x, y, {})));
  EXPECT_TRUE((k::gemm<q::q4_0>(p.view, x, y, {})));
}

TEST(GemmErrors, ShapesWorkspaceAndInputAreChecked) {
  hedge::test::quantized_matrix<q::q8_0> w(8, 64, 1);
  std::vector<float> xs(3 * 64, 0.5f), ys(3 * 8);
  std::vector<std::byte> workspace(k::gemm_workspace_bytes<q::q8_0>(3, 64));
  const hedge::matrix_view<const float> x(xs.data(), 3, 64);
  EXPECT_EQ((k::gemm<q::q8_0>(w.view(), x, {ys.data(), 3, 7}, workspace)).error().code(), hedge::errc::shape_mismatch);
  EXPECT_EQ((k::gemm<q::q8_0>(w.view(), {xs.data(), 3, 32}, {ys.data(), 3, 8}, workspace)).error().code(),
            hedge::errc::shape_mismatch);
  EXPECT_EQ((k::gemm<q::q8_0>(w.view(), x, {ys.data(), 3, 8}, {workspace.data(), 100})).error().code(),
            hedge::errc::capacity_exceeded);
  xs[64 + 5] = INFINITY;
  const auto r = k::gemm<q::q8_0>(w.view(), x, {ys.data(), 3, 8}, workspace);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::invalid_argument);
  EXPECT_NE(r.error().message().find("row 1"), std::string_view::npos) << r.error().message();
}

}  // namespace
