// The umbrella header alone, for a target the host build does not cover: baseline
// ARMv8-A (tests/CMakeLists.txt compiles it with aarch64 g++ and clang++), where the
// dot-product kernels must still compile under a target attribute. The function below
// makes the compiler emit and assemble the sdot path, which a header alone does not.
#include "hedge/hedge.hpp"

#if HEDGE_SIMD_NEON
HEDGE_TARGET_DOTPROD int32x4_t hedge_umbrella_sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
  return hedge::kernels::matmul::neon::sdot(acc, a, b);
}
#endif
