// hedge/core/arch.hpp: instruction-set tags, usable as template arguments.
//
// Kernels are overloaded (or specialised) on these tags. Tags inherit from the
// ISA they extend, as xsimd's do, so a kernel without an overload for
// `avx512vnni` falls back to the `avx512bw`, then `avx2`, then `scalar` one:
//
//   scalar <- avx2 <- avx512bw <- avx512vnni        scalar <- neon <- neon_dotprod
//             avx2 <- avxvnni
//
// Every SIMD kernel is an overload on one of these tags, compiled with the tag's
// function target attribute (compiler/attributes.hpp), so one binary can hold
// several variants. `arch::native` is the best tag the compiler targets (the
// build's -march); `arch::compiled` lists the tags whose kernels this build
// contains; core/dispatch.hpp picks among them at run time (`arch::best`).
// Which tags have kernels of their own is listed in docs/kernels.md.
#pragma once

#include <concepts>
#include <cstddef>
#include <string_view>

#include "hedge/core/config.hpp"

namespace hedge::arch {

namespace detail {
#if HEDGE_SIMD_X86
/// x86 features this library dispatches on, read once with CPUID and checked
/// against XCR0 so a feature the OS does not save on context switch is "absent".
struct x86_features {
  bool avx2 = false, fma = false, f16c = false, avxvnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false;
  // No tag of its own: the avx512vnni decode attention checks it at run time for bf16 keys.
  bool avx512bf16 = false;
};
inline x86_features read_x86_features() noexcept {
  auto cpuid = [](unsigned leaf, unsigned sub, unsigned r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
  };
  x86_features f;
  unsigned r[4];
  cpuid(0, 0, r);
  const unsigned max_leaf = r[0];
  cpuid(1, 0, r);
  const unsigned ecx1 = r[2];
  if (!(ecx1 & (1u << 27))) return f;  // no OSXSAVE: the OS manages no AVX state
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_avx = (xcr0_lo & 0x6u) == 0x6u;
  const bool os_avx512 = os_avx && (xcr0_lo & 0xE0u) == 0xE0u;
  if (!os_avx || max_leaf < 7) return f;
  f.fma = ecx1 & (1u << 12);
  f.f16c = ecx1 & (1u << 29);
  cpuid(7, 0, r);
  const unsigned ebx7 = r[1], ecx7 = r[2];
  f.avx2 = ebx7 & (1u << 5);
  f.avx512f = os_avx512 && (ebx7 & (1u << 16));
  f.avx512bw = os_avx512 && (ebx7 & (1u << 30));
  f.avx512vl = os_avx512 && (ebx7 & (1u << 31));
  f.avx512vnni = os_avx512 && (ecx7 & (1u << 11));
  cpuid(7, 1, r);
  f.avxvnni = r[0] & (1u << 4);
  f.avx512bf16 = os_avx512 && (r[0] & (1u << 5));
  return f;
}
inline const x86_features& cpu() noexcept {
  static const x86_features features = read_x86_features();
  return features;
}
#endif
}  // namespace detail

/// Portable C++: the specification every SIMD path is tested against.
struct scalar {
  static constexpr std::string_view name = "scalar";
  static constexpr std::size_t vector_bytes = 4;
  static bool supported() noexcept { return true; }
};

/// x86 AVX2 + FMA (Haswell, Zen): 256-bit lanes, int8 dot products via vpmaddubsw.
struct avx2 : scalar {
  static constexpr std::string_view name = "avx2";
  static constexpr std::size_t vector_bytes = 32;
  static bool supported() noexcept {
#if HEDGE_SIMD_X86
    return detail::cpu().avx2 && detail::cpu().fma && detail::cpu().f16c;
#else
    return false;
#endif
  }
};

/// x86 AVX2 + AVX-VNNI (Alder Lake, Zen 5): 256-bit vpdpbusd.
struct avxvnni : avx2 {
  static constexpr std::string_view name = "avxvnni";
  static bool supported() noexcept {
#if HEDGE_SIMD_X86
    return avx2::supported() && detail::cpu().avxvnni;
#else
    return false;
#endif
  }
};

/// x86 AVX-512 F/BW/VL (Skylake-SP, Zen 4): 512-bit lanes and mask registers.
struct avx512bw : avx2 {
  static constexpr std::string_view name = "avx512bw";
  static constexpr std::size_t vector_bytes = 64;
  static bool supported() noexcept {
#if HEDGE_SIMD_X86
    return avx2::supported() && detail::cpu().avx512f && detail::cpu().avx512bw && detail::cpu().avx512vl;
#else
    return false;
#endif
  }
};

/// x86 AVX-512 VNNI (Cascade Lake, Sapphire Rapids, Zen 4): 512-bit vpdpbusd.
struct avx512vnni : avx512bw {
  static constexpr std::string_view name = "avx512vnni";
  static bool supported() noexcept {
#if HEDGE_SIMD_X86
    return avx512bw::supported() && detail::cpu().avx512vnni;
#else
    return false;
#endif
  }
};

/// AArch64 Advanced SIMD: 128-bit lanes.
struct neon : scalar {
  static constexpr std::string_view name = "neon";
  static constexpr std::size_t vector_bytes = 16;
  static bool supported() noexcept {
#if HEDGE_SIMD_NEON
    return true;
#else
    return false;
#endif
  }
};

/// AArch64 with the dot-product extension (ARMv8.2 +dotprod): sdot/udot.
/// Support is a compile-time property here: user space cannot read the ID
/// registers portably, so build with -march=armv8.2-a+dotprod to enable it.
struct neon_dotprod : neon {
  static constexpr std::string_view name = "neon_dotprod";
  static bool supported() noexcept {
#if HEDGE_SIMD_NEON && defined(__ARM_FEATURE_DOTPROD)
    return true;
#else
    return false;
#endif
  }
};

/// The best tag the compiler targets; scalar when no SIMD is compiled (HEDGE_NO_SIMD).
#if !HEDGE_SIMD_X86 && !HEDGE_SIMD_NEON
using native = scalar;
#elif defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
using native = avx512vnni;
#elif defined(__AVX512BW__) && defined(__AVX512VL__)
using native = avx512bw;
#elif defined(__AVXVNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
using native = avxvnni;
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
using native = avx2;
#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
using native = neon_dotprod;
#elif defined(__aarch64__)
using native = neon;
#else
using native = scalar;
#endif

/// True for the tags defined above and for user tags derived from them.
template <class A>
concept Arch = requires {
  { A::name } -> std::convertible_to<std::string_view>;
  { A::supported() } -> std::convertible_to<bool>;
};

static_assert(Arch<native>);

/// A list of arch tags, best first.
template <Arch... Tags>
struct tag_list {
  static constexpr std::size_t size = sizeof...(Tags);
};

/// The tags whose kernels this build compiles, best first: every x86 variant in an
/// x86 build whatever its -march (each kernel carries its own target attribute),
/// NEON (and dot products when the build targets them) on AArch64, and scalar
/// alone in a HEDGE_NO_SIMD or firmware build. A tag without kernels of its own
/// (avxvnni: it runs its parent's) is not listed; avx512vnni has the VNNI GEMM
/// (kernels/matmul/avx512_interleaved.hpp) and decode attention (attention/decode_avx512.hpp)
/// and runs avx512bw's kernels elsewhere.
#if HEDGE_SIMD_X86
using compiled = tag_list<avx512vnni, avx512bw, avx2, scalar>;
#elif HEDGE_SIMD_NEON && defined(__ARM_FEATURE_DOTPROD)
using compiled = tag_list<neon_dotprod, neon, scalar>;
#elif HEDGE_SIMD_NEON
using compiled = tag_list<neon, scalar>;
#else
using compiled = tag_list<scalar>;
#endif

}  // namespace hedge::arch
