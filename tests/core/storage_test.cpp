#include "hedge/core/storage.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support/alloc_counter.hpp"

namespace {
bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }
}  // namespace

static_assert(hedge::Storage<hedge::static_storage<float, 3>>);
static_assert(hedge::Storage<hedge::buffer_storage<float>>);
static_assert(hedge::Storage<hedge::heap_storage<float>>);
static_assert(hedge::static_storage<int, 100>::size() == 100);
static_assert(alignof(hedge::static_storage<char, 1>) == 64);

TEST(Storage, StaticIsInObjectAlignedAndZeroed) {
  {
    hedge::test::alloc_scope scope;
    struct holder {
      char pad;
      hedge::static_storage<float, 33> s;
    } h{};
    EXPECT_TRUE(aligned64(h.s.data()));
    for (float x : h.s.span()) EXPECT_EQ(x, 0.0f);
    EXPECT_EQ(scope.count(), 0u);
  }
}

TEST(Storage, BufferChecksAlignment) {
  alignas(64) static float memory[64];
  auto ok = hedge::buffer_storage<float>::make({memory, 64});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->data(), memory);
  EXPECT_EQ(ok->size(), 64u);
  auto bad = hedge::buffer_storage<float>::make({memory + 1, 8});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), hedge::errc::misaligned);
  EXPECT_NE(bad.error().message().find("64-byte"), std::string_view::npos);
}

TEST(Storage, HeapAllocatesOnceAlignedAndMoves) {
  hedge::test::alloc_scope scope;
  auto h = hedge::heap_storage<double>::make(1000);
  ASSERT_TRUE(h);
  EXPECT_EQ(scope.count(), 1u);
  EXPECT_TRUE(aligned64(h->data()));
  for (double x : h->span()) ASSERT_EQ(x, 0.0);
  hedge::heap_storage<double> moved = std::move(*h);
  EXPECT_EQ(moved.size(), 1000u);
  EXPECT_EQ(h->data(), nullptr);
  EXPECT_EQ(scope.count(), 1u);
}

TEST(Storage, HeapReportsImpossibleSizes) {
  auto h = hedge::heap_storage<double>::make(SIZE_MAX / 4);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code(), hedge::errc::out_of_memory);
}
