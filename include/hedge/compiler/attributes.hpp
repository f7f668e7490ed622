// hedge/compiler/attributes.hpp: the compiler attributes hedge's kernels are written
// with, each defined once. Every SIMD kernel carries the target attribute of its arch
// tag instead of relying on -m flags, so a baseline x86-64 build still contains the AVX2
// and AVX-512 variants and runs them when CPUID says so (core/dispatch.hpp), while a
// -march=native build inlines them as usual.
//
//   HEDGE_SIMD_X86     1 when x86 variants are compiled (GCC or Clang, x86, no HEDGE_NO_SIMD)
//   HEDGE_SIMD_NEON    1 when AArch64 variants are compiled (no HEDGE_NO_SIMD)
//   HEDGE_TARGET_AVX2, HEDGE_TARGET_AVX512, HEDGE_TARGET_AVX512VNNI, HEDGE_TARGET_DOTPROD:
//                      the function attribute of the arch tags avx2, avx512bw, avx512vnni
//                      and neon_dotprod
//   HEDGE_TARGET_AVX512BF16: avx512vnni's plus AVX512_BF16, for code an avx512vnni kernel
//                      runs only after a run-time check (arch::detail::cpu().avx512bf16);
//                      no arch tag of its own
//   HEDGE_BEGIN_TARGET(HEDGE_FEATURES_AVX2) ... HEDGE_END_TARGET: every function defined
//                      between them (templates and lambdas included) gets that target, for
//                      code written once over a vector width (kernels/detail/for_each_width.inc)
//
// HEDGE_NO_SIMD (CMake option of the same name) compiles the scalar path only: a
// firmware build, or a binary for a CPU whose features cannot be trusted.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define HEDGE_ALWAYS_INLINE inline __attribute__((always_inline))
#define HEDGE_RESTRICT __restrict__
#else
#define HEDGE_ALWAYS_INLINE inline
#define HEDGE_RESTRICT
#endif

#if !defined(HEDGE_NO_SIMD) && (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define HEDGE_SIMD_X86 1
#else
#define HEDGE_SIMD_X86 0
#endif

#if !defined(HEDGE_NO_SIMD) && defined(__aarch64__)
#define HEDGE_SIMD_NEON 1
#else
#define HEDGE_SIMD_NEON 0
#endif

#if HEDGE_SIMD_X86
// Haswell / Zen: AVX2 with FMA and F16C (every AVX2 CPU has both).
#define HEDGE_FEATURES_AVX2 "avx2,fma,f16c"
#define HEDGE_TARGET_AVX2 __attribute__((target(HEDGE_FEATURES_AVX2)))
// Skylake-SP / Zen 4: AVX-512 F, BW, VL and DQ on top of AVX2.
#define HEDGE_FEATURES_AVX512 "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"
#define HEDGE_TARGET_AVX512 __attribute__((target(HEDGE_FEATURES_AVX512)))
// Cascade Lake / Zen 4: AVX-512 with VNNI (vpdpbusd, the int8 dot product).
#define HEDGE_TARGET_AVX512VNNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
// Cooper Lake / Sapphire Rapids / Zen 4: the above with AVX512_BF16 (vdpbf16ps).
#define HEDGE_TARGET_AVX512BF16 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16")))
#endif

#if HEDGE_SIMD_NEON
#if defined(__ARM_FEATURE_DOTPROD)  // the build targets it: no attribute, so these inline anywhere
#define HEDGE_TARGET_DOTPROD
#elif defined(__clang__)
#define HEDGE_TARGET_DOTPROD __attribute__((target("dotprod")))
#else
#define HEDGE_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#endif

#define HEDGE_PRAGMA(text) _Pragma(#text)
#if defined(__clang__)
#define HEDGE_BEGIN_TARGET(features) \
  HEDGE_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define HEDGE_END_TARGET HEDGE_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define HEDGE_BEGIN_TARGET(features) HEDGE_PRAGMA(GCC push_options) HEDGE_PRAGMA(GCC target(features))
#define HEDGE_END_TARGET HEDGE_PRAGMA(GCC pop_options)
#endif
