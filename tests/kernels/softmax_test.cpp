#include "hedge/kernels/softmax.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "hedge/compiler/intrinsics.hpp"
#include "hedge/kernels/detail/vector_math.hpp"

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

// Tolerance 1e-5 relative: exp is within a few ulp (std::exp, the vector exp
// of detail/vector_math.hpp and xsimd::exp), the argument x - max is exact up to one rounding (relative 6e-8 of
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

// A fully masked row has no finite logit: -inf - max(-inf) is NaN, as documented.
TYPED_TEST(Softmax, FullyMaskedRowGivesNaN) {
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(33)}) {
    test::unaligned_floats x(n), out(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = -std::numeric_limits<float>::infinity();
    kernels::softmax<TypeParam>(x.cview(), out.view());
    for (std::size_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(out[i])) << "n=" << n << " i=" << i;
  }
}

TEST(SoftmaxDispatch, BestAndDerivedTagsMatchTheirVariant) {
  auto x = test::random_floats(1001, 4.0f, 3);
  test::expect_dispatch_matches_variants([&]<class A>(A) {
    test::unaligned_floats out(1001);
    kernels::softmax<A>(x.cview(), out.view());
    return std::vector<float>(out.data(), out.data() + 1001);
  });
}

#if HEDGE_SIMD_X86
// The vector exp of kernels/detail/vector_math.hpp against e^x in double rounded
// to float. Its header states the accuracy measured over every float of
// [-104, 89]; this test checks every 251st float of that range (about 9M values).
HEDGE_TARGET_AVX2 void exp_avx2(const float* x, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 8) _mm256_storeu_ps(out + i, kernels::avx2::exp(_mm256_loadu_ps(x + i)));
}

HEDGE_TARGET_AVX512 void exp_avx512(const float* x, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) _mm512_storeu_ps(out + i, kernels::avx512::exp(_mm512_loadu_ps(x + i)));
}

/// The distance in representable floats between two finite floats.
std::int64_t ulp_distance(float a, float b) {
  auto ordered = [](float f) {
    std::int32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits < 0 ? -std::int64_t(bits & 0x7fffffff) : std::int64_t(bits);
  };
  return std::abs(ordered(a) - ordered(b));
}

template <class Exp>
void expect_exp_accurate(Exp exp, bool subnormal_results) {
  // Negative floats' bits grow with their magnitude: -104 (0xc2d00000) down to -0, then +0 up to 89.
  std::vector<float> x;
  for (std::int64_t bits = 0xc2d00000LL; bits > 0x80000000LL; bits -= 251) {
    const std::uint32_t b = std::uint32_t(bits);
    float v;
    std::memcpy(&v, &b, sizeof v);
    x.push_back(v);
  }
  for (std::uint32_t b = 0; b <= 0x42b20000u; b += 251) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    x.push_back(v);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -87.3365402f, -87.3365479f, 88.7228317f,
                  88.7228394f, 0.0f, -0.0f}) {
    x.push_back(v);
  }
  while (x.size() % 16 != 0) x.push_back(0.0f);
  std::vector<float> out(x.size());
  exp(x.data(), out.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float ref = float(std::exp(double(x[i])));
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(out[i]));
    } else if (ref == 0.0f || std::isinf(ref)) {
      ASSERT_EQ(out[i], ref) << "x=" << x[i];
    } else if (ref < std::numeric_limits<float>::min() && !subnormal_results) {
      ASSERT_EQ(out[i], 0.0f) << "x=" << x[i];  // AVX2 flushes subnormal results to 0
    } else {
      ASSERT_LE(ulp_distance(out[i], ref), 1) << "x=" << x[i] << " exp=" << out[i] << " ref=" << ref;
    }
  }
}

TEST(VectorExp, Avx2WithinOneUlpOfExp) {
  if (!arch::avx2::supported()) GTEST_SKIP() << "avx2 is not supported by this CPU";
  expect_exp_accurate(exp_avx2, false);
}

TEST(VectorExp, Avx512WithinOneUlpOfExp) {
  if (!arch::avx512bw::supported()) GTEST_SKIP() << "avx512bw is not supported by this CPU";
  expect_exp_accurate(exp_avx512, true);
}
#endif

}  // namespace
