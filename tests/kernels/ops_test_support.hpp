// tests/kernels/ops_test_support.hpp: shared pieces of the elementwise kernel
// tests (norm, softmax, activation, elementwise, rope): the arch tags every
// test runs over, test sizes with SIMD tails, and unaligned random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"

namespace hedge::test {

/// Every arch tag: a typed test skips the tags this CPU cannot run; a tag
/// this build does not target runs its nearest targeted ancestor's code.
using all_arch_tags = ::testing::Types<arch::scalar, arch::avx2, arch::avxvnni, arch::avx512bw, arch::avx512vnni,
                                       arch::neon, arch::neon_dotprod>;

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

/// Sizes around every SIMD width (4, 8, 16 floats) and the 4x unrolled loops,
/// plus model sizes (4096, 11008) and odd ones.
inline constexpr std::size_t ops_test_sizes[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1001, 4096, 4099, 11008};

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
