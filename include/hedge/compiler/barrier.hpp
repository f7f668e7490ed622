// hedge/compiler/barrier.hpp: a register barrier and a compiler fence.
//
// `opaque(v)` returns v as a value the compiler can neither see through nor
// rebuild: an empty asm statement that claims to modify the vector register
// holding it. Two uses:
// - a constant made once before a loop: for want of registers, GCC otherwise
//   rematerialises it from immediates in every iteration (a move and a broadcast
//   each) instead of keeping it or reloading it with one load;
// - a value loaded in one unrolled step: without the barrier GCC merges the load
//   into each of several uses (a memory operand per instruction) or hoists it.
//
// One overload per vector type, carrying the target attribute of the ISA that owns
// the register, so a baseline build accepts the asm constraint for a 256- or 512-bit
// value and the barrier inlines into the kernels of that ISA.
#pragma once

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"

namespace hedge::compiler {

#if HEDGE_SIMD_X86
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i opaque(__m256i v) noexcept {
  __asm__("" : "+x"(v));
  return v;
}
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256 opaque(__m256 v) noexcept {
  __asm__("" : "+x"(v));
  return v;
}
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m512i opaque(__m512i v) noexcept {
  __asm__("" : "+v"(v));
  return v;
}
HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE __m512 opaque(__m512 v) noexcept {
  __asm__("" : "+v"(v));
  return v;
}
#endif

#if HEDGE_SIMD_NEON
template <class V>
HEDGE_ALWAYS_INLINE V opaque(V v) noexcept {
  __asm__("" : "+w"(v));
  return v;
}
#endif

/// A compiler fence: no instruction, but GCC neither merges nor moves memory accesses
/// across it. Between two stretches of unrolled work that read the same memory (two weight
/// pairs against the same activation), it keeps the second's loads where they are written,
/// where GCC would otherwise hoist them into the first and spill what no longer fits.
HEDGE_ALWAYS_INLINE void fence() noexcept { __asm__ volatile("" ::: "memory"); }

}  // namespace hedge::compiler
