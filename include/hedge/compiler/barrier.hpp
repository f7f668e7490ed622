// hedge/compiler/barrier.hpp: a register barrier.
//
// `opaque(v)` returns v as a value the compiler can neither see through nor
// rebuild: an empty asm statement that claims to modify the vector register
// holding it. Two uses:
// - a constant made once before a loop: for want of registers, GCC otherwise
//   rematerialises it from immediates in every iteration (a move and a broadcast
//   each) instead of keeping it or reloading it with one load;
// - a value loaded in one unrolled step: without the barrier GCC merges the load
//   into each of several uses (a memory operand per instruction) or hoists it.
#pragma once

#include "hedge/compiler/attributes.hpp"

namespace hedge::compiler {

/// v, unchanged, kept in a vector register and hidden from the optimiser.
template <class V>
HEDGE_ALWAYS_INLINE V opaque(V v) noexcept {
#if HEDGE_SIMD_X86
  __asm__("" : "+x"(v));
#elif HEDGE_SIMD_NEON
  __asm__("" : "+w"(v));
#elif defined(__GNUC__) || defined(__clang__)
  __asm__("" : "+r"(v));
#endif
  return v;
}

}  // namespace hedge::compiler
