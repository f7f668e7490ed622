#include "hedge/kernels/elementwise.hpp"

#include <gtest/gtest.h>

#include "kernels/ops_test_support.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge;

template <class A>
class Elementwise : public test::arch_test<A> {};
TYPED_TEST_SUITE(Elementwise, test::ops_arch_tags, test::arch_tag_name);

// One IEEE operation per element: every path equals the float result exactly.
TYPED_TEST(Elementwise, AddMulScaleAreExact) {
  for (std::size_t n : test::ops_test_sizes) {
    auto a = test::random_floats(n, 1.0f, 61 + unsigned(n));
    auto b = test::random_floats(n, 3.0f, 71 + unsigned(n));
    test::unaligned_floats sum(n), product(n), scaled(n);
    kernels::add<TypeParam>(a.cview(), b.cview(), sum.view());
    kernels::mul<TypeParam>(a.cview(), b.cview(), product.view());
    kernels::scale<TypeParam>(a.cview(), 0.125f, scaled.view());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(sum[i], a[i] + b[i]) << "n=" << n << " i=" << i;
      ASSERT_EQ(product[i], a[i] * b[i]) << "n=" << n << " i=" << i;
      ASSERT_EQ(scaled[i], a[i] * 0.125f) << "n=" << n << " i=" << i;
    }
  }
}

TYPED_TEST(Elementwise, InPlaceResidualAdd) {
  auto x = test::random_floats(1001, 1.0f, 1);
  auto residual = test::random_floats(1001, 1.0f, 2);
  test::unaligned_floats expected(1001);
  for (std::size_t i = 0; i < 1001; ++i) expected[i] = x[i] + residual[i];
  test::alloc_scope scope;
  kernels::add<TypeParam>(x.cview(), residual.cview(), x.view());
  kernels::scale<TypeParam>(residual.cview(), 2.0f, residual.view());
  EXPECT_EQ(scope.count(), 0u);
  for (std::size_t i = 0; i < 1001; ++i) ASSERT_EQ(x[i], expected[i]) << i;
}

TEST(ElementwiseDispatch, BestAndDerivedTagsMatchTheirVariant) {
  auto a = test::random_floats(1001, 1.0f, 3);
  auto b = test::random_floats(1001, 1.0f, 4);
  test::expect_dispatch_matches_variants([&]<class A>(A) {
    test::unaligned_floats sum(1001), product(1001), scaled(1001);
    kernels::add<A>(a.cview(), b.cview(), sum.view());
    kernels::mul<A>(a.cview(), b.cview(), product.view());
    kernels::scale<A>(a.cview(), 0.3f, scaled.view());
    std::vector<float> all(sum.data(), sum.data() + 1001);
    all.insert(all.end(), product.data(), product.data() + 1001);
    all.insert(all.end(), scaled.data(), scaled.data() + 1001);
    return all;
  });
}

}  // namespace
