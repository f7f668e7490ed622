#include "hedge/kernels/norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops_test_support.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge;

template <class A>
class RmsNorm : public test::arch_test<A> {};
TYPED_TEST_SUITE(RmsNorm, test::ops_arch_tags, test::arch_tag_name);

/// float64 RMSNorm of float inputs.
std::vector<double> rmsnorm_f64(const float* x, const float* w, std::size_t n, double eps) {
  double ss = 0.0;
  for (std::size_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(ss / double(n) + eps);
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = double(w[i]) * x[i] * scale;
  return out;
}

// Tolerance: the scalar path (double sum) is off by the final float roundings
// (scale, two products: < 2 ulp); the SIMD float sum adds about sqrt(n) ulp
// relative to the mean square, halved by the square root: 2e-6 relative
// covers n = 11008 with margin; 1e-30 absolute covers zero weights.
TYPED_TEST(RmsNorm, MatchesFloat64ReferenceOnEverySize) {
  for (std::size_t n : test::ops_test_sizes) {
    auto x = test::random_floats(n, 1.0f, 1 + unsigned(n));
    auto w = test::random_floats(n, 0.5f, 2 + unsigned(n));
    test::unaligned_floats out(n);
    kernels::rmsnorm<TypeParam>(x.cview(), w.cview(), 1e-5f, out.view());
    const auto ref = rmsnorm_f64(x.data(), w.data(), n, 1e-5);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(out[i], ref[i], 2e-6 * std::abs(ref[i]) + 1e-30) << "n=" << n << " i=" << i;
    }
  }
}

TYPED_TEST(RmsNorm, InPlaceEqualsOutOfPlace) {
  const std::size_t n = 1001;
  auto x = test::random_floats(n, 3.0f, 7);
  auto w = test::random_floats(n, 1.0f, 8);
  test::unaligned_floats out(n);
  kernels::rmsnorm<TypeParam>(x.cview(), w.cview(), 1e-6f, out.view());
  kernels::rmsnorm<TypeParam>(x.cview(), w.cview(), 1e-6f, x.view());
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], out[i]) << i;
}

TYPED_TEST(RmsNorm, EpsilonKeepsZeroInputFinite) {
  test::unaligned_floats x(33), w(33), out(33);
  for (std::size_t i = 0; i < 33; ++i) {
    x[i] = 0.0f;
    w[i] = 1.0f;
  }
  kernels::rmsnorm<TypeParam>(x.cview(), w.cview(), 1e-5f, out.view());
  for (std::size_t i = 0; i < 33; ++i) EXPECT_EQ(out[i], 0.0f);
}

TYPED_TEST(RmsNorm, AllocatesNothing) {
  auto x = test::random_floats(4096, 1.0f, 3);
  auto w = test::random_floats(4096, 1.0f, 4);
  test::unaligned_floats out(4096);
  test::alloc_scope scope;
  kernels::rmsnorm<TypeParam>(x.cview(), w.cview(), 1e-5f, out.view());
  EXPECT_EQ(scope.count(), 0u);
}

// arch::best runs the variant the CPU's features select; avx512vnni runs the
// avx512bw overload, avxvnni the avx2 one.
TEST(RmsNormDispatch, BestAndDerivedTagsMatchTheirVariant) {
  auto x = test::random_floats(1001, 1.0f, 5);
  auto w = test::random_floats(1001, 1.0f, 6);
  test::expect_dispatch_matches_variants([&]<class A>(A) {
    test::unaligned_floats out(1001);
    kernels::rmsnorm<A>(x.cview(), w.cview(), 1e-5f, out.view());
    return std::vector<float>(out.data(), out.data() + 1001);
  });
}

}  // namespace
