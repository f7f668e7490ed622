#include "hedge/core/arch.hpp"

#include <gtest/gtest.h>

#include <type_traits>

namespace {

// Kernels overload on the tag; a tag without its own overload falls back to its parent.
constexpr int which(hedge::arch::scalar) { return 0; }
constexpr int which(hedge::arch::avx2) { return 2; }
constexpr int which(hedge::arch::neon) { return 5; }

template <hedge::arch::Arch A = hedge::arch::native>
constexpr int dispatch() {
  return which(A{});
}

// A user tag: derives from the ISA it extends and inherits its kernels.
struct my_avx2_variant : hedge::arch::avx2 {
  static constexpr std::string_view name = "my_avx2_variant";
};

}  // namespace

static_assert(dispatch<hedge::arch::scalar>() == 0);
static_assert(dispatch<hedge::arch::avx512vnni>() == 2, "falls back through avx512bw to avx2");
static_assert(dispatch<hedge::arch::avxvnni>() == 2);
static_assert(dispatch<hedge::arch::neon_dotprod>() == 5);
static_assert(dispatch<my_avx2_variant>() == 2);
static_assert(std::is_base_of_v<hedge::arch::avx512bw, hedge::arch::avx512vnni>);

TEST(Arch, NativeIsSupportedByThisCpu) {
  EXPECT_TRUE(hedge::arch::native::supported()) << hedge::arch::native::name;
  EXPECT_TRUE(hedge::arch::scalar::supported());
}

TEST(Arch, FeatureHierarchyIsConsistent) {
  if (hedge::arch::avx512vnni::supported()) {
    EXPECT_TRUE(hedge::arch::avx512bw::supported());
  }
  if (hedge::arch::avx512bw::supported()) {
    EXPECT_TRUE(hedge::arch::avx2::supported());
  }
  if (hedge::arch::avxvnni::supported()) {
    EXPECT_TRUE(hedge::arch::avx2::supported());
  }
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  EXPECT_TRUE(hedge::arch::avx2::supported()) << "compiled for AVX2 but CPUID disagrees";
#endif
#if HEDGE_SIMD_X86
  // AVX512_BF16 (CPUID 7.1 EAX bit 5) has no tag; the avx512vnni decode attention reads it.
  if (hedge::arch::detail::cpu().avx512bf16) {
    EXPECT_TRUE(hedge::arch::avx512bw::supported());
  }
#if defined(__AVX512BF16__)
  EXPECT_TRUE(hedge::arch::detail::cpu().avx512bf16) << "compiled for AVX512_BF16 but CPUID disagrees";
#endif
#endif
#if defined(__x86_64__)
  EXPECT_FALSE(hedge::arch::neon::supported());
#endif
}

TEST(Arch, NativeFollowsTheBuild) {
#if defined(HEDGE_NO_SIMD)
  EXPECT_EQ(hedge::arch::native::name, "scalar");
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__AVX512BW__) && !defined(__AVXVNNI__)
  EXPECT_EQ(hedge::arch::native::name, "avx2");
#endif
}
