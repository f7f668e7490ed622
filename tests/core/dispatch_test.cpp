#include "hedge/core/dispatch.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string_view>
#include <type_traits>

namespace {

namespace arch = hedge::arch;

template <class... Tags>
std::string_view first_supported_name(arch::tag_list<Tags...>) {
  std::string_view name;
  static_cast<void>(((Tags::supported() ? (name = Tags::name, true) : false) || ...));  // clang -Wunused-value
  return name;
}

TEST(Dispatch, BestIsTheFirstCompiledTagThisCpuRuns) {
  const std::string_view chosen = arch::visit<arch::best>([](auto tag) { return decltype(tag)::name; });
  EXPECT_EQ(chosen, arch::best_name());
  if constexpr (arch::best_is_static) {
    EXPECT_EQ(chosen, arch::native::name) << "a build whose -march covers every variant resolves best statically";
  } else {
    EXPECT_EQ(chosen, first_supported_name(arch::compiled{}));
  }
  std::printf("arch::best runs %.*s (compiled variants: %zu, static: %d)\n", static_cast<int>(chosen.size()),
              chosen.data(), arch::compiled::size, int(arch::best_is_static));
}

TEST(Dispatch, ChosenTagIsSupported) {
  const bool supported = arch::visit<arch::best>([](auto tag) { return decltype(tag)::supported(); });
  EXPECT_TRUE(supported);
}

TEST(Dispatch, ConcreteTagsPassThrough) {
  EXPECT_EQ(arch::visit<arch::scalar>([](auto tag) { return decltype(tag)::name; }), "scalar");
  EXPECT_EQ(arch::visit<arch::avx2>([](auto tag) { return decltype(tag)::name; }), "avx2");
}

#if HEDGE_SIMD_X86
// Every x86 build, baseline included, carries the AVX2 and AVX-512 variants and runs
// the best one this CPU has.
TEST(Dispatch, X86BuildsRunTheirBestVariant) {
  static_assert(
      std::is_same_v<arch::compiled, arch::tag_list<arch::avx512vnni, arch::avx512bw, arch::avx2, arch::scalar>>);
  const std::string_view chosen = arch::visit<arch::best>([](auto tag) { return decltype(tag)::name; });
  if (arch::avx512vnni::supported()) {
    EXPECT_TRUE(chosen == "avx512vnni" || chosen == arch::native::name) << chosen;
  } else if (arch::avx512bw::supported()) {
    EXPECT_TRUE(chosen == "avx512bw" || chosen == arch::native::name) << chosen;
  } else if (arch::avx2::supported()) {
    EXPECT_EQ(chosen, "avx2");
  } else {
    EXPECT_EQ(chosen, "scalar");
  }
}
#endif

#if defined(HEDGE_NO_SIMD)
static_assert(std::is_same_v<arch::compiled, arch::tag_list<arch::scalar>>);
static_assert(arch::best_is_static);
#endif

}  // namespace
