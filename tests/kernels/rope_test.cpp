#include "hedge/kernels/rope.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops_test_support.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge;
using kernels::rope_layout;

template <class A>
class Rope : public test::arch_test<A> {};
TYPED_TEST_SUITE(Rope, test::ops_arch_tags, test::arch_tag_name);

/// float64 RoPE of one head, straight from the definition (see rope.hpp).
std::vector<double> rope_f64(rope_layout layout, const float* x, std::size_t d, std::size_t position, double base) {
  std::vector<double> out(x, x + d);
  for (std::size_t i = 0; i < d / 2; ++i) {
    const double theta = double(position) * std::pow(base, -2.0 * double(i) / double(d));
    const std::size_t j0 = layout == rope_layout::adjacent_pairs ? 2 * i : i;
    const std::size_t j1 = layout == rope_layout::adjacent_pairs ? 2 * i + 1 : i + d / 2;
    out[j0] = x[j0] * std::cos(theta) - x[j1] * std::sin(theta);
    out[j1] = x[j0] * std::sin(theta) + x[j1] * std::cos(theta);
  }
  return out;
}

std::size_t partner(rope_layout layout, std::size_t j, std::size_t d) {
  if (layout == rope_layout::adjacent_pairs) return j ^ 1u;
  return j < d / 2 ? j + d / 2 : j - d / 2;
}

// Tolerance: the table's cos and sin are the double values rounded once
// (6e-8 relative), and each output is two products and a sum (or an FMA) in
// float, so |error| <= 3e-7 (|a| + |b|) for the pair (a, b).
TYPED_TEST(Rope, MatchesFloat64ReferenceForBothLayouts) {
  constexpr std::size_t heads = 3, stride_pad = 5;
  for (rope_layout layout : {rope_layout::adjacent_pairs, rope_layout::neox_halves}) {
    for (std::size_t d : {2u, 4u, 6u, 8u, 14u, 16u, 18u, 34u, 64u, 80u, 128u, 256u}) {
      for (std::size_t position : {0u, 1u, 7u, 4095u, 100000u}) {
        auto data = test::random_floats(heads * (d + stride_pad), 1.0f, unsigned(d * 7 + position));
        std::vector<float> original(data.data(), data.data() + heads * (d + stride_pad));
        test::unaligned_floats cos(d), sin(d);
        ASSERT_TRUE(kernels::rope_table(layout, position, 10000.0f, cos.view(), sin.view()).ok());
        kernels::rope<TypeParam>(layout, matrix_view<float>(data.data(), heads, d, d + stride_pad), cos.cview(),
                                 sin.cview());
        for (std::size_t h = 0; h < heads; ++h) {
          const float* in = original.data() + h * (d + stride_pad);
          const auto ref = rope_f64(layout, in, d, position, 10000.0);
          for (std::size_t j = 0; j < d; ++j) {
            const double bound = 3e-7 * (std::abs(in[j]) + std::abs(in[partner(layout, j, d)]));
            ASSERT_NEAR(data[h * (d + stride_pad) + j], ref[j], bound)
                << "layout=" << int(layout) << " d=" << d << " pos=" << position << " head=" << h << " j=" << j;
          }
          for (std::size_t j = d; j < d + stride_pad; ++j) ASSERT_EQ(data[h * (d + stride_pad) + j], in[j]) << "padding";
        }
      }
    }
  }
}

// Hand-computed: head_dim 4, base 100, position 1: angles 1 and 100^(-1/2) = 0.1
// rad. Each case puts (1, 0) in both pairs of its layout, so the pair of angle
// a ends as (cos a, sin a) at the pair's positions.
TYPED_TEST(Rope, PairsElementsAsEachLayoutSays) {
  struct layout_case {
    rope_layout layout;
    std::size_t pair0[2], pair1[2];
  };
  const layout_case cases[] = {{rope_layout::adjacent_pairs, {0, 1}, {2, 3}}, {rope_layout::neox_halves, {0, 2}, {1, 3}}};
  for (const layout_case& c : cases) {
    test::unaligned_floats cos(4), sin(4), x(4);
    for (std::size_t j = 0; j < 4; ++j) x[j] = 0.0f;
    x[c.pair0[0]] = 1.0f;
    x[c.pair1[0]] = 1.0f;
    ASSERT_TRUE(kernels::rope_table(c.layout, 1, 100.0f, cos.view(), sin.view()).ok());
    kernels::rope<TypeParam>(c.layout, matrix_view<float>(x.data(), 1, 4), cos.cview(), sin.cview());
    EXPECT_FLOAT_EQ(x[c.pair0[0]], std::cos(1.0f)) << int(c.layout);
    EXPECT_FLOAT_EQ(x[c.pair0[1]], std::sin(1.0f)) << int(c.layout);
    EXPECT_FLOAT_EQ(x[c.pair1[0]], std::cos(0.1f)) << int(c.layout);
    EXPECT_FLOAT_EQ(x[c.pair1[1]], std::sin(0.1f)) << int(c.layout);
  }
}

TYPED_TEST(Rope, PositionZeroIsIdentityAndAllocatesNothing) {
  auto x = test::random_floats(8 * 128, 1.0f, 99);
  std::vector<float> original(x.data(), x.data() + x.size());
  test::unaligned_floats cos(128), sin(128);
  test::alloc_scope scope;
  ASSERT_TRUE(kernels::rope_table(rope_layout::neox_halves, 0, 500000.0f, cos.view(), sin.view()).ok());
  kernels::rope<TypeParam>(rope_layout::neox_halves, matrix_view<float>(x.data(), 8, 128), cos.cview(), sin.cview());
  EXPECT_EQ(scope.count(), 0u);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], original[i]) << i;
}

TEST(RopeTable, RejectsBadShapes) {
  std::vector<float> cos(7), sin(8);
  EXPECT_EQ(kernels::rope_table(rope_layout::adjacent_pairs, 3, 10000.0f, {cos.data(), 7}, {sin.data(), 7}).error().code(),
            errc::invalid_argument);
  EXPECT_EQ(kernels::rope_table(rope_layout::adjacent_pairs, 3, 10000.0f, {cos.data(), 0}, {sin.data(), 0}).error().code(),
            errc::invalid_argument);
  EXPECT_EQ(kernels::rope_table(rope_layout::neox_halves, 3, 10000.0f, {cos.data(), 6}, {sin.data(), 8}).error().code(),
            errc::shape_mismatch);
  EXPECT_EQ(kernels::rope_table(rope_layout::neox_halves, 3, 0.0f, {cos.data(), 6}, {sin.data(), 6}).error().code(),
            errc::invalid_argument);
}

TEST(RopeDispatch, BestAndDerivedTagsMatchTheirVariant) {
  constexpr std::size_t heads = 4, d = 80;
  auto original = test::random_floats(heads * d, 1.0f, 17);
  test::expect_dispatch_matches_variants([&]<class A>(A) {
    std::vector<float> all;
    for (rope_layout layout : {rope_layout::adjacent_pairs, rope_layout::neox_halves}) {
      std::vector<float> x(original.size());
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = original[i];
      test::unaligned_floats cos(d), sin(d);
      EXPECT_TRUE(kernels::rope_table(layout, 777, 10000.0f, cos.view(), sin.view()).ok());
      kernels::rope<A>(layout, matrix_view<float>(x.data(), heads, d), cos.cview(), sin.cview());
      all.insert(all.end(), x.begin(), x.end());
    }
    return all;
  });
}

}  // namespace
