#include "hedge/core/view.hpp"

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <vector>

TEST(View, VectorViewIndexesAndSlices) {
  std::array<int, 10> a{};
  std::iota(a.begin(), a.end(), 0);
  hedge::vector_view<int> v{std::span<int>{a}};
  EXPECT_EQ(v.size(), 10u);
  EXPECT_EQ(v[3], 3);
  auto sub = v.subview(2, 5);
  EXPECT_EQ(sub.size(), 5u);
  EXPECT_EQ(sub[0], 2);
  EXPECT_EQ(std::accumulate(sub.begin(), sub.end(), 0), 2 + 3 + 4 + 5 + 6);
  hedge::vector_view<const int> c = v;  // mutable -> const converts implicitly
  EXPECT_EQ(c.data(), a.data());
}

TEST(View, MatrixViewStrideRowsAndBlocks) {
  // 3 x 4 matrix stored with a padded stride of 6.
  std::array<float, 18> storage{};
  hedge::matrix_view<float> m{storage.data(), 3, 4, 6};
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 4; ++c) m(r, c) = static_cast<float>(10 * r + c);
  EXPECT_FALSE(m.dense());
  EXPECT_EQ(storage[6 + 1], 11.0f);
  EXPECT_EQ(storage[4], 0.0f);  // padding untouched
  EXPECT_EQ(m.row(2)[3], 23.0f);
  auto b = m.block(1, 1, 2, 2);
  EXPECT_EQ(b(0, 0), 11.0f);
  EXPECT_EQ(b(1, 1), 22.0f);
  EXPECT_EQ(b.stride(), 6u);
  auto rows = m.row_range(1, 2);
  EXPECT_EQ(rows.rows(), 2u);
  EXPECT_EQ(rows(1, 0), 20.0f);
  hedge::matrix_view<const float> cm = m;
  EXPECT_EQ(cm(2, 2), 22.0f);
}

#if !defined(NDEBUG) || defined(HEDGE_DEBUG_CHECKS)
TEST(ViewDeathTest, OutOfBoundsAbortsInDebugBuilds) {
  std::array<int, 4> a{};
  hedge::vector_view<int> v{a.data(), a.size()};
  EXPECT_DEATH((void)v[4], "");
  hedge::matrix_view<int> m{a.data(), 2, 2};
  EXPECT_DEATH((void)m(0, 2), "");
  EXPECT_DEATH((void)m.row(2), "");
}
#endif

TEST(View, VectorViewFromContainers) {
  std::vector<float> v(5, 1.0f);
  std::array<float, 3> a{1, 2, 3};
  hedge::vector_view<float> from_vector = v;
  hedge::vector_view<const float> from_array = a;
  const std::vector<float>& cv = v;
  hedge::vector_view<const float> from_const = cv;
  EXPECT_EQ(from_vector.size(), 5u);
  EXPECT_EQ(from_vector.data(), v.data());
  EXPECT_EQ(from_array[2], 3.0f);
  EXPECT_EQ(from_const.data(), v.data());
  static_assert(!std::is_constructible_v<hedge::vector_view<float>, const std::vector<float>&>,
                "a view of mutable floats cannot be made from a const container");
  static_assert(!std::is_constructible_v<hedge::vector_view<float>, std::vector<double>&>);
}
