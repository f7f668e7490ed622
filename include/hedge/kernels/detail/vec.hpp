// hedge/kernels/detail/vec.hpp: vec<A>, the float vector of arch tag A as the
// elementwise kernels (norm, softmax, activation, elementwise) see it. Each kernel's
// SIMD path is written once over vec<A> (detail/for_each_width.inc instantiates it per
// width); adding a width is one specialisation here and one entry in for_each_width.inc.
//
// Every vec<A> has:
//   type, lanes                    the register and its float count
//   masked_tail                    true: the last n % lanes elements go through
//                                  load_first / store_first / keep_first (lanes past
//                                  the count read 0 or `fill` and are not written);
//                                  false: the kernels finish them with scalar code
//   zero, broadcast, load, store   unaligned loads and stores
//   add, sub, mul, div, max, fma   one IEEE operation per lane (fma(a, b, c) = a b + c,
//                                  rounded once)
//   exp                            e^x per lane (detail/vector_math.hpp; xsimd's on NEON)
//   reduce_add, reduce_max         the sum and the largest of the lanes (no NaN lanes),
//                                  in a fixed order, so results do not depend on the call
//
// The scalar references (arch::scalar overloads) are not written over vec: they are the
// specification (double sums where ggml uses them), not a one-lane vector.
#pragma once

#include <cstddef>
#include <limits>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/config.hpp"
#include "hedge/kernels/detail/vector_math.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"

namespace hedge::kernels::detail {

/// The float vector of arch tag A (see file comment); defined for the tags with a width of their own.
template <class A>
struct vec;

#if HEDGE_SIMD_X86
template <>
struct vec<arch::avx2> {
  using type = __m256;
  static constexpr std::size_t lanes = 8;
  static constexpr bool masked_tail = false;

  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type zero() noexcept { return _mm256_setzero_ps(); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type broadcast(float s) noexcept { return _mm256_set1_ps(s); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type load(const float* p) noexcept { return _mm256_loadu_ps(p); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static void store(float* p, type v) noexcept { _mm256_storeu_ps(p, v); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type add(type a, type b) noexcept { return _mm256_add_ps(a, b); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type sub(type a, type b) noexcept { return _mm256_sub_ps(a, b); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type mul(type a, type b) noexcept { return _mm256_mul_ps(a, b); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type div(type a, type b) noexcept { return _mm256_div_ps(a, b); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type max(type a, type b) noexcept { return _mm256_max_ps(a, b); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type fma(type a, type b, type c) noexcept {
    return _mm256_fmadd_ps(a, b, c);
  }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static type exp(type x) noexcept { return kernels::avx2::exp(x); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static float reduce_add(type v) noexcept { return matmul::avx2::sum_lanes(v); }
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static float reduce_max(type v) noexcept { return matmul::avx2::max_lanes(v); }
};

template <>
struct vec<arch::avx512bw> {
  using type = __m512;
  static constexpr std::size_t lanes = 16;
  static constexpr bool masked_tail = true;

  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type zero() noexcept { return _mm512_setzero_ps(); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type broadcast(float s) noexcept { return _mm512_set1_ps(s); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static void store(float* p, type v) noexcept { _mm512_storeu_ps(p, v); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type add(type a, type b) noexcept { return _mm512_add_ps(a, b); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type sub(type a, type b) noexcept { return _mm512_sub_ps(a, b); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type mul(type a, type b) noexcept { return _mm512_mul_ps(a, b); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type div(type a, type b) noexcept { return _mm512_div_ps(a, b); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type max(type a, type b) noexcept { return _mm512_max_ps(a, b); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type fma(type a, type b, type c) noexcept {
    return _mm512_fmadd_ps(a, b, c);
  }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type exp(type x) noexcept { return kernels::avx512::exp(x); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static float reduce_add(type v) noexcept { return kernels::avx512::sum(v); }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static float reduce_max(type v) noexcept { return kernels::avx512::max(v); }
  /// The first `count` (< lanes) floats at p; the other lanes `fill`.
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type load_first(const float* p, std::size_t count,
                                                                  type fill) noexcept {
    return _mm512_mask_loadu_ps(fill, kernels::avx512::first_lanes(count), p);
  }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type load_first(const float* p, std::size_t count) noexcept {
    return _mm512_maskz_loadu_ps(kernels::avx512::first_lanes(count), p);
  }
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static void store_first(float* p, std::size_t count, type v) noexcept {
    _mm512_mask_storeu_ps(p, kernels::avx512::first_lanes(count), v);
  }
  /// v with the lanes from `count` on set to 0.
  HEDGE_TARGET_AVX512 HEDGE_ALWAYS_INLINE static type keep_first(std::size_t count, type v) noexcept {
    return _mm512_maskz_mov_ps(kernels::avx512::first_lanes(count), v);
  }
};
#endif

#if HEDGE_SIMD_NEON && HEDGE_HAS_XSIMD
template <>
struct vec<arch::neon> {
  using type = kernels::neon::floats;
  static constexpr std::size_t lanes = type::size;
  static constexpr bool masked_tail = false;

  static type zero() noexcept { return type(0.0f); }
  static type broadcast(float s) noexcept { return type(s); }
  static type load(const float* p) noexcept { return type::load_unaligned(p); }
  static void store(float* p, type v) noexcept { v.store_unaligned(p); }
  static type add(type a, type b) noexcept { return a + b; }
  static type sub(type a, type b) noexcept { return a - b; }
  static type mul(type a, type b) noexcept { return a * b; }
  static type div(type a, type b) noexcept { return a / b; }
  static type max(type a, type b) noexcept { return xsimd::max(a, b); }
  static type fma(type a, type b, type c) noexcept { return xsimd::fma(a, b, c); }
  static type exp(type x) noexcept { return xsimd::exp(x); }
  static float reduce_add(type v) noexcept { return xsimd::hadd(v); }
  static float reduce_max(type v) noexcept {
    alignas(16) float lane[lanes];
    v.store_aligned(lane);
    float largest = -std::numeric_limits<float>::infinity();
    for (float l : lane) largest = l > largest ? l : largest;
    return largest;
  }
};
#endif

}  // namespace hedge::kernels::detail
