// A consumer of the hedge package: the umbrella header must build without Eigen.
#if __has_include(<Eigen/Core>)
#error "Eigen is on this consumer's include path; the package test must prove hedge works without it"
#endif

#include <hedge/hedge.hpp>

#include <cstdio>

int main() {
  hedge::result<float> r = hedge::f16_to_f32(hedge::f32_to_f16(1.5f));
  if (!r || *r != 1.5f) return 1;
  std::printf("hedge consumer ok: arch %.*s\n", static_cast<int>(hedge::arch::native::name.size()),
              hedge::arch::native::name.data());
  return 0;
}
