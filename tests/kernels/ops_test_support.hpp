// tests/kernels/ops_test_support.hpp: shared pieces of the elementwise kernel
// tests (norm, softmax, activation, elementwise, rope): the arch tags every
// test runs over, test sizes with every SIMD tail, and unaligned random inputs.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/view.hpp"

namespace hedge::test {

/// The typed tests' tags: every variant this build compiles (arch::compiled) and
/// arch::best. A typed test skips the tags this CPU cannot run.
template <class List>
struct ops_arch_types;
template <class... Tags>
struct ops_arch_types<arch::tag_list<Tags...>> {
  using type = ::testing::Types<Tags..., arch::best>;
};
using ops_arch_tags = ops_arch_types<arch::compiled>::type;

/// Base of the typed test fixtures: skips the tags this CPU cannot run.
template <class A>
class arch_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!A::supported()) GTEST_SKIP() << A::name << " is not supported by this CPU";
  }
};

/// Names typed tests after the tag (`RmsNorm/avx2.…`) instead of its index.
struct arch_tag_name {
  template <class A>
  static std::string GetName(int) {
    return std::string(A::name);
  }
};

/// f(tag) for the first tag of arch::compiled this CPU supports: the variant
/// arch::best must run, found without core/dispatch.hpp.
template <class F>
void with_first_supported_tag(F f) {
  [&]<class... Tags>(arch::tag_list<Tags...>) {
    bool done = false;
    ((!done && Tags::supported() ? (f(Tags{}), done = true) : false), ...);
  }(arch::compiled{});
}

/// f(derived, parent) for each tag that has no overloads of its own and the tag
/// whose overloads it runs (core/arch.hpp), where this CPU runs the derived tag.
template <class F>
void for_each_derived_tag(F f) {
  auto check = [&]<class Derived, class Parent>(Derived, Parent) {
    if (Derived::supported()) f(Derived{}, Parent{});
  };
  check(arch::avxvnni{}, arch::avx2{});
  check(arch::avx512vnni{}, arch::avx512bw{});
  check(arch::neon_dotprod{}, arch::neon{});
}

/// The widest vector of any variant, in floats (AVX-512).
inline constexpr std::size_t widest_lanes = 16;

/// Every size 1..2 * widest_lanes + 1, so each variant meets every tail length
/// after zero, one and two full vectors (and the 4x unrolled loops of the
/// narrower ones), plus model sizes (4096, 11008) and odd ones.
inline constexpr auto ops_test_sizes = [] {
  constexpr std::size_t large[] = {63, 64, 65, 100, 1001, 4096, 4099, 11008};
  std::array<std::size_t, 2 * widest_lanes + 1 + std::size(large)> sizes{};
  for (std::size_t i = 0; i < 2 * widest_lanes + 1; ++i) sizes[i] = i + 1;
  for (std::size_t i = 0; i < std::size(large); ++i) sizes[2 * widest_lanes + 1 + i] = large[i];
  return sizes;
}();
static_assert(arch::avx512bw::vector_bytes / sizeof(float) == widest_lanes);

/// Whether two float vectors hold the same bits (NaNs included).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Checks the dispatch of an entry point, given run(tag): the kernel's output for
/// fixed inputs with `tag` as its arch. arch::best must give the bits of the first
/// compiled tag this CPU supports, and a derived tag those of its parent.
template <class Run>
void expect_dispatch_matches_variants(Run run) {
  const std::vector<float> best = run(arch::best{});
  with_first_supported_tag([&]<class A>(A) {
    // Where best is static it is arch::native, the build's tag, which may derive from A.
    EXPECT_TRUE((arch::best_is_static ? std::is_base_of_v<A, arch::native> : arch::best_name() == A::name))
        << arch::best_name() << " is not " << A::name;
    EXPECT_TRUE(same_bits(best, run(A{}))) << "arch::best differs from " << A::name;
  });
  for_each_derived_tag([&]<class Derived, class Parent>(Derived, Parent) {
    EXPECT_TRUE(same_bits(run(Derived{}), run(Parent{}))) << Derived::name << " differs from " << Parent::name;
  });
}

/// A float vector whose data() is 4 bytes past a 64-byte boundary, so SIMD
/// loads and stores are never aligned.
class unaligned_floats {
 public:
  explicit unaligned_floats(std::size_t n) : storage_(n + 17) {}
  // A copy's buffer may sit at another offset from a 64-byte boundary.
  unaligned_floats(const unaligned_floats&) = delete;
  unaligned_floats& operator=(const unaligned_floats&) = delete;
  unaligned_floats(unaligned_floats&&) = default;
  unaligned_floats& operator=(unaligned_floats&&) = default;
  [[nodiscard]] float* data() noexcept { return first(); }
  [[nodiscard]] std::size_t size() const noexcept { return storage_.size() - 17; }
  float& operator[](std::size_t i) noexcept { return first()[i]; }
  [[nodiscard]] vector_view<float> view() noexcept { return {first(), size()}; }
  [[nodiscard]] vector_view<const float> cview() noexcept { return {first(), size()}; }

 private:
  float* first() noexcept {
    auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
    const std::size_t skip = ((64 - address % 64) % 64) / sizeof(float) + 1;
    return storage_.data() + skip;
  }
  std::vector<float> storage_;
};

/// n values from a normal distribution with the given standard deviation (seeded: reproducible).
inline unaligned_floats random_floats(std::size_t n, float stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  unaligned_floats out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = dist(rng);
  return out;
}

}  // namespace hedge::test
