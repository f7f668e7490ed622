#include "hedge/kernels/softmax.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops_test_support.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge;

template <class A>
class Softmax : public test::arch_test<A> {};
TYPED_TEST_SUITE(Softmax, test::ops_arch_tags, test::arch_tag_name);

std::vector<double> softmax_f64(const float* x, std::size_t n) {
  double max_value = x[0];
  for (std::size_t i = 1; i < n; ++i) max_value = std::max(max_value, double(x[i]));
  std::vector<double> out(n);
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += out[i] = std::exp(double(x[i]) - max_value);
  for (double& v : out) v /= sum;
  return out;
}

// Tolerance 1e-5 relative: exp is within a few ulp (std::exp and xsimd::exp
// both), the argument x - max is exact up to one rounding (relative 6e-8 of
// |x - max| <= ~40 here, so up to 2.4e-6 relative after exp), and the float
// partial sums of the SIMD path add ~sqrt(n) ulp.
TYPED_TEST(Softmax, MatchesFloat64ReferenceOnEverySize) {
  for (std::size_t n : test::ops_test_sizes) {
    auto x = test::random_floats(n, 4.0f, 11 + unsigned(n));
    test::unaligned_floats out(n);
    kernels::softmax<TypeParam>(x.cview(), out.view());
    const auto ref = softmax_f64(x.data(), n);
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(out[i], ref[i], 1e-5 * ref[i]) << "n=" << n << " i=" << i;
      total += out[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << n;
  }
}

TYPED_TEST(Softmax, LargeLogitsDoNotOverflow) {
  test::unaligned_floats x(37), out(37);
  for (std::size_t i = 0; i < 37; ++i) x[i] = 1000.0f + float(i % 5);
  kernels::softmax<TypeParam>(x.cview(), out.view());
  const auto ref = softmax_f64(x.data(), 37);
  for (std::size_t i = 0; i < 37; ++i) ASSERT_NEAR(out[i], ref[i], 1e-5 * ref[i]) << i;
}

TYPED_TEST(Softmax, MaskedEntriesGetZero) {
  auto x = test::random_floats(19, 1.0f, 5);
  for (std::size_t i = 10; i < 19; ++i) x[i] = -std::numeric_limits<float>::infinity();
  kernels::softmax<TypeParam>(x.cview(), x.view());
  double total = 0.0;
  for (std::size_t i = 0; i < 19; ++i) total += x[i];
  for (std::size_t i = 10; i < 19; ++i) EXPECT_EQ(x[i], 0.0f) << i;
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TYPED_TEST(Softmax, InPlaceEqualsOutOfPlaceAndAllocatesNothing) {
  auto x = test::random_floats(4099, 2.0f, 9);
  test::unaligned_floats out(4099);
  test::alloc_scope scope;
  kernels::softmax<TypeParam>(x.cview(), out.view());
  kernels::softmax<TypeParam>(x.cview(), x.view());
  EXPECT_EQ(scope.count(), 0u);
  for (std::size_t i = 0; i < 4099; ++i) ASSERT_EQ(x[i], out[i]) << i;
}

}  // namespace
