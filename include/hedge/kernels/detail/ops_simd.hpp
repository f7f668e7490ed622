// hedge/kernels/detail/ops_simd.hpp: which float SIMD path an arch tag takes in
// the elementwise kernels (norm, softmax, activation, elementwise, rope).
//
// These kernels have two implementations: the scalar reference, overloaded on
// `arch::scalar`, and one generic xsimd implementation for every tag whose
// float lanes xsimd can emit in this build. `float_lanes<A>` maps a tag to the
// tag whose implementation it runs: itself when the build targets its ISA,
// else the nearest ancestor that the build does target (an `avx512vnni`
// request in an AVX2-only build runs the `avx2` path), else `scalar`.
#pragma once

#include <cstddef>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/core/config.hpp"

#if HEDGE_HAS_XSIMD
#include <xsimd/xsimd.hpp>
#endif

namespace hedge::kernels::detail {

#if HEDGE_HAS_XSIMD
/// A tag whose float lanes xsimd emits in this build: it names an xsimd arch
/// and the compiler targets that ISA (xsimd's `supported()` is compile-time).
template <class A>
concept xsimd_float_arch = arch::Arch<A> && requires { typename A::xsimd_arch; } && A::xsimd_arch::supported();

/// The float vector type of tag A.
template <xsimd_float_arch A>
using float_batch = xsimd::batch<float, typename A::xsimd_arch>;
#else
template <class A>
concept xsimd_float_arch = false;
#endif

template <class A, class Parent>
using if_targeted = std::conditional_t<std::is_base_of_v<Parent, A> && xsimd_float_arch<Parent>, Parent, arch::scalar>;

/// The tag whose elementwise implementation tag A runs (see file comment).
template <arch::Arch A>
using float_lanes = std::conditional_t<
    xsimd_float_arch<A>, A,
    std::conditional_t<xsimd_float_arch<if_targeted<A, arch::avx512bw>>, if_targeted<A, arch::avx512bw>,
                       std::conditional_t<xsimd_float_arch<if_targeted<A, arch::avx2>>, if_targeted<A, arch::avx2>,
                                          if_targeted<A, arch::neon>>>>;

static_assert(std::is_same_v<float_lanes<arch::scalar>, arch::scalar>);

/// Whether [a, a + n) and [b, b + n) are the same range or do not overlap: the
/// only aliasing the elementwise kernels accept (in-place or disjoint).
inline bool same_or_disjoint(const float* a, const float* b, std::size_t n) noexcept {
  return a == b || a + n <= b || b + n <= a;
}

}  // namespace hedge::kernels::detail
