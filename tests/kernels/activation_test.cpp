#include "hedge/kernels/activation.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops_test_support.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge;

template <class A>
class Activation : public test::arch_test<A> {};
TYPED_TEST_SUITE(Activation, test::ops_arch_tags, test::arch_tag_name);

double silu_f64(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_tanh_f64(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// Inputs: standard deviation 4, so most of the curve, plus the extremes.
test::unaligned_floats activation_inputs(std::size_t n, unsigned seed) {
  auto x = test::random_floats(n, 4.0f, seed);
  if (n >= 4) {
    x[0] = -30.0f;  // silu and gelu underflow towards -0
    x[1] = 30.0f;
    x[2] = 0.0f;
    x[3] = -1e-20f;
  }
  return x;
}

/// Runs `kernel(x, out)` on every test size and checks each output against
/// `reference(x)` within rel |ref| + abs_per_x |x| + 1e-30 (underflow).
template <class Kernel, class Reference>
void expect_matches_reference(Kernel kernel, Reference reference, double rel, double abs_per_x, unsigned seed) {
  for (std::size_t n : test::ops_test_sizes) {
    auto x = activation_inputs(n, seed + unsigned(n));
    test::unaligned_floats out(n);
    kernel(x.cview(), out.view());
    for (std::size_t i = 0; i < n; ++i) {
      const double ref = reference(x[i]);
      ASSERT_NEAR(out[i], ref, rel * std::abs(ref) + abs_per_x * std::abs(x[i]) + 1e-30) << "n=" << n << " x=" << x[i];
    }
  }
}

// SiLU: x / (1 + exp(-x)) has one exp (a few ulp), one add, one divide; the
// exp's argument error grows with |x| (6e-8 |x| relative), so 1e-5 relative.
TYPED_TEST(Activation, SiluMatchesFloat64Reference) {
  expect_matches_reference([](auto x, auto out) { kernels::silu<TypeParam>(x, out); }, silu_f64, 1e-5, 0.0, 21);
}

// GELU: the reference formula (ggml's) computes 1 + tanh(u), which cancels
// for x < -3 and loses up to 0.5 |x| ulp(1) absolute; the SIMD form
// 1 / (1 + exp(-2u)) does not cancel. Tolerance: 1e-5 relative + 1e-7 |x| absolute.
TYPED_TEST(Activation, GeluMatchesFloat64Reference) {
  expect_matches_reference([](auto x, auto out) { kernels::gelu<TypeParam>(x, out); }, gelu_tanh_f64, 1e-5, 1e-7, 31);
}

TYPED_TEST(Activation, SiluMulMatchesFloat64ReferenceInPlace) {
  for (std::size_t n : test::ops_test_sizes) {
    auto gate = activation_inputs(n, 41 + unsigned(n));
    auto up = test::random_floats(n, 1.0f, 51 + unsigned(n));
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = silu_f64(gate[i]) * up[i];
    kernels::silu_mul<TypeParam>(gate.cview(), up.cview(), gate.view());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(gate[i], ref[i], 1e-5 * std::abs(ref[i]) + 1e-30) << "n=" << n << " i=" << i;
    }
  }
}

TYPED_TEST(Activation, AllocatesNothing) {
  auto x = test::random_floats(4096, 1.0f, 3);
  test::unaligned_floats out(4096);
  test::alloc_scope scope;
  kernels::silu<TypeParam>(x.cview(), out.view());
  kernels::gelu<TypeParam>(x.cview(), out.view());
  kernels::silu_mul<TypeParam>(x.cview(), x.cview(), out.view());
  EXPECT_EQ(scope.count(), 0u);
}

TEST(ActivationDispatch, BestAndDerivedTagsMatchTheirVariant) {
  auto x = activation_inputs(1001, 7);
  auto up = test::random_floats(1001, 1.0f, 8);
  test::expect_dispatch_matches_variants([&]<class A>(A) {
    test::unaligned_floats silu(1001), gelu(1001), swiglu(1001);
    kernels::silu<A>(x.cview(), silu.view());
    kernels::gelu<A>(x.cview(), gelu.view());
    kernels::silu_mul<A>(x.cview(), up.cview(), swiglu.view());
    std::vector<float> all(silu.data(), silu.data() + 1001);
    all.insert(all.end(), gelu.data(), gelu.data() + 1001);
    all.insert(all.end(), swiglu.data(), swiglu.data() + 1001);
    return all;
  });
}

}  // namespace
